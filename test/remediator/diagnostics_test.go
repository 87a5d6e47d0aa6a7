package remediator_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/detectors/host"
	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/diagnostics"
	"github.com/kubemedic/kubemedic/remediator/diagnostics/capture"
	diagstore "github.com/kubemedic/kubemedic/remediator/diagnostics/store"
	"github.com/kubemedic/kubemedic/remediator/evidence"
	"github.com/kubemedic/kubemedic/remediator/plan"
	"github.com/kubemedic/kubemedic/test/harness"
	"github.com/kubemedic/kubemedic/test/testsupport"
)

// opCapture is a capture template no kwok stage ends: the test plays its
// pods, by running kubemedic-diag's capture on a fake host root.
const opCapture = "test-collect-diagnostics"

const diagSecret = "kubemedic-diagnostics"

func diagPolicy(nodes ...string) *v1alpha1.RemediationPolicy {
	all := intstr.FromString("100%")
	two := intstr.FromInt32(2)
	return &v1alpha1.RemediationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-xid-diag"},
		Spec: v1alpha1.RemediationPolicySpec{
			NodeSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "kubernetes.io/hostname", Operator: metav1.LabelSelectorOpIn, Values: nodes}}},
			Conditions: []v1alpha1.ConditionMatch{{Type: v1alpha1.ConditionGPUXidError, Status: corev1.ConditionTrue,
				Reason: v1alpha1.ReasonXidResetRequired, For: dur(time.Second)}},
			Diagnostics: &v1alpha1.DiagnosticsSpec{Operation: opCapture, Timeout: dur(6 * time.Second)},
			Steps: []v1alpha1.RemediationStep{
				{Name: "reset-gpu", StepAction: v1alpha1.StepAction{Operation: opSucceed, Cordon: true, Timeout: dur(20 * time.Second)},
					HealthyFor: dur(time.Second), RecoveryTimeout: dur(20 * time.Second)},
			},
			Safety: v1alpha1.Safety{MaxUnhealthy: &all, MaxConcurrent: &two, NodeCooldown: dur(time.Hour)},
		},
	}
}

// fakeHostRoot is a node's root with the kernel log holding the Xid, and
// an nvidia-bug-report.sh that never returns, as on a node whose GPU fell
// off the bus.
func fakeHostRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "dev"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "dev", "kmsg"),
		[]byte("6,1,100,-;Linux version 6.8.0\n3,2,2000,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=python3, GPU has fallen off the bus.\n"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "usr", "bin"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "usr", "bin", "nvidia-bug-report.sh"), []byte("#!/bin/sh\nsleep 300 &\nwait\n"), 0o755))
	return root
}

// playCapture runs the capture pod's command as the node would: kubemedic-
// diag capture with the pod's environment, the Secret's keys in place of
// its secretKeyRefs, on a fake host root; then ends the pod with the
// report as its termination message.
func playCapture(t *testing.T, env *localcluster.Cluster, pod *corev1.Pod, root string) diagnostics.Report {
	t.Helper()
	ctx := context.Background()
	var sec corev1.Secret
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: opNamespace, Name: diagSecret}, &sec))
	vars := map[string]string{}
	for _, e := range pod.Spec.Containers[0].Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			require.Equal(t, diagSecret, e.ValueFrom.SecretKeyRef.Name)
			vars[e.Name] = string(sec.Data[e.ValueFrom.SecretKeyRef.Key])
		default:
			vars[e.Name] = e.Value
		}
	}
	term := filepath.Join(t.TempDir(), "termination-log")
	var out, errOut bytes.Buffer
	start := time.Now()
	code := capture.Main([]string{"capture", "--root=" + root, "--no-chroot", "--termination-log=" + term, "--bug-report-timeout=2s"},
		&out, &errOut, func(k string) string { return vars[k] })
	require.Equal(t, 0, code, "stderr: %s", errOut.String())
	b, err := os.ReadFile(term)
	require.NoError(t, err)
	r, err := diagnostics.ParseReport(b)
	require.NoError(t, err)
	require.Less(t, time.Since(start), 15*time.Second, "the hung nvidia-bug-report.sh held the capture")
	require.NoError(t, localcluster.FinishPod(ctx, env.Client, pod, true, string(b)))
	return r
}

