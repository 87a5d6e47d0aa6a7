package config_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/kubemedic/kubemedic/alertbridge/config"
)

// FuzzParse checks that Parse never panics, that every error it returns is
// located in the source, and that what it accepts is usable.
func FuzzParse(f *testing.F) {
	deployed, err := os.ReadFile("../../deploy/alertbridge/config.yaml")
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{
		string(deployed),
		full,
		"",
		"~",
		"- a\n",
		"defaultRepo: acme/gpu-oncall\n",
		"defaultRepo: acme/x\n---\ndefaultRepo: acme/y\n",
		"defaultRepo: acme/x\nroutes: &r [*r]\n",
		"defaultRepo: acme/x\nx: &x {window: 1m}\nstormGuard:\n  <<: *x\n",
		"defaultRepo: acme/x\nstormGuard: {maxNewIssues: 0x7fffffffffffffff, window: 1y}\n",
		"defaultRepo: acme/x\nroutes:\n  - matchers: ['a=~\"(\"', 'b!~\".*\"']\n    repo: a/b\n",
		"defaultRepo: acme/x\ntemplates:\n  body: |\n    {{ range .Alerts }}{{ .Labels.node }}{{ end }}\n  labels: ['{{ .Nope }}']\n",
		"defaultRepo: acme/x\nidentityLabel: a\x01\n",
		"defaultRepo: [\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := config.Parse(src, data)
		if err != nil {
			if cfg != nil {
				t.Fatalf("a config and an error: %v", err)
			}
			errs := []error{err}
			if j, ok := err.(interface{ Unwrap() []error }); ok {
				errs = j.Unwrap()
			}
			for _, e := range errs {
				var fe *config.FieldError
				if !errors.As(e, &fe) || fe.Line < 1 || !strings.HasPrefix(e.Error(), src+":") {
					t.Fatalf("error not located in %s: %q", src, e)
				}
			}
			return
		}
		if cfg.Source != src {
			t.Fatalf("Source = %q", cfg.Source)
		}
		if _, err := config.ParseRepo(cfg.DefaultRepo.String()); err != nil {
			t.Fatalf("accepted a bad default repo: %v", err)
		}
		for _, r := range cfg.Repos() {
			if _, err := config.ParseRepo(r.String()); err != nil {
				t.Fatalf("accepted a bad repo: %v", err)
			}
		}
		_ = cfg.RouteFor(map[string]string{"team": "gpu"})
		_ = cfg.AssigneesFor(map[string]string{"team": "gpu"})
	})
}
