package demo

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// scrapeInterval is how often Prometheus scrapes and evaluates the rules:
// 30 s in a typical cluster, divided by the demo's speed and then some, so
// that a "for: 2m" alert (2 s) sees enough samples.
const scrapeInterval = 500 * time.Millisecond

// startMonitoring starts the node-condition exporter, the dcgm-exporter
// stand-in, Alertmanager (routing to the alertbridge) and Prometheus
// (scraping all of them and the components, evaluating the shipped rules).
// The components' addresses are in w.scrape already; they start after.
func (w *World) startMonitoring(ctx context.Context) error {
	dir := filepath.Join(w.opts.Dir, "monitoring")
	for _, d := range []string{filepath.Join(dir, "prometheus"), filepath.Join(dir, "alertmanager")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	ksm, err := w.startNodeConditionExporter()
	if err != nil {
		return err
	}
	w.DCGM = localcluster.NewDCGMExporter()
	w.onStop(func() error { w.DCGM.Close(); return nil })

	amConfig, err := w.alertmanagerConfig()
	if err != nil {
		return err
	}
	am, err := localcluster.NewAlertmanager(ctx, filepath.Join(dir, "alertmanager"), amConfig)
	if err != nil {
		return err
	}
	w.onStop(am.Stop)
	w.AlertmanagerURL = am.URL

	rules, err := w.ruleFile()
	if err != nil {
		return err
	}
	rulesPath := filepath.Join(dir, "prometheus", "kubemedic-rules.yaml")
	if err := os.WriteFile(rulesPath, rules, 0o644); err != nil {
		return err
	}
	targets := append([]scrapeTarget{{"kube-state-metrics", ksm}, {"dcgm-exporter", w.DCGM.URL}}, w.scrape...)
	var b strings.Builder
	fmt.Fprintf(&b, "global:\n  scrape_interval: %s\n  evaluation_interval: %s\n", scrapeInterval, scrapeInterval)
	fmt.Fprintf(&b, "rule_files: [%q]\n", rulesPath)
	fmt.Fprintf(&b, "alerting:\n  alertmanagers:\n    - static_configs:\n        - targets: [%q]\n", strings.TrimPrefix(am.URL, "http://"))
	b.WriteString("scrape_configs:\n")
	for _, t := range targets {
		fmt.Fprintf(&b, "  - job_name: %s\n    static_configs:\n      - targets: [%q]\n", t.job, t.addr)
	}
	prom, err := localcluster.NewPrometheus(ctx, filepath.Join(dir, "prometheus"), b.String())
	if err != nil {
		return err
	}
	w.onStop(prom.Stop)
	w.PrometheusURL = prom.URL
	w.say("Prometheus %s evaluates deploy/prometheus's rules (for: divided by %d); Alertmanager %s routes them to the alertbridge",
		prom.URL, w.Speed, am.URL)
	return nil
}

// ruleFile is the rule groups of deploy/prometheus/prometheusrule.yaml as a
// Prometheus rule file, with every "for:" divided by the speed.
func (w *World) ruleFile() ([]byte, error) {
	path := filepath.Join(w.opts.RepoRoot, "deploy/prometheus/prometheusrule.yaml")
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var pr struct {
		Spec struct {
			Groups []map[string]any `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &pr); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(pr.Spec.Groups) == 0 {
		return nil, fmt.Errorf("%s: no rule groups", path)
	}
	for gi, g := range pr.Spec.Groups {
		rules, ok := g["rules"].([]any)
		if !ok || len(rules) == 0 {
			return nil, fmt.Errorf("%s: spec.groups[%d].rules: none", path, gi)
		}
		for ri, r := range rules {
			rule, ok := r.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%s: spec.groups[%d].rules[%d]: not a mapping", path, gi, ri)
			}
			if f, ok := rule["for"].(string); ok {
				rule["for"] = scaleDuration(f, w.Speed)
			}
		}
	}
	return yaml.Marshal(map[string]any{"groups": pr.Spec.Groups})
}

// alertmanagerConfig is deploy/alertbridge/alertmanager-receiver.yaml with
// the webhook pointed at the local alertbridge and its token file, and its
// durations divided by the speed.
func (w *World) alertmanagerConfig() (string, error) {
	path := filepath.Join(w.opts.RepoRoot, "deploy/alertbridge/alertmanager-receiver.yaml")
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var tree map[string]any
	if err := yaml.Unmarshal(b, &tree); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	scaleTree(tree, w.Speed, map[string]bool{"matchers": true})
	found := false
	receivers, _ := tree["receivers"].([]any)
	for ri, r := range receivers {
		recv, ok := r.(map[string]any)
		if !ok {
			return "", fmt.Errorf("%s: receivers[%d]: not a mapping", path, ri)
		}
		hooks, _ := recv["webhook_configs"].([]any)
		for hi, h := range hooks {
			hook, ok := h.(map[string]any)
			if !ok {
				return "", fmt.Errorf("%s: receivers[%d].webhook_configs[%d]: not a mapping", path, ri, hi)
			}
			hook["url"] = "http://" + w.bridgeAddr + "/webhook"
			hook["http_config"] = map[string]any{"authorization": map[string]any{"type": "Bearer",
				"credentials_file": filepath.Join(w.opts.Dir, "webhook-token")}}
			found = true
		}
	}
	if !found {
		return "", fmt.Errorf("%s: no webhook receiver", path)
	}
	out, err := yaml.Marshal(tree)
	return string(out), err
}

// startNodeConditionExporter serves kube_node_status_condition for every
// node and condition, as kube-state-metrics does (one series per status,
// 1 for the current one), read from the API server at each scrape. The
// shipped rules on node conditions read it.
func (w *World) startNodeConditionExporter() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var nodes corev1.NodeList
		if err := w.Cluster.Client.List(r.Context(), &nodes); err != nil {
			http.Error(rw, err.Error(), http.StatusServiceUnavailable)
			return
		}
		rw.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprint(rw, nodeConditionMetrics(nodes.Items))
	})}
	go func() { _ = srv.Serve(ln) }()
	w.onStop(func() error { return srv.Close() })
	return ln.Addr().String(), nil
}

// nodeConditionMetrics renders kube_node_status_condition for the nodes'
// kubemedic conditions: the detectors' and GPUValidationFailed, which the
// remediator sets after a failed GPU test (KubemedicGPUValidationFailed).
func nodeConditionMetrics(nodes []corev1.Node) string {
	var b strings.Builder
	b.WriteString("# HELP kube_node_status_condition The condition of a cluster node.\n# TYPE kube_node_status_condition gauge\n")
	nodes = slices.Clone(nodes)
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	for _, n := range nodes {
		for _, c := range n.Status.Conditions {
			if _, ours := v1alpha1.ConditionReasons[string(c.Type)]; !ours && string(c.Type) != v1alpha1.ConditionGPUValidationFailed {
				continue
			}
			for _, s := range []corev1.ConditionStatus{corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown} {
				v := 0
				if c.Status == s {
					v = 1
				}
				fmt.Fprintf(&b, "kube_node_status_condition{node=%q,condition=%q,status=%q} %d\n", n.Name, c.Type, strings.ToLower(string(s)), v)
			}
		}
	}
	return b.String()
}
