package main

import (
	"os"

	"github.com/kubemedic/kubemedic/cmd/kubemedic-demo/democli"
)

func main() {
	os.Exit(democli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