// TestDiagnosticsBeforeRepair: the step's capture runs once on the node
// before the reset, a remediator restart included; its bundle goes to a
// real S3 store and the operation's status links it. A capture that never
// reports is deleted at its timeout and the repair goes on.
func TestDiagnosticsBeforeRepair(t *testing.T) {
	env := startCluster(t)
	s3 := harness.S3(t)
	ctx := context.Background()
	require.NoError(t, env.Client.Create(ctx, &v1alpha1.NodeOperationTemplate{ObjectMeta: metav1.ObjectMeta{Name: opCapture},
		Spec: v1alpha1.NodeOperationTemplateSpec{Image: "ghcr.io/kubemedic/kubemedic-diag:test", Command: []string{"/ko-app/kubemedic-diag"},
			Args: []string{"capture", "--root=/host"}, HostPID: true, Privileged: true}}))
	require.NoError(t, env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: opNamespace, Name: diagSecret},
		Data: map[string][]byte{diagnostics.SecretAccessKey: []byte(s3.AccessKey), diagnostics.SecretSecretKey: []byte(s3.SecretKey)}}))
	nodes := gpuNodes(t, env, "diag", 2)
	captured, hung := nodes[0], nodes[1]
	// The GPU Operator's device plugin on the node: the must-gather keeps
	// its log (kwok's pods have none to give: the read's error is kept).
	_, err := env.CreatePod(ctx, localcluster.PodSpec{Namespace: "gpu-operator", Name: "nvidia-device-plugin-daemonset-x", NodeName: captured,
		Labels: map[string]string{"app": "nvidia-device-plugin-daemonset"}})
	require.NoError(t, err)
	createPolicy(t, env, diagPolicy(nodes...))

	rem := newRemediator(t, env)
	rem.opts.Diagnostics = &evidence.Options{Store: diagstore.Config{Endpoint: s3.Endpoint, Bucket: s3.Bucket, Insecure: true},
		Secret: diagSecret, LinkExpiry: time.Hour}
	rem.start()
	for _, n := range nodes {
		setCondition(t, env, n, v1alpha1.ConditionGPUXidError, corev1.ConditionTrue, v1alpha1.DetectReason,
			"XidResetRequired: Xid 79 on 0000:3b:00.0: fell off the bus; reset required")
	}

	// The capture pod runs before the operation pod, on the cordoned node.
	capturePod := func(c require.TestingT, node string) (*v1alpha1.NodeOperation, *corev1.Pod) {
		ops := opsOnNode(c, env, node)
		require.Len(c, ops, 1)
		op := ops[0]
		require.Equal(c, v1alpha1.PhaseCapturing, op.Status.Phase, describeOps(env))
		var pod corev1.Pod
		require.NoError(c, env.Client.Get(ctx, client.ObjectKey{Namespace: opNamespace, Name: plan.CapturePodName(&op)}, &pod))
		require.Equal(c, corev1.PodRunning, pod.Status.Phase)
		return &op, &pod
	}
	var op *v1alpha1.NodeOperation
	var pod *corev1.Pod
	require.EventuallyWithT(t, func(c *assert.CollectT) { op, pod = capturePod(c, captured) }, 30*time.Second, 200*time.Millisecond)
	require.True(t, getNode(t, env, captured).Spec.Unschedulable, "cordoned before the capture")
	require.False(t, podExists(t, env, opNamespace, plan.OperationPodName(op)), "no operation pod before the capture ends")
	require.Equal(t, captured, pod.Spec.NodeName)
	for _, e := range pod.Spec.Containers[0].Env {
		require.NotContains(t, e.Value, s3.SecretKey, "credentials only by secretKeyRef")
	}
	require.Contains(t, envOf(pod), diagnostics.EnvEndpoint+"="+s3.Endpoint)

	// A crash while the capture runs: the new remediator finds the pod
	// and makes no second one.
	rem.stop()
	rem.start()
	capturePods := func() int {
		var pods corev1.PodList
		require.NoError(t, env.Client.List(ctx, &pods, client.InNamespace(opNamespace)))
		n := 0
		for _, p := range pods.Items {
			if p.Spec.NodeName == captured && strings.HasSuffix(p.Name, "-diag") {
				n++
			}
		}
		return n
	}
	// Several passes of the new remediator: never a second capture pod,
	// and the operation still waits for the first one.
	require.Never(t, func() bool { return capturePods() != 1 }, 2*time.Second, 100*time.Millisecond, "one capture pod across the restart")
	require.Equal(t, plan.CapturePodName(op), getOp(t, env, op.Name).Status.Diagnostics.PodName)

	root := fakeHostRoot(t)
	report := playCapture(t, env, pod, root)
	require.True(t, report.Stored, report.Message)
	require.Equal(t, v1alpha1.DiagnosticsPartial, report.Result, "nvidia-bug-report.sh never returned: %s", report.Message)
	require.Contains(t, strings.Join(report.FailedParts, "; "), "nvidia-bug-report (timed out after 2")

	// Then the repair: the operation pod, verification once the
	// condition clears.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		o := getOp(t, env, op.Name)
		require.Equal(c, v1alpha1.PhaseVerifying, o.Status.Phase, describeOps(env))
	}, 30*time.Second, 200*time.Millisecond)
	setCondition(t, env, captured, v1alpha1.ConditionGPUXidError, corev1.ConditionFalse, "NoXidError", "no actionable Xid")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.Equal(c, v1alpha1.PhaseSucceeded, getOp(t, env, op.Name).Status.Phase, describeOps(env))
	}, 30*time.Second, 200*time.Millisecond)
	done := getOp(t, env, op.Name)
	d := done.Status.Diagnostics
	require.NotNil(t, d)
	require.Equal(t, report.Result, d.Result)
	require.Equal(t, plan.CapturePodName(op), d.PodName)
	b := d.Bundle
	require.NotNil(t, b)
	require.Equal(t, captured+"/"+op.Name+".tar.gz", b.Key)
	require.True(t, b.Stored)
	require.Equal(t, report.SHA256, b.SHA256)
	require.NotEmpty(t, b.URL)
	require.WithinDuration(t, time.Now().Add(time.Hour), b.URLExpires.Time, time.Minute)

	// The remediator's must-gather, taken when the capture started: the
	// Node, its Events, its NodeOperations, and the device plugin's log
	// (or why not), in the store beside the node's bundle.
	cl := d.Cluster
	require.NotNil(t, cl, "the cluster must-gather")
	require.Equal(t, captured+"/"+op.Name+"-cluster.tar.gz", cl.Key)
	require.True(t, cl.Stored)
	require.Equal(t, []string{"manifest.json", "node.yaml", "events.txt", "nodeoperations.yaml"}, cl.Files[:4])
	onDisk, err := os.ReadFile(s3.ObjectPath(cl.Key))
	require.NoError(t, err)
	cs := sha256.Sum256(onDisk)
	require.Equal(t, cl.SHA256, hex.EncodeToString(cs[:]))
	_, raw := testsupport.Untar(t, onDisk)
	files := map[string]string{}
	for k, v := range raw {
		files[k] = string(v)
	}
	require.Contains(t, files["node.yaml"], "name: "+captured)
	require.Contains(t, files["events.txt"], "OperationCreated", "the node's Events up to the capture")
	require.Contains(t, files["nodeoperations.yaml"], op.Name)
	require.Contains(t, files["manifest.json"], "nvidia-device-plugin-daemonset-x", "the device plugin's log, or why it could not be read")
	resp, err := http.Get(b.URL)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	s := sha256.Sum256(body)
	require.Equal(t, b.SHA256, hex.EncodeToString(s[:]), "the link downloads the bundle whose sha256 the status records")
	cond := findCond(done.Status.Conditions, v1alpha1.OperationDiagnosed)
	require.NotNil(t, cond)
	require.Equal(t, metav1.ConditionTrue, cond.Status)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.Subset(c, eventReasons(c, env, "NodeOperation", op.Name), []string{v1alpha1.EventCaptureStarted, reasonOf(report.Result)})
	}, 10*time.Second, 200*time.Millisecond)

	require.Equal(t, float64(1), rem.metric("kubemedic_remediation_captures_total", map[string]string{"policy": "gpu-xid-diag", "result": string(report.Result)}))

	// The other node's capture never reports: at its timeout the pod is
	// deleted, the capture failed, and the repair went on.
	var hungOp *v1alpha1.NodeOperation
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		ops := opsOnNode(c, env, hung)
		require.Len(c, ops, 1)
		hungOp = &ops[0]
		require.NotNil(c, hungOp.Status.Diagnostics)
		require.Equal(c, v1alpha1.DiagnosticsFailed, hungOp.Status.Diagnostics.Result, describeOps(env))
		require.Contains(c, []v1alpha1.NodeOperationPhase{v1alpha1.PhaseRunning, v1alpha1.PhaseVerifying}, hungOp.Status.Phase)
	}, 40*time.Second, 200*time.Millisecond)
	require.Contains(t, hungOp.Status.Diagnostics.Message, "no report after 6s")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.False(c, podExists(c, env, opNamespace, plan.CapturePodName(hungOp)), "the hung capture pod is deleted")
	}, 10*time.Second, 200*time.Millisecond)
}

