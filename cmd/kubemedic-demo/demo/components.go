package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/kubemedic/kubemedic/alertbridge/ghfake"
	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/internal/notify/notifytest"
	"github.com/kubemedic/kubemedic/remediator/diagnostics"
)

// componentReadyTimeout bounds the start of each kubemedic component.
const componentReadyTimeout = 60 * time.Second

// minInvokeInterval keeps the NPD plugins of a sped-up demo from running
// more often than a 2-core machine can afford.
const minInvokeInterval = 2 * time.Second

// webhookToken is the bearer token Alertmanager sends the alertbridge.
const webhookToken = "kubemedic-demo-webhook-token"

// startStandIns starts the GitHub and Slack stand-ins, unless the real
// ones are configured.
func (w *World) startStandIns(ctx context.Context) error {
	if err := w.startGitHub(); err != nil {
		return err
	}
	if err := w.startStore(ctx); err != nil {
		return err
	}
	if w.opts.SlackTokenFile != "" {
		w.say("Slack: the real workspace of %s; messages without a known owner go to #%s", w.opts.SlackTokenFile, w.opts.SlackChannel)
		return nil
	}
	s := notifytest.NewServer()
	for _, r := range researchers {
		s.AddUser(r.ID, r.Email)
	}
	s.AddChannel("C0GPUOPS1", w.opts.SlackChannel)
	s.OnPost(w.recordSlack)
	w.Slack = s
	w.onStop(func() error { s.Close(); return nil })
	w.say("Slack stand-in: every message is printed here, prefixed with slack>")
	return nil
}

// DiagnosticsSecret holds the demo store's key pair, as
// --diagnostics-secret names it.
const DiagnosticsSecret = "kubemedic-diagnostics"

// startStore runs the diagnostics store: a real S3-compatible server
// (versitygw from the testbin) with the bucket, and the Secret with its
// keys that the remediator and the capture pods use.
func (w *World) startStore(ctx context.Context) error {
	dir := filepath.Join(w.opts.Dir, "s3")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	s3, err := localcluster.NewS3(ctx, dir, "kubemedic-diagnostics")
	if err != nil {
		return err
	}
	w.S3 = s3
	w.onStop(s3.Stop)
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: DiagnosticsSecret},
		Data: map[string][]byte{diagnostics.SecretAccessKey: []byte(s3.AccessKey), diagnostics.SecretSecretKey: []byte(s3.SecretKey)}}
	if err := w.Cluster.Client.Create(ctx, sec); err != nil {
		return fmt.Errorf("create secret %s/%s: %w", Namespace, DiagnosticsSecret, err)
	}
	w.say("Diagnostics store: versitygw (S3) on %s, bucket %s, objects under %s", s3.Endpoint, s3.Bucket, filepath.Join(dir, "data"))
	return nil
}

func (w *World) startGitHub() error {
	if w.opts.GitHubRepo != "" {
		if w.opts.GitHubTokenFile == "" {
			return fmt.Errorf("a GitHub repository needs a token file")
		}
		w.repo, w.githubTokenFile, w.githubURL = w.opts.GitHubRepo, w.opts.GitHubTokenFile, w.opts.GitHubURL
		if w.githubURL == "" {
			w.githubURL = "https://api.github.com/"
		}
		w.PageURL = "https://github.com/" + w.repo + "/issues"
		w.say("GitHub: the alertbridge files into the real %s (%s)", w.repo, w.githubURL)
		return nil
	}
	gh := ghfake.New()
	gh.SetToken(githubToken)
	gh.AddRepo(Repo)
	gh.AddRepo("acme/storage-oncall")
	w.GitHub = gh
	w.PageURL = gh.URL() + strings.TrimPrefix(ghfake.PagePath, "/")
	w.onStop(func() error { gh.Close(); return nil })
	w.repo, w.githubURL = Repo, gh.URL()
	w.githubTokenFile = filepath.Join(w.opts.Dir, "github-token")
	if err := os.WriteFile(w.githubTokenFile, []byte(githubToken+"\n"), 0o600); err != nil {
		return err
	}
	w.say("GitHub stand-in: %s (issues of %s; the alertbridge talks to its API)", w.PageURL, Repo)
	return nil
}

// SlackMessage is one message the Slack stand-in accepted.
type SlackMessage struct {
	Seq     int       `json:"seq"`
	At      time.Time `json:"at"`
	Channel string    `json:"channel"`
	// To is the researcher's e-mail for a DM, else the channel.
	To       string `json:"to"`
	ThreadTS string `json:"threadTS,omitempty"`
	Text     string `json:"text"`
}

