package deploy_test

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/janitor/gpuutil"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/test/harness"
)

const (
	prometheusRuleFile = "deploy/prometheus/prometheusrule.yaml"
	rulesUnitTestFile  = "deploy/prometheus/rules_test.yaml"
	// bucketsUnitTestFile tests the recording rules of bucketGroup; a file
	// of its own because promtool evaluates every group at the file's
	// evaluation_interval.
	bucketsUnitTestFile = "deploy/prometheus/gpu_buckets_test.yaml"
	// bucketGroup is the one group of recording rules: dcgm-exporter's GPU
	// utilisation in fixed buckets for the janitor (docs/janitor.md).
	bucketGroup      = gpuutil.BucketGroup
	runbooksFile     = "docs/runbooks.md"
	runbookURLPrefix = "https://github.com/kubemedic/kubemedic/blob/main/docs/runbooks.md#"
)

// prometheusRule is prometheus-operator's PrometheusRule, with exactly the
// fields of a Prometheus rules file in its spec, so that a strict decode
// fails on a misspelt field (which Prometheus would reject, and the
// operator's CRD would silently prune).
type prometheusRule struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   map[string]any    `json:"metadata"`
	Spec       prometheusRuleSet `json:"spec"`
}

type prometheusRuleSet struct {
	Groups []prometheusRuleGroup `json:"groups"`
}

type prometheusRuleGroup struct {
	Name        string               `json:"name"`
	Interval    string               `json:"interval,omitempty"`
	QueryOffset string               `json:"query_offset,omitempty"`
	Rules       []prometheusRuleRule `json:"rules"`
}