func reasonOf(r v1alpha1.DiagnosticsResult) string {
	if r == v1alpha1.DiagnosticsPartial {
		return v1alpha1.ReasonCapturePartial
	}
	return v1alpha1.ReasonCaptured
}

// TestSpooledBundleReachesTheStoreLater: the store is down when a capture
// runs: the bundle stays in the node's spool, the operation says so and
// the repair goes on; once the store is back and a flush on the node
// uploads it, the remediator records it as stored, with a link.
func TestSpooledBundleReachesTheStoreLater(t *testing.T) {
	env := startCluster(t)
	s3 := harness.S3(t)
	ctx := context.Background()
	require.NoError(t, env.Client.Create(ctx, &v1alpha1.NodeOperationTemplate{ObjectMeta: metav1.ObjectMeta{Name: opCapture},
		Spec: v1alpha1.NodeOperationTemplateSpec{Image: "ghcr.io/kubemedic/kubemedic-diag:test", Command: []string{"/ko-app/kubemedic-diag"}}}))
	require.NoError(t, env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: opNamespace, Name: diagSecret},
		Data: map[string][]byte{diagnostics.SecretAccessKey: []byte(s3.AccessKey), diagnostics.SecretSecretKey: []byte(s3.SecretKey)}}))
	node := gpuNodes(t, env, "spool", 1)[0]
	createPolicy(t, env, diagPolicy(node))
	rem := newRemediator(t, env)
	rem.opts.Diagnostics = &evidence.Options{Store: diagstore.Config{Endpoint: s3.Endpoint, Bucket: s3.Bucket, Insecure: true},
		Secret: diagSecret, LinkExpiry: time.Hour, SpooledRecheck: 500 * time.Millisecond}
	rem.start()
	require.NoError(t, s3.Stop())
	setCondition(t, env, node, v1alpha1.ConditionGPUXidError, corev1.ConditionTrue, v1alpha1.DetectReason,
		"XidResetRequired: Xid 79 on 0000:3b:00.0: fell off the bus; reset required")

	var op *v1alpha1.NodeOperation
	var pod corev1.Pod
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		ops := opsOnNode(c, env, node)
		require.Len(c, ops, 1)
		op = &ops[0]
		require.Equal(c, v1alpha1.PhaseCapturing, op.Status.Phase, describeOps(env))
		require.NoError(c, env.Client.Get(ctx, client.ObjectKey{Namespace: opNamespace, Name: plan.CapturePodName(op)}, &pod))
		require.Equal(c, corev1.PodRunning, pod.Status.Phase)
	}, 30*time.Second, 200*time.Millisecond)
	root := fakeHostRoot(t)
	report := playCapture(t, env, &pod, root)
	require.False(t, report.Stored, "the store is down")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		o := getOp(t, env, op.Name)
		require.NotEqual(c, v1alpha1.PhaseCapturing, o.Status.Phase, "the repair goes on")
		require.NotNil(c, o.Status.Diagnostics.Bundle)
		require.False(c, o.Status.Diagnostics.Bundle.Stored)
		require.Empty(c, o.Status.Diagnostics.Bundle.URL)
	}, 30*time.Second, 200*time.Millisecond)
	require.Nil(t, getOp(t, env, op.Name).Status.Diagnostics.Cluster, "no must-gather while the store is down")

	// The store is back; a flush on the node uploads the spool.
	require.NoError(t, s3.Start(ctx))
	var out, errOut bytes.Buffer
	env2 := map[string]string{diagnostics.EnvEndpoint: s3.Endpoint, diagnostics.EnvBucket: s3.Bucket, diagnostics.EnvInsecure: "true",
		diagnostics.EnvAccessKey: s3.AccessKey, diagnostics.EnvSecretKey: s3.SecretKey}
	require.Equal(t, 0, capture.Main([]string{"flush", "--root=" + root, "--termination-log=" + filepath.Join(t.TempDir(), "flush-log")}, &out, &errOut, func(k string) string { return env2[k] }), errOut.String())
	require.Contains(t, out.String(), "stored "+report.Key)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		b := getOp(t, env, op.Name).Status.Diagnostics.Bundle
		require.True(c, b.Stored, "recorded as stored once the store holds it")
		require.NotEmpty(c, b.URL)
	}, 15*time.Second, 200*time.Millisecond)
}

