package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/cmd/kubemedic-demo/demo"
	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/plan"
	"github.com/kubemedic/kubemedic/test/harness"
	"github.com/kubemedic/kubemedic/test/testsupport"
)

// startWorld builds the binaries and starts the demo's world.
func startWorld(t *testing.T) *demo.World {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: runs the whole system; skipped in -short mode")
	}
	var bin string
	for _, pkg := range []string{"./cmd/kubemedic-detect", "./cmd/kubemedic-remediator", "./cmd/kubemedic-alertbridge", "./cmd/kubemedic-janitor", "./cmd/kubemedic-diag"} {
		bin = filepath.Dir(harness.GoBuild(t, pkg))
	}
	root, err := localcluster.RepoRoot()
	require.NoError(t, err)
	out := &testsupport.SyncBuffer{}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	begin := time.Now()
	w, err := demo.Start(ctx, demo.Options{RepoRoot: root, BinDir: bin, Dir: t.TempDir(), Out: out})
	if err != nil {
		t.Fatalf("start the demo: %v\n%s", err, out.String())
	}
	t.Logf("demo ready in %s", time.Since(begin).Round(100*time.Millisecond))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("demo output:\n%s", out.String())
			for _, p := range w.Processes() {
				t.Logf("%s log:%s", p.Name(), p.LogTail(40))
			}
		}
		require.NoError(t, w.Stop())
	})
	return w
}

// runScenario runs a scenario in process and logs its timeline and stages.
func runScenario(t *testing.T, w *demo.World, name string) *demo.Session {
	t.Helper()
	sc, err := demo.FindScenario(name)
	require.NoError(t, err)
	out := &testsupport.SyncBuffer{}
	tl, err := w.Timeline(out)
	require.NoError(t, err)
	s := &demo.Session{Info: w.Info(w.Cluster.Kubeconfig), Kube: w.Cluster.Client, Inject: w, Timeline: tl, Out: out}
	ctx, cancel := context.WithTimeout(context.Background(), sc.Timeout)
	defer cancel()
	begin := time.Now()
	err = sc.Run(ctx, s)
	t.Logf("scenario %s took %s; timeline:\n%s", name, time.Since(begin).Round(100*time.Millisecond), out.String())
	require.NoError(t, err, "scenario %s", name)
	return s
}

