package cmd_test

import (
	"os/exec"
	"path"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/kubemedic/kubemedic"

// shipped are the binaries that ship, in images or as the ops CLI; demo
// is the one that does not. A binary under cmd/ in neither list fails the
// test, so that a new one is classified when it is added.
var (
	shipped = []string{"kubemedic", "kubemedic-detect", "kubemedic-remediator", "kubemedic-alertbridge", "kubemedic-janitor", "kubemedic-diag", "kubemedic-validate"}
	demo    = "kubemedic-demo"
)

// forbidden are what no shipped binary may link: test code, stand-ins for
// the external edges, and the local cluster that runs envtest. A path
// ending in "/" forbids everything under it.
var forbidden = []string{
	module + "/test/",
	module + "/cmd/kubemedic-demo/",
	module + "/alertbridge/ghfake",
	module + "/internal/notify/notifytest",
	module + "/internal/localcluster",
	"sigs.k8s.io/controller-runtime/pkg/envtest",
	"github.com/slack-go/slack/slacktest",
}

// rules are the layering rules of single packages and binaries, beyond
// forbidden: what the package may not link (a path ending in "/" forbids
// everything under it); when only is set, the only module packages it may
// link; with stdlib, nothing but the standard library.
var rules = []struct {
	pkg, why string
	never    []string
	only     []string
	stdlib   bool
}{
	{
		pkg: module + "/cmd/kubemedic-detect",
		why: "the node binary runs as an NPD plugin on every node: no control-plane code and no Kubernetes client library, so that it starts in milliseconds",
		never: []string{
			module + "/remediator/", module + "/alertbridge/", module + "/janitor/", module + "/policies",
			"k8s.io/", "sigs.k8s.io/",
		},
		only: []string{module + "/detectors/", module + "/internal/gpuwire", module + "/internal/smicsv", module + "/cmd/kubemedic-detect"},
	},
	{
		pkg:   module + "/remediator/plan",
		why:   "the planner is pure: no S3 client, no API client, no node-side capture program",
		never: []string{"github.com/minio/", module + "/remediator/diagnostics/capture", module + "/remediator/diagnostics/store", "sigs.k8s.io/controller-runtime/pkg/client", "k8s.io/client-go/rest"},
	},
	{
		pkg:   module + "/cmd/kubemedic",
		why:   "the ops CLI (status, policy simulate, janitor plan, diag) reads the cluster and links no S3 client: diag downloads through a presigned link",
		never: []string{"github.com/minio/"},
	},
	{
		pkg:    module + "/internal/gpuwire",
		why:    "the wire format is a leaf both the node binary and the remediator import",
		never:  []string{module + "/"},
		stdlib: true,
	},
	{
		pkg:    module + "/internal/smicsv",
		why:    "nvidia-smi's CSV queries are read by the cgo node binary and the static kubemedic-validate alike",
		never:  []string{module + "/"},
		stdlib: true,
	},
	{
		pkg:    module + "/internal/procgroup",
		why:    "running a node tool in its own process group is shared by kubemedic-diag and kubemedic-validate",
		never:  []string{module + "/"},
		stdlib: true,
	},
	{
		pkg:   module + "/cmd/kubemedic-validate",
		why:   "the active GPU test runs inside the tools' images (DCGM, nccl-tests, nvbandwidth): a static binary that never talks to the API server",
		never: []string{"k8s.io/", "sigs.k8s.io/", "github.com/NVIDIA/", "github.com/minio/"},
		only:  []string{module + "/remediator/validation", module + "/remediator/validation/", module + "/internal/gpuwire", module + "/internal/smicsv", module + "/internal/procgroup", module + "/cmd/kubemedic-validate"},
	},
	{
		pkg:   module + "/remediator/validation",
		why:   "the report and the floors are pure: the static node program and the remediator's gate both link them",
		never: []string{"k8s.io/", "sigs.k8s.io/", "github.com/spf13/", "github.com/NVIDIA/", "os/exec", "net/http"},
		only:  []string{module + "/remediator/validation", module + "/internal/gpuwire"},
	},
	{
		pkg:   module + "/remediator/diagnostics",
		why:   "what the parts agree on about evidence does no I/O: the planner imports it",
		never: []string{"github.com/minio/", "os/exec", module + "/remediator/diagnostics/capture", module + "/remediator/diagnostics/store", "sigs.k8s.io/controller-runtime/pkg/client"},
	},
}

// deps lists the dependencies of every package under cmd/ and of the
// packages the rules name, and which of the packages listed are of the
// standard library.
func deps(t *testing.T) (map[string][]string, map[string]bool) {
	t.Helper()
	args := []string{"list", "-deps", "-f", `{{.ImportPath}} {{.Standard}} {{join .Deps " "}}`, module + "/cmd/..."}
	for _, r := range rules {
		args = append(args, r.pkg)
	}
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		t.Fatalf("go %s: %v", strings.Join(args, " "), err)
	}
	m, standard := map[string][]string{}, map[string]bool{}
	for line := range strings.Lines(string(out)) {
		if f := strings.Fields(line); len(f) > 1 {
			m[f[0]] = f[2:]
			if f[1] == "true" {
				standard[f[0]] = true
			}
		}
	}
	return m, standard
}

