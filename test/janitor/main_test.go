package janitor_test

import (
	"flag"
	"os"
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

var verbose = flag.Bool("janitor.log", false, "print the janitor's log")

func TestMain(m *testing.M) {
	flag.Parse()
	if *verbose {
		ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.WriteTo(os.Stderr)))
	}
	os.Exit(m.Run())
}