func (w *World) recordSlack(p notifytest.Posted) {
	to := p.Channel
	for _, r := range researchers {
		if r.ID == p.User {
			to = r.Email
		}
	}
	w.mu.Lock()
	m := SlackMessage{Seq: len(w.slackLog) + 1, At: time.Now(), Channel: p.Channel, To: to, ThreadTS: p.ThreadTS, Text: p.Text}
	w.slackLog = append(w.slackLog, m)
	w.mu.Unlock()
	fmt.Fprintf(w.out, "slack> to %s: %s\n", to, strings.ReplaceAll(p.Text, "\n", "\nslack>   "))
}

// SlackMessages returns the messages after seq.
func (w *World) SlackMessages(after int) []SlackMessage {
	w.mu.Lock()
	defer w.mu.Unlock()
	if after >= len(w.slackLog) {
		return nil
	}
	return append([]SlackMessage(nil), w.slackLog[after:]...)
}

// component is one kubemedic binary run as a process.
type component struct {
	name    string
	args    []string
	env     []string
	metrics string // host:port of /metrics
	ready   string // URL answering 200 when ready
}

// componentPorts picks the components' ports, so that Prometheus can be
// told its targets before they start: remediator metrics and probes,
// janitor metrics and probes, alertbridge, and the janitor's Slack
// interactivity endpoint.
func (w *World) componentPorts() ([]int, error) {
	ports, err := freePorts(6)
	if err != nil {
		return nil, err
	}
	addr := func(i int) string { return "127.0.0.1:" + strconv.Itoa(ports[i]) }
	w.bridgeAddr = addr(4)
	w.scrape = []scrapeTarget{{jobOf("kubemedic-remediator"), addr(0)}, {jobOf("kubemedic-janitor"), addr(2)}, {jobOf("kubemedic-alertbridge"), addr(4)}}
	return ports, nil
}

// startComponents runs the remediator, the janitor and the alertbridge on
// the ports componentPorts chose.
func (w *World) startComponents(ctx context.Context, ports []int) error {
	dir := w.opts.Dir
	kc := w.Cluster.Kubeconfig
	addr := func(i int) string { return "127.0.0.1:" + strconv.Itoa(ports[i]) }
	var slackEnv, slackArgs []string
	var janitorArgs []string
	if w.Slack != nil {
		slackEnv = []string{"KUBEMEDIC_SLACK_TOKEN=" + notifytest.Token}
		slackArgs = []string{"--slack-api-url=" + w.Slack.URL(), "--slack-default-channel=" + w.opts.SlackChannel}
		// The stand-in presses the janitor's buttons as Slack would: it
		// signs each request with the secret the janitor verifies.
		secret, err := newSigningSecret()
		if err != nil {
			return err
		}
		secretFile := filepath.Join(dir, "slack-signing-secret")
		if err := os.WriteFile(secretFile, []byte(secret+"\n"), 0o600); err != nil {
			return err
		}
		w.slackSecret, w.interactURL = secret, "http://"+addr(5)+"/slack/interactivity"
		janitorArgs = []string{"--slack-signing-secret-file=" + secretFile, "--slack-interactivity-bind-address=" + addr(5)}
	} else {
		slackArgs = []string{"--slack-token-file=" + w.opts.SlackTokenFile, "--slack-default-channel=" + w.opts.SlackChannel}
	}

	hookFile := filepath.Join(dir, "webhook-token")
	if err := os.WriteFile(hookFile, []byte(webhookToken+"\n"), 0o600); err != nil {
		return err
	}
	bridgeConfig := filepath.Join(dir, "alertbridge.yaml")
	cfg, err := w.alertbridgeConfig()
	if err != nil {
		return err
	}
	if err := os.WriteFile(bridgeConfig, cfg, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", bridgeConfig, err)
	}
	interval := func(d time.Duration) string { return (d / time.Duration(w.Speed)).Round(time.Millisecond).String() }

	comps := []component{
		{name: "kubemedic-remediator", env: slackEnv, metrics: addr(0), ready: "http://" + addr(1) + "/readyz",
			args: []string{"--kubeconfig=" + kc, "--leader-elect=false", "--namespace=" + Namespace,
				"--metrics-bind-address=" + addr(0), "--health-probe-bind-address=" + addr(1),
				"--diagnostics-endpoint=" + w.S3.Endpoint, "--diagnostics-bucket=" + w.S3.Bucket, "--diagnostics-insecure",
				"--diagnostics-secret=" + DiagnosticsSecret,
				// NPD runs here as processes, not as the DaemonSet's pods, and
				// the simulated nodes have none: every GPU node would count as
				// having no detectors (KubemedicNodeDetectorsMissing).
				"--stack-detectors=false"}},
		{name: "kubemedic-janitor", env: slackEnv, metrics: addr(2), ready: "http://" + addr(3) + "/readyz",
			args: []string{"--kubeconfig=" + kc, "--leader-elect=false", "--namespace=" + Namespace,
				"--metrics-bind-address=" + addr(2), "--health-probe-bind-address=" + addr(3),
				"--interval=" + interval(time.Minute), "--metrics-staleness=" + interval(5*time.Minute),
				"--prometheus-url=" + w.PrometheusURL}},
		{name: "kubemedic-alertbridge", metrics: addr(4), ready: "http://" + addr(4) + "/readyz",
			args: []string{"--config=" + bridgeConfig, "--listen=" + addr(4), "--state-dir=" + filepath.Join(dir, "alertbridge-state"),
				"--github-url=" + w.githubURL, "--github-token-file=" + w.githubTokenFile,
				"--auth-bearer-token-file=" + hookFile, "--refresh-interval=" + interval(30*time.Second),
				"--kubeconfig=" + kc}},
	}
	comps[0].args = append(comps[0].args, slackArgs...)
	comps[1].args = append(append(comps[1].args, slackArgs...), janitorArgs...)
	for _, c := range comps {
		p, err := localcluster.StartProcess(context.Background(), localcluster.ProcessSpec{ // lives until Stop, not ctx
			Name: c.name, Path: filepath.Join(w.opts.BinDir, c.name), Args: c.args, Env: c.env,
			LogPath: filepath.Join(dir, "logs", c.name+".log"),
		})
		if err != nil {
			return err
		}
		w.addProcess(p)
		if err := p.WaitHTTPOK(ctx, c.ready, componentReadyTimeout); err != nil {
			return err
		}
	}
	w.say("kubemedic-remediator, kubemedic-janitor and kubemedic-alertbridge run as processes (logs in %s)", filepath.Join(dir, "logs"))
	if w.interactURL != "" {
		w.say("The janitor's Slack buttons answer at %s; the stand-in signs each press with the secret in %s, as Slack signs it",
			w.interactURL, filepath.Join(dir, "slack-signing-secret"))
	}
	return nil
}

