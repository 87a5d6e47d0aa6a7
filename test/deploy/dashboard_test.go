package deploy_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/kubemedic/kubemedic/test/harness"
)

const dashboardFile = "deploy/grafana/kubemedic.json"

// externalMetrics are the metrics deploy/ reads that no kubemedic binary
// exports, each with who does; anything else must be registered by a
// kubemedic binary (exportedMetrics).
var externalMetrics = map[string]string{
	// The node conditions NPD writes, as kube-state-metrics exports them: a
	// requirement in deploy/prometheus/kustomization.yaml.
	"kube_node_status_condition": "kube-state-metrics",
	// Prometheus' own, one series per scrape target.
	"up": "Prometheus",
	// GPU utilisation, which the janitor's recording rules condense
	// (janitor/gpuutil names them).
	"DCGM_FI_DEV_GPU_UTIL":          "dcgm-exporter",
	"DCGM_FI_PROF_GR_ENGINE_ACTIVE": "dcgm-exporter",
}

// exportedMetric is one metric family a kubemedic binary registers.
type exportedMetric struct{ kind, binary string }

// exportedMetrics runs test/deploy/metricnames, which builds the binaries'
// real metrics with their own constructors and prints every family they
// register (vectors before their first series included), and the families
// of controller-runtime's registry that the remediator and the janitor
// serve.
func exportedMetrics(t *testing.T) map[string]exportedMetric {
	t.Helper()
	bin := harness.GoBuild(t, "./test/deploy/metricnames")
	out, err := exec.Command(bin).Output()
	require.NoError(t, err, "metricnames: %s", exitStderr(err))
	got := map[string]exportedMetric{}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		require.Len(t, f, 3, "metricnames line %q", sc.Text())
		got[f[0]] = exportedMetric{kind: f[1], binary: f[2]}
	}
	// The program must have seen each binary's own metrics; a silent
	// failure would make every check below pass vacuously.
	for _, want := range []string{"kubemedic_remediation_operations", "kubemedic_alertbridge_github_requests_total",
		"kubemedic_janitor_reclaimed_pods_total", "process_resident_memory_bytes"} {
		require.Contains(t, got, want)
	}
	return got
}

func exitStderr(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	if err != nil {
		return err.Error()
	}
	return ""
}