// prometheusRuleRule is an alerting rule (Alert) or a recording rule
// (Record).
type prometheusRuleRule struct {
	Alert       string            `json:"alert,omitempty"`
	Record      string            `json:"record,omitempty"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// readPrometheusRule decodes the PrometheusRule strictly.
func readPrometheusRule(t *testing.T) prometheusRule {
	t.Helper()
	docs := splitDocs(t, prometheusRuleFile, readRepoFile(t, prometheusRuleFile))
	require.Len(t, docs, 1, "one PrometheusRule")
	var pr prometheusRule
	decodeStrict(t, docs[0], &pr)
	require.Equal(t, "monitoring.coreos.com/v1", pr.APIVersion)
	require.Equal(t, "PrometheusRule", pr.Kind)
	require.Equal(t, "kubemedic", pr.Metadata["name"])
	return pr
}

// writeRulesFile writes the PrometheusRule's spec as a Prometheus rules
// file, named as the unit test files expect, next to copies of them.
func writeRulesFile(t *testing.T) (dir string) {
	t.Helper()
	pr := readPrometheusRule(t)
	out, err := yaml.Marshal(pr.Spec)
	require.NoError(t, err)
	dir = t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kubemedic-rules.yaml"), out, 0o644))
	for _, f := range []string{rulesUnitTestFile, bucketsUnitTestFile} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, filepath.Base(f)), readRepoFile(t, f), 0o644))
	}
	return dir
}

// TestPrometheusRulesPromtool checks the rules with Prometheus' own
// promtool: `check rules` (syntax, PromQL, templates) and `test rules`, the
// unit tests in deploy/prometheus/rules_test.yaml that feed series and
// assert which alerts fire, when, with which labels and annotations, and
// in deploy/prometheus/gpu_buckets_test.yaml, which pin the values the
// recording rules record.
func TestPrometheusRulesPromtool(t *testing.T) {
	promtool := harness.Tool(t, "promtool")
	dir := writeRulesFile(t)

	check := exec.Command(promtool, "check", "rules", "kubemedic-rules.yaml")
	check.Dir = dir
	out, err := check.CombinedOutput()
	require.NoError(t, err, "promtool check rules:\n%s", out)
	require.Contains(t, string(out), "SUCCESS")

	test := exec.Command(promtool, "test", "rules", filepath.Base(rulesUnitTestFile), filepath.Base(bucketsUnitTestFile))
	test.Dir = dir
	out, err = test.CombinedOutput()
	require.NoError(t, err, "promtool test rules:\n%s", out)
	require.Contains(t, string(out), "SUCCESS")
}

// TestPrometheusRulesCoverage checks what promtool cannot: every kubemedic
// node condition has its alert, every alert has a severity and the
// annotations the bridge's issues show, every runbook_url has its section
// in docs/runbooks.md (and every alert section there its alert), every alert
// is exercised by the unit tests, and every kubemedic metric an expression
// reads is one the code exports.
func TestPrometheusRulesCoverage(t *testing.T) {
	pr := readPrometheusRule(t)
	anchors := markdownAnchors(t, readRepoFile(t, runbooksFile))
	unitTested := unitTestedAlerts(t)
	sources := metricSources(t)

	alerts := map[string]bool{}
	conditionAlert := map[string]string{}
	metricRef := regexp.MustCompile(`\bkubemedic_[a-z0-9_]+`)
	conditionRef := regexp.MustCompile(`kube_node_status_condition\{condition="([A-Za-z]+)",status="true"\}`)
	for _, g := range pr.Spec.Groups {
		require.True(t, strings.HasPrefix(g.Name, "kubemedic-"), "group %s", g.Name)
		if g.Name == bucketGroup {
			continue // recording rules: TestJanitorGPUBucketRules
		}
		for _, r := range g.Rules {
			require.NotEmpty(t, r.Alert, "group %s: only alerts here (recording rules go in %s)", g.Name, bucketGroup)
			t.Run(r.Alert, func(t *testing.T) {
				require.False(t, alerts[r.Alert], "alert %s twice", r.Alert)
				alerts[r.Alert] = true
				require.True(t, strings.HasPrefix(r.Alert, "Kubemedic"),
					"alertmanager-receiver.yaml routes alerts to the bridge by the Kubemedic prefix")
				require.Contains(t, []string{"critical", "warning", "info"}, r.Labels["severity"])
				require.NotEmpty(t, r.Annotations["summary"])
				require.NotEmpty(t, r.Annotations["description"])
				require.Len(t, r.Annotations, 3, "summary, description, runbook_url")
				anchor, ok := strings.CutPrefix(r.Annotations["runbook_url"], runbookURLPrefix)
				require.True(t, ok, "runbook_url %q is not under %s", r.Annotations["runbook_url"], runbookURLPrefix)
				require.True(t, anchors[anchor], "runbook_url anchor #%s is no heading of %s", anchor, runbooksFile)
				require.Equal(t, strings.ToLower(r.Alert), anchor, "the section is named after the alert")
				require.True(t, unitTested[r.Alert], "%s has no alert_rule_test in %s", r.Alert, rulesUnitTestFile)

				for _, m := range metricRef.FindAllString(r.Expr, -1) {
					base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(m, "_bucket"), "_count"), "_sum")
					require.True(t, sources[base] || sources[m],
						"%s reads %s, which no metrics.go of the remediator or the alertbridge defines", r.Alert, m)
				}
				if m := conditionRef.FindStringSubmatch(r.Expr); m != nil {
					conditionAlert[m[1]] = r.Alert
					require.NotEmpty(t, r.For, "a condition alert waits a while")
					require.Contains(t, r.Expr, "by (node, condition)",
						"labels node and condition, and not kube-state-metrics' pod or instance")
					require.Contains(t, r.Annotations["summary"], "{{ $labels.node }}")
				}
			})
		}
	}
	for cond := range v1alpha1.ConditionReasons {
		require.NotEmpty(t, conditionAlert[cond], "no alert for node condition %s", cond)
	}
	// No orphaned runbook sections: each alert-like heading has its alert.
	for anchor := range anchors {
		if strings.HasPrefix(anchor, "kubemedic") {
			found := false
			for a := range alerts {
				found = found || strings.ToLower(a) == anchor
			}
			require.True(t, found, "%s has a section #%s for an alert that does not exist", runbooksFile, anchor)
		}
	}
}

// markdownAnchors returns the GitHub anchors of the headings of a Markdown
// file: lower case, spaces to hyphens, punctuation other than - and _
// dropped.
func markdownAnchors(t *testing.T, md []byte) map[string]bool {
	t.Helper()
	drop := regexp.MustCompile(`[^a-z0-9 _-]`)
	anchors := map[string]bool{}
	inFence := false
	sc := bufio.NewScanner(bytes.NewReader(md))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
			continue
		}
		if inFence || !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(line, "#"))
		slug := strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(text), ""), " ", "-")
		require.False(t, anchors[slug], "two headings with anchor #%s", slug)
		anchors[slug] = true
	}
	require.NoError(t, sc.Err())
	return anchors
}

// unitTestedAlerts returns the alert names that rules_test.yaml asserts on.
func unitTestedAlerts(t *testing.T) map[string]bool {
	t.Helper()
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `json:"alertname"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	require.NoError(t, yaml.Unmarshal(readRepoFile(t, rulesUnitTestFile), &tests))
	out := map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			out[a.Alertname] = true
		}
	}
	return out
}