func TestWholeLoop(t *testing.T) {
	w := startWorld(t)
	ctx := context.Background()
	// Registered first, so it runs after the subtests and logPeakRSS: it
	// stops the world (the remediator's shutdown is in its log too) and
	// fails on any error the remediator logged. Nothing goes wrong in
	// these stories (the failed reset of escalate is the story), so an
	// error line is noise an SRE would have to read past, or a bug.
	t.Cleanup(func() {
		require.NoError(t, w.Stop())
		log := requireNoErrorLines(t, processNamed(t, w, "kubemedic-remediator").LogPath())
		require.Contains(t, log, "proceeding to shutdown the manager", "the remediator's shutdown is in the log checked")
	})

	t.Run("xid", func(t *testing.T) {
		s := runScenario(t, w, "xid")
		var n corev1.Node
		require.NoError(t, w.Cluster.Client.Get(ctx, client.ObjectKey{Name: s.Node}, &n))
		require.False(t, n.Spec.Unschedulable, "node %s uncordoned", s.Node)
		c := localcluster.FindNodeCondition(&n, v1alpha1.ConditionGPUXidError)
		require.NotNil(t, c)
		require.Equal(t, corev1.ConditionFalse, c.Status, "GPUXidError cleared by the real xid check after the reset")

		var ops v1alpha1.NodeOperationList
		require.NoError(t, w.Cluster.Client.List(ctx, &ops))
		var reset *v1alpha1.NodeOperation
		for i := range ops.Items {
			if ops.Items[i].Spec.NodeName == s.Node {
				require.Nil(t, reset, "one operation on %s", s.Node)
				reset = &ops.Items[i]
			}
		}
		require.NotNil(t, reset)
		require.Equal(t, "reset-gpu", reset.Spec.Operation)
		require.Equal(t, v1alpha1.PhaseSucceeded, reset.Status.Phase)
		files := bundleOf(t, *reset)
		require.Contains(t, string(files["xid.log"]), "Xid (PCI:0000:18:00): 46", "the capture kept the Xid before the reset")

		// The real scheduler and controller-manager did what the Slack
		// message promises: the evicted pod's ReplicaSet made a
		// replacement, placed on another node, though its Deployment
		// prefers this one.
		var moved []demo.Reschedule
		for _, m := range s.Timeline.Reschedules() {
			if m.From == s.Node {
				moved = append(moved, m)
			}
		}
		require.NotEmpty(t, moved, "the timeline saw the pod evicted from %s replaced and scheduled; all: %+v", s.Node, s.Timeline.Reschedules())
		for _, m := range moved {
			require.NotEmpty(t, m.To, "replacement %s/%s scheduled", m.Namespace, m.Pod)
			require.NotEqual(t, s.Node, m.To, "replacement %s/%s of %s placed away from the drained node", m.Namespace, m.Pod, m.Evicted)
		}
		// And no workload pod was bound to the node while it was
		// cordoned: from the Cordoned condition to the operation's end,
		// in the API server's whole seconds.
		cordoned := meta.FindStatusCondition(reset.Status.Conditions, v1alpha1.OperationCordoned)
		require.NotNil(t, cordoned, "the reset records its cordon")
		require.Equal(t, v1alpha1.ReasonCordonedByKubemedic, cordoned.Reason)
		require.NotNil(t, reset.Status.CompletionTime)
		from, until := cordoned.LastTransitionTime.Time, reset.Status.CompletionTime.Time
		var pods corev1.PodList
		require.NoError(t, w.Cluster.Client.List(ctx, &pods, client.MatchingFields{"spec.nodeName": s.Node}))
		for _, p := range pods.Items {
			if p.Labels[v1alpha1.LabelTemplate] != "" || p.Labels[v1alpha1.LabelOperation] != "" {
				continue // kubemedic's own capture and operation pods tolerate the cordon
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
					at := c.LastTransitionTime.Time
					require.False(t, at.After(from) && at.Before(until), "pod %s/%s was bound to %s at %s, while it was cordoned (%s to %s)", p.Namespace, p.Name, s.Node, at, from, until)
				}
			}
		}

		issues, err := s.Issues(ctx, s.Node)
		require.NoError(t, err)
		require.NotEmpty(t, issues, "an issue about %s was filed", s.Node)
		for _, is := range issues {
			require.Equal(t, "closed", is.GetState(), "issue #%d %q closed", is.GetNumber(), is.GetTitle())
		}

		// The owner of the pod the drain stopped was told, on Slack.
		found := false
		for _, m := range w.SlackMessages(0) {
			if strings.Contains(m.Text, s.Node) && strings.HasSuffix(m.To, "@example.com") {
				found = true
			}
		}
		require.True(t, found, "a Slack DM to the owner of the pod evicted from %s; messages: %+v", s.Node, w.SlackMessages(0))
	})

	t.Cleanup(func() { logPeakRSS(t, w) })

	t.Run("driver-reset", func(t *testing.T) {
		s := runScenario(t, w, "driver-reset")
		var n corev1.Node
		require.NoError(t, w.Cluster.Client.Get(ctx, client.ObjectKey{Name: s.Node}, &n))
		require.False(t, n.Spec.Unschedulable, "node %s uncordoned", s.Node)
		for _, typ := range []string{v1alpha1.ConditionGPURecoveryRequired, v1alpha1.ConditionGPUXidError} {
			c := localcluster.FindNodeCondition(&n, corev1.NodeConditionType(typ))
			require.NotNil(t, c, typ)
			require.Equal(t, corev1.ConditionFalse, c.Status, "%s cleared by the real checks after the reset", typ)
		}
		var ops v1alpha1.NodeOperationList
		require.NoError(t, w.Cluster.Client.List(ctx, &ops))
		var got []string
		for _, op := range ops.Items {
			if op.Spec.NodeName == s.Node {
				got = append(got, op.Spec.Policy+"/"+op.Spec.Operation+"/"+string(op.Status.Phase))
			}
		}
		require.Equal(t, []string{"gpu-recovery-reset/reset-gpu/" + string(v1alpha1.PhaseSucceeded)}, got,
			"one ladder for the GSP fault, under the driver's policy, though GPUXidError was True too")
	})

	t.Run("escalate", func(t *testing.T) {
		s := runScenario(t, w, "escalate")
		var n corev1.Node
		require.NoError(t, w.Cluster.Client.Get(ctx, client.ObjectKey{Name: s.Node}, &n))
		require.True(t, plan.Quarantined(&n), "node %s quarantined", s.Node)
		require.True(t, n.Spec.Unschedulable)

		var ops v1alpha1.NodeOperationList
		require.NoError(t, w.Cluster.Client.List(ctx, &ops))
		phases := map[string]v1alpha1.NodeOperationPhase{}
		for _, op := range ops.Items {
			if op.Spec.NodeName == s.Node {
				phases[stepOf(op)] = op.Status.Phase
			}
		}
		require.Equal(t, v1alpha1.PhaseFailed, phases["reset-gpu"], "the reset failed: %v", phases)

		// Before the reset touched the GPU, the capture kept the node's
		// evidence: the bundle behind the operation's link holds the
		// kernel log's Xid and nvidia-smi -q, with the sha256 the status
		// records.
		for _, op := range ops.Items {
			if op.Spec.NodeName != s.Node || stepOf(op) != "reset-gpu" {
				continue
			}
			files := bundleOf(t, op)
			require.Contains(t, string(files["xid.log"]), "NVRM: Xid (PCI:0000:18:00): 46", "the Xid that started it all")
			require.Contains(t, string(files["nvidia-smi-q.txt"]), "NVIDIA H100 80GB HBM3")
			require.Contains(t, string(files["manifest.json"]), `"node": "`+s.Node+`"`)
		}
		require.Contains(t, phases, "reboot", "then a reboot: %v", phases)
		require.Contains(t, phases, "quarantine", "then the quarantine: %v", phases)

		issues, err := s.Issues(ctx, s.Node)
		require.NoError(t, err)
		var handoff string
		var handoffNumber int
		for _, is := range issues {
			if is.GetState() == "open" && strings.Contains(is.GetTitle()+is.GetBody(), "KubemedicNodeQuarantined") {
				handoff, handoffNumber = is.GetBody(), is.GetNumber()
			}
		}
		require.NotEmpty(t, handoff, "an open issue about the quarantine of %s", s.Node)
		// One issue for the node's whole incident (the shipped route groups
		// its alerts by node), whose title and label followed it to the
		// quarantine.
		require.Len(t, issues, 1, "one issue for the incident of %s", s.Node)
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			is, ok := w.GitHub.Issue(s.Info.GitHubRepo, handoffNumber)
			require.True(c, ok)
			assert.Regexp(c, `^\[(critical|warning)\] Node `+s.Node+`(: GPUXidError)? — quarantined$`, is.Title)
			assert.Contains(c, is.Labels, "incident:quarantined")
		}, 10*time.Second, 200*time.Millisecond)
		captures := 0
		for _, op := range ops.Items {
			if op.Spec.NodeName == s.Node && !op.Spec.Quarantine {
				require.Contains(t, handoff, op.Name, "the issue lists attempt %s", op.Name)
				captures++
			}
		}

		// The person handed the node reads the evidence: the issue has one
		// comment per capture (before the reset, before the reboot), whose
		// link downloads the bundle from the store, with the sha256 the
		// comment gives, holding the Xid that started it all.
		var diag []string
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			diag = nil
			for _, body := range w.GitHub.Comments(demo.Repo, handoffNumber) {
				if strings.Contains(body, "**Diagnostics kept**") {
					diag = append(diag, body)
				}
			}
			require.Len(c, diag, captures, "one diagnostics comment per capture")
		}, 20*time.Second, 200*time.Millisecond)
		link := regexp.MustCompile(`\]\((http[^)]+)\)`)
		sumRE := regexp.MustCompile("sha256: `([0-9a-f]{64})`")
		for _, body := range diag {
			u, sum := link.FindStringSubmatch(body), sumRE.FindStringSubmatch(body)
			require.NotNil(t, u, body)
			require.NotNil(t, sum, body)
			files := download(t, u[1], sum[1])
			require.Contains(t, string(files["xid.log"]), "NVRM: Xid (PCI:0000:18:00): 46", "the Xid that started it all")
			require.Contains(t, string(files["nvidia-smi-q.txt"]), "NVIDIA H100 80GB HBM3")
		}

		// A person closes the issue on the stand-in's page: the node stays
		// quarantined; only the documented manual step releases it.
		resp, err := http.PostForm(s.Info.PageURL, url.Values{"repo": {s.Info.GitHubRepo}, "number": {strconv.Itoa(handoffNumber)}, "action": {"close"}})
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		is, ok := w.GitHub.Issue(s.Info.GitHubRepo, handoffNumber)
		require.True(t, ok)
		require.Equal(t, "closed", string(is.State))
		time.Sleep(3 * time.Second) // several remediator passes at the demo's speed
		require.NoError(t, w.Cluster.Client.Get(ctx, client.ObjectKey{Name: s.Node}, &n))
		require.True(t, plan.Quarantined(&n) && n.Spec.Unschedulable, "closing the issue does not release node %s", s.Node)
	})
}