// TestDiagnosticsRetention: the remediator deletes bundles older than the
// retention from the store, but keeps those of a node still quarantined.
func TestDiagnosticsRetention(t *testing.T) {
	env := startCluster(t)
	s3 := harness.S3(t)
	ctx := context.Background()
	require.NoError(t, env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: opNamespace, Name: diagSecret},
		Data: map[string][]byte{diagnostics.SecretAccessKey: []byte(s3.AccessKey), diagnostics.SecretSecretKey: []byte(s3.SecretKey)}}))
	nodes := gpuNodes(t, env, "keep", 2)
	healthy, quarantined := nodes[0], nodes[1]
	n := getNode(t, env, quarantined)
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: v1alpha1.TaintQuarantined, Effect: corev1.TaintEffectNoSchedule})
	require.NoError(t, env.Client.Update(ctx, n))

	store, err := diagstore.New(diagstore.Config{Endpoint: s3.Endpoint, Bucket: s3.Bucket, Insecure: true},
		diagstore.Credentials{AccessKey: s3.AccessKey, SecretKey: s3.SecretKey})
	require.NoError(t, err)
	body := []byte("evidence")
	s := sha256.Sum256(body)
	old := time.Now().Add(-40 * 24 * time.Hour)
	for _, key := range []string{healthy + "/old.tar.gz", healthy + "/new.tar.gz", quarantined + "/old.tar.gz"} {
		require.NoError(t, store.Put(ctx, key, bytes.NewReader(body), int64(len(body)), hex.EncodeToString(s[:]), ""))
		if strings.HasSuffix(key, "old.tar.gz") {
			// The posix backend's LastModified is the file's.
			require.NoError(t, os.Chtimes(s3.ObjectPath(key), old, old))
		}
	}
	rem := newRemediator(t, env)
	rem.opts.Diagnostics = &evidence.Options{Store: diagstore.Config{Endpoint: s3.Endpoint, Bucket: s3.Bucket, Insecure: true},
		Secret: diagSecret, Retention: 30 * 24 * time.Hour, SweepEvery: 500 * time.Millisecond}
	rem.start()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		objs, err := store.List(ctx, "")
		require.NoError(c, err)
		var keys []string
		for _, o := range objs {
			keys = append(keys, o.Key)
		}
		require.ElementsMatch(c, []string{healthy + "/new.tar.gz", quarantined + "/old.tar.gz"}, keys,
			"the old bundle of a healthy node is gone; a quarantined node's is kept")
	}, 15*time.Second, 200*time.Millisecond)
}