// metricSources returns the kubemedic_* metric names that appear as string
// literals in the remediator's, the alertbridge's and the janitor's non-test
// Go files.
func metricSources(t *testing.T) map[string]bool {
	t.Helper()
	root := repoRoot(t)
	lit := regexp.MustCompile(`"(kubemedic_[a-z0-9_]+)"`)
	names := map[string]bool{}
	for _, dir := range []string{"remediator", "alertbridge", "janitor"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, m := range lit.FindAllSubmatch(b, -1) {
				names[string(m[1])] = true
			}
			return nil
		})
		require.NoError(t, err)
	}
	return names
}

// kubectlForRender finds a kubectl to run kustomize with: the test
// binaries' (hack/testbin.sh), else one on PATH.
func kubectlForRender(t *testing.T) string {
	t.Helper()
	if dir, err := localcluster.BinDir(); err == nil {
		p := filepath.Join(dir, "kubectl")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	p, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("no kubectl: run `make testbin`")
	}
	return p
}

// TestPrometheusKustomization renders deploy/prometheus and checks that
// its ServiceMonitors select the Services of deploy/ by label and port
// name, that the "down" alerts name the jobs those ServiceMonitors make
// (prometheus-operator's job label is the Service's name), and that
// deploy/ itself does not include prometheus-operator's kinds.
func TestPrometheusKustomization(t *testing.T) {
	kubectl := kubectlForRender(t)
	rendered := splitDocs(t, "kustomize deploy/prometheus", kustomize(t, kubectl, "deploy/prometheus"))
	base := splitDocs(t, "kustomize deploy", kustomize(t, kubectl, "deploy"))

	services := map[string]corev1.Service{}
	for _, d := range base {
		require.NotEqual(t, "monitoring.coreos.com", d.Obj.GroupVersionKind().Group,
			"deploy/ must apply on a cluster without prometheus-operator")
		if d.Obj.GetKind() == "Service" {
			var svc corev1.Service
			decodeStrict(t, d, &svc)
			services[svc.Name] = svc
		}
	}

	var kinds []string
	jobs := map[string]bool{}
	for _, d := range rendered {
		kinds = append(kinds, d.Obj.GetKind())
		require.Equal(t, namespace, d.Obj.GetNamespace())
		require.Equal(t, "kubemedic", d.Obj.GetLabels()["app.kubernetes.io/part-of"])
		if d.Obj.GetKind() != "ServiceMonitor" {
			continue
		}
		sel, _, err := unstructured.NestedStringMap(d.Obj.Object, "spec", "selector", "matchLabels")
		require.NoError(t, err)
		require.NotEmpty(t, sel)
		endpoints, _, err := unstructured.NestedSlice(d.Obj.Object, "spec", "endpoints")
		require.NoError(t, err)
		require.Len(t, endpoints, 1)
		port := endpoints[0].(map[string]any)["port"]

		var matched []string
		for name, svc := range services {
			ok := true
			for k, v := range sel {
				ok = ok && svc.Labels[k] == v
			}
			if !ok {
				continue
			}
			matched = append(matched, name)
			hasPort := slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == port })
			require.True(t, hasPort, "ServiceMonitor %s: Service %s has no port %v", d.Obj.GetName(), name, port)
			jobs[name] = true
		}
		require.Len(t, matched, 1, "ServiceMonitor %s selects exactly one Service", d.Obj.GetName())
	}
	require.ElementsMatch(t, []string{"PrometheusRule", "ServiceMonitor", "ServiceMonitor", "ServiceMonitor"}, kinds)

	jobRef := regexp.MustCompile(`up\{job="([^"]+)"\}`)
	pr := readPrometheusRule(t)
	refs := 0
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			for _, m := range jobRef.FindAllStringSubmatch(r.Expr, -1) {
				refs++
				require.True(t, jobs[m[1]], "%s: no ServiceMonitor scrapes job %q (jobs: %v)", r.Alert, m[1], jobs)
			}
		}
	}
	require.Equal(t, 3, refs, "the remediator's, the bridge's and the janitor's down alerts")
}