// logPeakRSS logs the peak resident set (VmHWM) of each kubemedic process
// and their sum, an upper bound of the peak of the sum.
func logPeakRSS(t *testing.T, w *demo.World) {
	var total int
	var parts []string
	for _, p := range w.Processes() {
		if !strings.HasPrefix(p.Name(), "kubemedic-") {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.PID()))
		require.NoError(t, err, "%s is still running", p.Name())
		for line := range strings.Lines(string(b)) {
			var kb int
			if _, err := fmt.Sscanf(line, "VmHWM: %d kB", &kb); err == nil {
				total += kb
				parts = append(parts, fmt.Sprintf("%s %d MiB", p.Name(), kb/1024))
			}
		}
	}
	require.NotEmpty(t, parts)
	t.Logf("peak RSS (VmHWM) of the kubemedic processes: %s; sum %d MiB", strings.Join(parts, ", "), total/1024)
}

// bundleOf downloads an operation's diagnostics bundle through the link
// in its status, checks its sha256 against the status, and returns its
// files by name.
func bundleOf(t *testing.T, op v1alpha1.NodeOperation) map[string][]byte {
	t.Helper()
	d := op.Status.Diagnostics
	require.NotNil(t, d, "operation %s captured nothing", op.Name)
	require.Contains(t, []v1alpha1.DiagnosticsResult{v1alpha1.DiagnosticsCaptured, v1alpha1.DiagnosticsPartial}, d.Result, "%s: %s", op.Name, d.Message)
	require.NotNil(t, d.Bundle)
	require.True(t, d.Bundle.Stored, d.Message)
	require.NotEmpty(t, d.Bundle.URL, d.Message)
	files := download(t, d.Bundle.URL, d.Bundle.SHA256)
	t.Logf("bundle of %s: %d bytes, %d files (%s)", op.Name, d.Bundle.Size, len(files), d.Message)
	return files
}

// download fetches a bundle through its link, checks its sha256, and
// returns its files by name.
func download(t *testing.T, link, wantSHA256 string) map[string][]byte {
	t.Helper()
	resp, err := http.Get(link)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	sum := sha256.Sum256(body)
	require.Equal(t, wantSHA256, hex.EncodeToString(sum[:]))
	_, files := testsupport.Untar(t, body)
	return files
}

func stepOf(op v1alpha1.NodeOperation) string {
	if op.Spec.Quarantine {
		return "quarantine"
	}
	return op.Spec.Step
}