// TestDiagnosticsFlush: a node annotated for a flush (kubemedic diag
// flush) gets one flush pod made from the capture template, with the
// store's settings; when it ends, the Node's Event says what was stored,
// the pod is deleted and the annotation removed.
func TestDiagnosticsFlush(t *testing.T) {
	env := startCluster(t)
	s3 := harness.S3(t)
	ctx := context.Background()
	require.NoError(t, env.Client.Create(ctx, &v1alpha1.NodeOperationTemplate{ObjectMeta: metav1.ObjectMeta{Name: evidence.DefaultFlushTemplate},
		Spec: v1alpha1.NodeOperationTemplateSpec{Image: "ghcr.io/kubemedic/kubemedic-diag:test", Command: []string{"/ko-app/kubemedic-diag"},
			Args: []string{"capture", "--root=/host"}, Privileged: true}}))
	require.NoError(t, env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: opNamespace, Name: diagSecret},
		Data: map[string][]byte{diagnostics.SecretAccessKey: []byte(s3.AccessKey), diagnostics.SecretSecretKey: []byte(s3.SecretKey)}}))
	node := gpuNodes(t, env, "flush", 1)[0]
	root := fakeHostRoot(t)
	// A bundle left in the spool while the store was down.
	c := &capture.Capture{Root: host.Root(root), Node: node, Operation: "gpu-xid-reset.old-0", Spool: filepath.Join(root, diagnostics.SpoolDir),
		Parts: capture.DefaultParts(time.Second, capture.DefaultKmsg)[2:4], Now: time.Now}
	_, sp, err := c.Run(ctx)
	require.NoError(t, err)

	rem := newRemediator(t, env)
	rem.opts.Diagnostics = &evidence.Options{Store: diagstore.Config{Endpoint: s3.Endpoint, Bucket: s3.Bucket, Insecure: true},
		Secret: diagSecret, LinkExpiry: time.Hour}
	rem.start()
	n := getNode(t, env, node)
	n.Annotations[v1alpha1.AnnotationDiagnosticsFlush] = time.Now().UTC().Format(time.RFC3339)
	require.NoError(t, env.Client.Update(ctx, n))

	var pod corev1.Pod
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, env.Client.Get(ctx, client.ObjectKey{Namespace: opNamespace, Name: evidence.FlushPodName(node)}, &pod))
		require.Equal(c, corev1.PodRunning, pod.Status.Phase)
	}, 30*time.Second, 200*time.Millisecond)
	require.Equal(t, node, pod.Spec.NodeName)
	require.Equal(t, []string{"flush", "--root=/host"}, pod.Spec.Containers[0].Args)
	require.Contains(t, envOf(&pod), diagnostics.EnvEndpoint+"="+s3.Endpoint)

	// The node runs it: kubemedic-diag flush with the pod's environment.
	vars := map[string]string{}
	var sec corev1.Secret
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: opNamespace, Name: diagSecret}, &sec))
	for _, e := range pod.Spec.Containers[0].Env {
		vars[e.Name] = e.Value
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			vars[e.Name] = string(sec.Data[e.ValueFrom.SecretKeyRef.Key])
		}
	}
	term := filepath.Join(t.TempDir(), "termination-log")
	var out, errOut bytes.Buffer
	require.Equal(t, 0, capture.Main([]string{"flush", "--root=" + root, "--termination-log=" + term}, &out, &errOut, func(k string) string { return vars[k] }), errOut.String())
	msg, err := os.ReadFile(term)
	require.NoError(t, err)
	require.NoError(t, localcluster.FinishPod(ctx, env.Client, &pod, true, string(msg)))

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NotContains(c, getNode(t, env, node).Annotations, v1alpha1.AnnotationDiagnosticsFlush, "the request is done")
		require.False(c, podExists(c, env, opNamespace, evidence.FlushPodName(node)), "the flush pod is deleted")
		require.Contains(c, eventReasons(c, env, "Node", node), v1alpha1.EventDiagnosticsFlushed)
	}, 30*time.Second, 200*time.Millisecond)
	_, err = os.Stat(s3.ObjectPath(sp.Key))
	require.NoError(t, err, "the spooled bundle is in the store")
}