// checkMetricName fails unless name is exported by a kubemedic binary (a
// histogram's _bucket, _sum and _count series included) or listed in
// externalMetrics.
func checkMetricName(t *testing.T, exported map[string]exportedMetric, where, name string) {
	t.Helper()
	if _, ok := externalMetrics[name]; ok {
		return
	}
	if _, ok := exported[name]; ok {
		return
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok {
			continue
		}
		m, found := exported[base]
		if found && (m.kind == "histogram" || m.kind == "summary" && suffix != "_bucket") {
			return
		}
	}
	t.Errorf("%s reads %s, which no kubemedic binary registers (and which is not one of %v)", where, name, keys(externalMetrics))
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// grafanaDashboard is the part of Grafana's dashboard model the checks read.
type grafanaDashboard struct {
	UID        string         `json:"uid"`
	Title      string         `json:"title"`
	Panels     []grafanaPanel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query string `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type grafanaPanel struct {
	ID          int    `json:"id"`
	Type        string `json:"type"`
	Title       string `json:"title"`
	Description string `json:"description"`
	Datasource  *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	GridPos *struct{ H, W, X, Y int } `json:"gridPos"`
	Targets []struct {
		Expr  string `json:"expr"`
		RefID string `json:"refId"`
	} `json:"targets"`
	Panels []grafanaPanel `json:"panels"`
}

// grafanaVariables are the built-in variables a query may use, with a
// value for checking it; anything else would have to come from the
// dashboard's templating, which has none but the data source.
var grafanaVariables = map[string]string{"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h"}

var grafanaVariable = regexp.MustCompile(`\$\{?[A-Za-z_][A-Za-z0-9_]*\}?`)

// dashboardQueries reads the dashboard and returns every panel query, keyed
// "panel title/refId", with Grafana's variables replaced.
func dashboardQueries(t *testing.T) (grafanaDashboard, map[string]string) {
	t.Helper()
	var d grafanaDashboard
	dec := json.NewDecoder(strings.NewReader(string(readRepoFile(t, dashboardFile))))
	require.NoError(t, dec.Decode(&d), dashboardFile)
	require.Equal(t, "kubemedic", d.UID, "a fixed uid: the sidecar replaces the dashboard instead of adding one")
	require.NotEmpty(t, d.Title)
	require.Len(t, d.Templating.List, 1, "one variable, the Prometheus data source")
	require.Equal(t, "datasource", d.Templating.List[0].Type)
	require.Equal(t, "prometheus", d.Templating.List[0].Query)
	dsRef := "${" + d.Templating.List[0].Name + "}"

	queries := map[string]string{}
	ids := map[int]bool{}
	var walk func([]grafanaPanel)
	walk = func(panels []grafanaPanel) {
		for _, p := range panels {
			require.False(t, ids[p.ID], "panel id %d twice", p.ID)
			ids[p.ID] = true
			require.NotEmpty(t, p.Title, "panel %d has no title", p.ID)
			require.NotNil(t, p.GridPos, "panel %q has no gridPos", p.Title)
			require.LessOrEqual(t, p.GridPos.X+p.GridPos.W, 24, "panel %q is wider than the grid", p.Title)
			walk(p.Panels)
			if p.Type == "row" {
				require.Empty(t, p.Targets)
				continue
			}
			require.NotEmpty(t, p.Description, "panel %q: say what it shows and when to worry", p.Title)
			require.NotNil(t, p.Datasource, "panel %q has no data source", p.Title)
			require.Equal(t, "prometheus", p.Datasource.Type, p.Title)
			require.Equal(t, dsRef, p.Datasource.UID, "panel %q must use the dashboard's data source variable", p.Title)
			require.NotEmpty(t, p.Targets, "panel %q has no query", p.Title)
			for _, tg := range p.Targets {
				key := p.Title + "/" + tg.RefID
				require.NotEmpty(t, tg.RefID, p.Title)
				require.NotContains(t, queries, key)
				expr := strings.TrimSpace(tg.Expr)
				require.NotEmpty(t, expr, key)
				for v, val := range grafanaVariables {
					expr = strings.ReplaceAll(expr, v, val)
				}
				require.Empty(t, grafanaVariable.FindAllString(expr, -1), "%s uses a variable the dashboard does not define", key)
				queries[key] = expr
			}
		}
	}
	walk(d.Panels)
	return d, queries
}

// TestGrafanaDashboardQueries checks every query of the dashboard: Prometheus'
// own promtool parses it (as a recording rule), and it reads only metrics
// that kubemedic's binaries register (or kube-state-metrics' node
// conditions). It also checks that the panels the issue asks for are there.
func TestGrafanaDashboardQueries(t *testing.T) {
	_, queries := dashboardQueries(t)
	promtool := harness.Tool(t, "promtool")
	exported := exportedMetrics(t)

	// promtool check rules parses each expression with the PromQL parser.
	type rule struct {
		Record string `json:"record"`
		Expr   string `json:"expr"`
	}
	var rules []rule
	keysInOrder := make([]string, 0, len(queries))
	for k := range queries {
		keysInOrder = append(keysInOrder, k)
	}
	for i, k := range keysInOrder {
		rules = append(rules, rule{Record: fmt.Sprintf("kubemedic_dashboard:query_%d", i), Expr: queries[k]})
	}
	b, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "dashboard-rules.yaml")
	require.NoError(t, os.WriteFile(file, b, 0o644))
	out, err := exec.Command(promtool, "check", "rules", file).CombinedOutput()
	require.NoError(t, err, "promtool check rules on the dashboard's queries:\n%s\n(queries in order: %q)", out, keysInOrder)
	require.Contains(t, string(out), "SUCCESS")

	read := map[string]bool{}
	for key, expr := range queries {
		names, err := promqlMetricNames(expr)
		require.NoError(t, err, key)
		require.NotEmpty(t, names, "%s reads no metric", key)
		for _, n := range names {
			read[n] = true
			checkMetricName(t, exported, "dashboard panel "+key, n)
		}
	}
	// The panels the dashboard is for: conditions by type, operations by
	// phase, breaker state, GitHub calls and errors, janitor reclaims, and
	// the memory to compare with the requests.
	for _, want := range []string{
		"kube_node_status_condition", "kubemedic_remediation_operations", "kubemedic_remediation_breaker_open",
		"kubemedic_alertbridge_github_requests_total", "kubemedic_janitor_reclaimed_pods_total",
		"kubemedic_janitor_reclaimed_gpus_total", "process_resident_memory_bytes",
	} {
		require.True(t, read[want], "no panel reads %s", want)
	}
}

// TestPrometheusRulesReadExportedMetrics holds the rules to the same
// standard as the dashboard: every metric an expression reads, found by
// lexing the PromQL (not only kubemedic_* names), is registered by a
// kubemedic binary, is kube-state-metrics', dcgm-exporter's or Prometheus'
// own, or is recorded by an earlier rule of its group (rules of a group
// run in order).
func TestPrometheusRulesReadExportedMetrics(t *testing.T) {
	exported := exportedMetrics(t)
	pr := readPrometheusRule(t)
	for _, g := range pr.Spec.Groups {
		recorded := map[string]bool{}
		for _, r := range g.Rules {
			where := "alert " + r.Alert
			if r.Record != "" {
				where = "recording rule " + r.Record
			}
			names, err := promqlMetricNames(r.Expr)
			require.NoError(t, err, where)
			if r.Record != "" && r.Expr == "vector(time())" {
				// The bucket group's clock (bucket_end_5m): it reads
				// nothing, it says when the group ran.
				recorded[r.Record] = true
				continue
			}
			require.NotEmpty(t, names, where)
			for _, n := range names {
				if !recorded[n] {
					checkMetricName(t, exported, where, n)
				}
			}
			if r.Record != "" {
				recorded[r.Record] = true
			}
		}
	}
}

// TestGrafanaKustomization checks that deploy/ provisions the dashboard:
// one ConfigMap with the sidecar's label and the file as it is, a fixed
// name, small enough for a client-side apply's annotation.
func TestGrafanaKustomization(t *testing.T) {
	kubectl := kubectlForRender(t)
	file := readRepoFile(t, dashboardFile)
	require.Less(t, len(file), 200<<10, "kubectl apply keeps the object in a 256 KiB annotation")
	for _, dir := range []string{"deploy/grafana", "deploy"} {
		var found int
		for _, d := range splitDocs(t, dir, kustomize(t, kubectl, dir)) {
			if d.Obj.GetKind() != "ConfigMap" || d.Obj.GetLabels()["grafana_dashboard"] == "" {
				continue
			}
			found++
			var cm corev1.ConfigMap
			decodeStrict(t, d, &cm)
			require.Equal(t, "kubemedic-grafana-dashboard", cm.Name, "no hash suffix: an edit replaces the dashboard")
			require.Equal(t, namespace, cm.Namespace)
			require.Equal(t, "1", cm.Labels["grafana_dashboard"])
			require.Equal(t, string(file), cm.Data["kubemedic.json"])
		}
		require.Equal(t, 1, found, "%s: one dashboard ConfigMap", dir)
	}
}