// jobOf is the Prometheus job name the shipped rules expect of a component
// (deploy/prometheus/servicemonitors.yaml).
func jobOf(component string) string {
	if component == "kubemedic-alertbridge" {
		return component
	}
	return component + "-metrics"
}

func (w *World) addProcess(p *localcluster.Process) {
	w.mu.Lock()
	w.procs = append(w.procs, p)
	w.mu.Unlock()
	w.onStop(p.Stop)
}

// Processes are the processes the world started (not the control plane's).
func (w *World) Processes() []*localcluster.Process {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]*localcluster.Process(nil), w.procs...)
}

// alertbridgeConfig is deploy/alertbridge/config.yaml with the demo's
// repository as the default, and a storm guard that files at most 4 new
// issues in 10 minutes divided by the speed (shipped: 20 in 10 minutes), so
// that a storm of a dozen nodes shows the roll-up. With the real GitHub the
// example's routes to other repositories are dropped.
func (w *World) alertbridgeConfig() ([]byte, error) {
	path := filepath.Join(w.opts.RepoRoot, "deploy/alertbridge/config.yaml")
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	cfg["defaultRepo"] = w.repo
	cfg["stormGuard"] = map[string]any{"maxNewIssues": 4, "window": scaleDuration("10m", w.Speed)}
	if w.GitHub == nil {
		delete(cfg, "routes")
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	return append([]byte("# Written by kubemedic-demo from deploy/alertbridge/config.yaml.\n"), out...), nil
}

// startNPD runs one node-problem-detector per fake-root node, with the
// monitor configs of deploy/npd pointed at kubemedic-detect and the root.
func (w *World) startNPD(ctx context.Context) error {
	npdBin := filepath.Join(w.Cluster.BinDir, "node-problem-detector")
	detect := filepath.Join(w.opts.BinDir, "kubemedic-detect")
	for _, node := range w.Nodes[:w.opts.NPDNodes] {
		root := w.Roots[node]
		if err := root.write("/etc/fstab", fmt.Sprintf("%s:/export/datasets %s nfs4 defaults,_netdev 0 0\n",
			strings.Split(w.nfs.Addr(), ":")[0], nfsMountPoint), 0o644); err != nil {
			return err
		}
		common := []string{"--root=" + root.Dir, "--state-dir=" + filepath.Join(root.Dir, rootStateDir)}
		kube := []string{"--kubeconfig=" + w.Cluster.Kubeconfig, "--kubelet-url=", "--node=" + node}
		var configs []string
		for _, m := range []struct {
			file  string
			extra []string
		}{
			{"xid.json", []string{"--kmsg=" + rootKmsg}},
			{"gpu.json", append([]string{"--backend=nvidia-smi", "--nvidia-smi=" + filepath.Join(root.Dir, rootSMI)}, kube...)},
			{"gpu-memory.json", []string{"--backend=nvidia-smi", "--nvidia-smi=" + filepath.Join(root.Dir, rootSMI)}},
			{"gpu-recovery.json", []string{"--backend=nvidia-smi", "--nvidia-smi=" + filepath.Join(root.Dir, rootSMI)}},
			{"nfs.json", []string{"--mountinfo=" + rootMountinfo}},
			{"dstate.json", kube},
		} {
			p, err := w.npdConfig(node, m.file, detect, append(common, m.extra...))
			if err != nil {
				return err
			}
			configs = append(configs, p)
		}
		p, err := localcluster.StartProcess(context.Background(), localcluster.ProcessSpec{ // lives until Stop, not ctx
			Name: "node-problem-detector " + node,
			Path: npdBin,
			Args: []string{
				"--config.custom-plugin-monitor=" + strings.Join(configs, ","),
				"--apiserver-override=" + w.Cluster.Config.Host + "?inClusterConfig=false&auth=" + w.Cluster.Kubeconfig,
				"--hostname-override=" + node,
				"--port=0", "--prometheus-port=0",
				"--k8s-exporter-heartbeat-period=" + (5 * time.Minute / time.Duration(w.Speed)).Round(time.Second).String(),
				"--logtostderr", "--v=2",
			},
			Env:     []string{"NODE_NAME=" + node},
			LogPath: filepath.Join(w.opts.Dir, "logs", "npd-"+node+".log"),
		})
		if err != nil {
			return err
		}
		w.addProcess(p)
	}
	w.say("node-problem-detector runs on %d nodes with deploy/npd's monitors (xid, gpu, gpu-memory, gpu-recovery, nfs, dstate)", w.opts.NPDNodes)
	return nil
}

// npdConfig rewrites deploy/npd/<file> for one node: kubemedic-detect from
// BinDir, --root and the extra flags, the interval sped up (at least
// minInvokeInterval) and --min-duration divided by the speed.
func (w *World) npdConfig(node, file, detect string, extra []string) (string, error) {
	b, err := os.ReadFile(filepath.Join(w.opts.RepoRoot, "deploy/npd", file))
	if err != nil {
		return "", err
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		return "", fmt.Errorf("deploy/npd/%s: %w", file, err)
	}
	pc, _ := cfg["pluginConfig"].(map[string]any)
	if pc == nil {
		return "", fmt.Errorf("deploy/npd/%s: no pluginConfig", file)
	}
	if s, ok := pc["invoke_interval"].(string); ok {
		d, err := time.ParseDuration(scaleDuration(s, w.Speed))
		if err != nil {
			return "", fmt.Errorf("deploy/npd/%s: invoke_interval: %w", file, err)
		}
		pc["invoke_interval"] = max(d, minInvokeInterval).String()
	}
	rules, _ := cfg["rules"].([]any)
	if len(rules) == 0 {
		return "", fmt.Errorf("deploy/npd/%s: rules: none", file)
	}
	for ri, r := range rules {
		rule, ok := r.(map[string]any)
		if !ok {
			return "", fmt.Errorf("deploy/npd/%s: rules[%d]: not an object", file, ri)
		}
		rule["path"] = detect
		ruleArgs, _ := rule["args"].([]any)
		var args []any
		for ai, a := range ruleArgs {
			s, ok := a.(string)
			if !ok {
				return "", fmt.Errorf("deploy/npd/%s: rules[%d].args[%d]: not a string", file, ri, ai)
			}
			switch {
			case strings.HasPrefix(s, "--root="):
				continue
			case strings.HasPrefix(s, "--min-duration="):
				s = "--min-duration=" + scaleDuration(strings.TrimPrefix(s, "--min-duration="), w.Speed)
			}
			args = append(args, s)
		}
		for _, e := range extra {
			args = append(args, e)
		}
		rule["args"] = args
	}
	out, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return "", err
	}
	p := filepath.Join(w.opts.Dir, "npd", node, file)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", err
	}
	return p, os.WriteFile(p, out, 0o644)
}

// freePorts returns n distinct free ports.
func freePorts(n int) ([]int, error) {
	seen := map[int]bool{}
	var out []int
	for len(out) < n {
		p, err := localcluster.FreePort()
		if err != nil {
			return nil, err
		}
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out, nil
}

// httpOK reports whether url answers 200.
func httpOK(ctx context.Context, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