// TestCaptureWithoutTheStoreSecret: with the store's Secret missing, the
// capture pod is made without the store (a secretKeyRef to a missing
// Secret would never start, holding the repair for the whole timeout): its
// bundle stays in the node's spool, and a Warning says why.
func TestCaptureWithoutTheStoreSecret(t *testing.T) {
	env := startCluster(t)
	ctx := context.Background()
	require.NoError(t, env.Client.Create(ctx, &v1alpha1.NodeOperationTemplate{ObjectMeta: metav1.ObjectMeta{Name: opCapture},
		Spec: v1alpha1.NodeOperationTemplateSpec{Image: "ghcr.io/kubemedic/kubemedic-diag:test", Command: []string{"/ko-app/kubemedic-diag"}}}))
	node := gpuNodes(t, env, "nosecret", 1)[0]
	createPolicy(t, env, diagPolicy(node))
	rem := newRemediator(t, env)
	rem.opts.Diagnostics = &evidence.Options{Store: diagstore.Config{Endpoint: "127.0.0.1:1", Bucket: "b", Insecure: true},
		Secret: "no-such-secret", LinkExpiry: time.Hour}
	rem.start()
	setCondition(t, env, node, v1alpha1.ConditionGPUXidError, corev1.ConditionTrue, v1alpha1.DetectReason,
		"XidResetRequired: Xid 79 on 0000:3b:00.0: fell off the bus; reset required")
	var pod corev1.Pod
	var op v1alpha1.NodeOperation
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		ops := opsOnNode(c, env, node)
		require.Len(c, ops, 1)
		op = ops[0]
		require.NoError(c, env.Client.Get(ctx, client.ObjectKey{Namespace: opNamespace, Name: plan.CapturePodName(&op)}, &pod))
	}, 30*time.Second, 200*time.Millisecond)
	for _, e := range pod.Spec.Containers[0].Env {
		require.NotEqual(t, diagnostics.EnvEndpoint, e.Name, "no store for the pod")
		require.Nil(t, e.ValueFrom, "no secretKeyRef to a missing Secret")
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.Contains(c, eventReasons(c, env, "NodeOperation", op.Name), v1alpha1.ReasonDiagnosticsFailed)
	}, 10*time.Second, 200*time.Millisecond)
}