// matches reports whether dep is p, or under p when p ends in "/".
func matches(dep, p string) bool {
	if strings.HasSuffix(p, "/") {
		return strings.HasPrefix(dep, p) || dep+"/" == p
	}
	return dep == p
}

func firstMatch(dep string, ps []string) (string, bool) {
	for _, p := range ps {
		if matches(dep, p) {
			return p, true
		}
	}
	return "", false
}

// TestShippedBinariesLinkNoStandIns: no shipped binary links test code, a
// stand-in or envtest; only kubemedic-demo does, and every package under
// cmd/ belongs to one of them.
func TestShippedBinariesLinkNoStandIns(t *testing.T) {
	d, _ := deps(t)

	// The listing must be real, or the checks below pass by checking
	// nothing: the demo links what the others may not.
	for _, want := range []string{module + "/internal/localcluster", module + "/alertbridge/ghfake", module + "/internal/notify/notifytest", "sigs.k8s.io/controller-runtime/pkg/envtest"} {
		if !slices.Contains(d[module+"/cmd/"+demo], want) {
			t.Errorf("cmd/%s does not link %s; the dependency listing is wrong", demo, want)
		}
	}

	var binaries []string
	for pkg := range d {
		rest, ok := strings.CutPrefix(pkg, module+"/cmd/")
		if !ok || strings.Contains(rest, "/") {
			continue
		}
		binaries = append(binaries, rest)
		if rest != demo && !slices.Contains(shipped, rest) {
			t.Errorf("cmd/%s is neither shipped nor the demo: add it to shipped in %s", rest, "cmd/deps_test.go")
		}
	}
	sort.Strings(binaries)
	for _, bin := range append([]string{demo}, shipped...) {
		if !slices.Contains(binaries, bin) {
			t.Errorf("go list did not list cmd/%s", bin)
		}
	}

	// No package under cmd/, the demo's included, links test code: the
	// demo gets its cluster from internal/localcluster, not test/harness.
	for pkg, ds := range d {
		if !strings.HasPrefix(pkg, module+"/cmd/") {
			continue
		}
		for _, dep := range ds {
			if matches(dep, module+"/test/") {
				t.Errorf("%s links test code: %s", pkg, dep)
			}
		}
	}

	for _, bin := range shipped {
		for _, dep := range d[module+"/cmd/"+bin] {
			if p, bad := firstMatch(dep, forbidden); bad {
				t.Errorf("%s links %s (forbidden: %s)", bin, dep, p)
			}
			if rest, ok := strings.CutPrefix(dep, module+"/"); ok && strings.HasSuffix(path.Base(rest), "test") {
				t.Errorf("%s links %s: a package named *test is test code", bin, dep)
			}
		}
	}
}

// TestLayers checks the rules: each package or binary links only what its
// job needs.
func TestLayers(t *testing.T) {
	d, standard := deps(t)
	for _, r := range rules {
		ds, ok := d[r.pkg]
		if !ok || len(ds) == 0 {
			t.Errorf("go list did not list %s", r.pkg)
			continue
		}
		for _, dep := range ds {
			if p, bad := firstMatch(dep, r.never); bad {
				t.Errorf("%s links %s (never %s): %s", r.pkg, dep, p, r.why)
			}
			if r.stdlib && !standard[dep] {
				t.Errorf("%s links %s, not of the standard library: %s", r.pkg, dep, r.why)
			}
			if r.only != nil && strings.HasPrefix(dep, module+"/") {
				if _, ok := firstMatch(dep, r.only); !ok {
					t.Errorf("%s links %s, outside %v: %s", r.pkg, dep, r.only, r.why)
				}
			}
		}
	}
}

// TestMatches: the matcher the rules rely on.
func TestMatches(t *testing.T) {
	for _, tc := range []struct {
		dep, p string
		want   bool
	}{
		{module + "/test/harness", module + "/test/", true},
		{module + "/test", module + "/test/", true},
		{module + "/testsupport", module + "/test/", false},
		{module + "/alertbridge/ghfake", module + "/alertbridge/ghfake", true},
		{module + "/alertbridge/ghfakex", module + "/alertbridge/ghfake", false},
		{"k8s.io/api/core/v1", "k8s.io/", true},
		{"sigs.k8s.io/yaml", "k8s.io/", false},
	} {
		if got := matches(tc.dep, tc.p); got != tc.want {
			t.Errorf("matches(%q, %q) = %v, want %v", tc.dep, tc.p, got, tc.want)
		}
	}
}
