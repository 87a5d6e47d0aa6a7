package janitor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/internal/notify"
	"github.com/kubemedic/kubemedic/internal/notify/notifytest"
	"github.com/kubemedic/kubemedic/janitor/controller"
	"github.com/kubemedic/kubemedic/janitor/decide"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/test/harness"
	"github.com/kubemedic/kubemedic/test/metricstest"
)

// Timing of the tests: Prometheus scrapes every second, idle windows are
// 20 s, grace periods 8 s, a janitor cycle runs every second.
const (
	scrapeInterval = time.Second
	idleWindow     = 20 * time.Second
	grace          = 8 * time.Second
	cycle          = time.Second
)

const janitorNS = "kubemedic-system"

// world is one test's cluster: API server + kwok, Prometheus scraping the
// dcgm-exporter stand-in, Slack, and a node.
type world struct {
	t     *testing.T
	env   *localcluster.Cluster
	dcgm  *harness.DCGMExporter
	prom  *harness.Prometheus
	slack *notifytest.Server
	node  string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	env := harness.Start(t, localcluster.Options{Kwok: true})
	ctx := context.Background()
	require.NoError(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: janitorNS}}))
	nodes, err := env.CreateGPUNodes(ctx, 1, localcluster.NodeSpec{NamePrefix: "gpu"})
	require.NoError(t, err)
	require.NoError(t, env.WaitNodesReady(ctx, nodes[0].Name))
	dcgm := harness.StartDCGMExporter(t)
	prom := harness.StartPrometheus(t, fmt.Sprintf(`global:
  scrape_interval: %s
  evaluation_interval: %s
scrape_configs:
  - job_name: dcgm-exporter
    static_configs:
      - targets: [%q]
`, scrapeInterval, scrapeInterval, dcgm.URL))
	return &world{t: t, env: env, dcgm: dcgm, prom: prom, slack: notifytest.New(t), node: nodes[0].Name}
}

// janitor is an in-process janitor manager that a test can stop and start.
type janitor struct {
	t      *testing.T
	w      *world
	opts   controller.ManagerOptions
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan error
	reg    *prometheus.Registry
	// jan is the running janitor (its Slack endpoint, when on).
	jan *controller.Janitor
}

func (w *world) janitor(mut ...func(*controller.ManagerOptions)) *janitor {
	o := controller.ManagerOptions{
		Options: controller.Options{Namespace: janitorNS, PrometheusURL: w.prom.URL, Interval: cycle, Staleness: 3 * time.Second,
			Notifier: notify.NewSlack(notifytest.Token, notify.SlackOptions{APIURL: w.slack.URL()}), Identity: "janitor-test"},
		MetricsAddr: "0", ProbeAddr: "0",
	}
	for _, m := range mut {
		m(&o)
	}
	return &janitor{t: w.t, w: w, opts: o}
}

func (j *janitor) start() *janitor {
	j.t.Helper()
	j.mu.Lock()
	defer j.mu.Unlock()
	j.reg = prometheus.NewRegistry()
	o := j.opts
	o.Registry = j.reg
	ctx, cancel := context.WithCancel(context.Background())
	mgr, jan, err := controller.NewManager(ctx, j.w.env.Config, o)
	require.NoError(j.t, err)
	j.jan = jan
	j.cancel, j.done = cancel, make(chan error, 1)
	go func() { j.done <- mgr.Start(ctx) }()
	syncCtx, syncCancel := context.WithTimeout(ctx, 30*time.Second)
	defer syncCancel()
	require.True(j.t, mgr.GetCache().WaitForCacheSync(syncCtx), "janitor cache sync")
	j.t.Cleanup(j.stop)
	return j
}

// stop stops the manager at once, as a crash would.
func (j *janitor) stop() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.cancel == nil {
		return
	}
	j.cancel()
	select {
	case <-j.done:
	case <-time.After(30 * time.Second):
		j.t.Errorf("janitor did not stop within 30s")
	}
	j.cancel = nil
}

// waitCycles waits until the janitor has finished n more cycles: what a
// test that expects nothing to happen waits for, instead of a sleep.
func (j *janitor) waitCycles(n int) {
	j.t.Helper()
	const name = "kubemedic_janitor_cycle_duration_seconds" // a histogram: its count
	start := j.metric(name, nil)
	require.Eventually(j.t, func() bool { return j.metric(name, nil) >= start+float64(n) },
		time.Duration(n)*cycle+30*time.Second, 50*time.Millisecond, "the janitor did not finish %d cycles", n)
}

// metric sums the samples of a metric whose labels include labels.
func (j *janitor) metric(name string, labels map[string]string) float64 {
	j.mu.Lock()
	reg := j.reg
	j.mu.Unlock()
	return metricstest.Value(j.t, reg, name, labels)
}

// clusterPolicy applies a ClusterReclaimPolicy.
func (w *world) clusterPolicy(name string, mut func(*v1alpha1.ClusterReclaimPolicySpec)) {
	w.t.Helper()
	p := &v1alpha1.ClusterReclaimPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.ClusterReclaimPolicySpec{
		ReclaimRules: v1alpha1.ReclaimRules{
			Idle:        &v1alpha1.IdleRule{UtilizationBelowPercent: 5, Window: metav1.Duration{Duration: idleWindow}},
			GracePeriod: &metav1.Duration{Duration: grace},
		},
		ExemptNamespaces: []string{"kube-system"},
	}}
	if mut != nil {
		mut(&p.Spec)
	}
	require.NoError(w.t, w.env.Client.Create(context.Background(), p))
}

// namespace creates a namespace whose owner is the given email.
func (w *world) namespace(name, ownerEmail string) {
	w.t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{}}}
	if ownerEmail != "" {
		ns.Annotations[notify.AnnotationOwner] = ownerEmail
	}
	require.NoError(w.t, w.env.Client.Create(context.Background(), ns))
}

// series names the pod's GPU i for the exporter.
func (w *world) series(pod *corev1.Pod, i int) harness.DCGMSeries {
	return harness.DCGMSeries{Namespace: pod.Namespace, Pod: pod.Name, Container: "main", Hostname: w.node,
		UUID: fmt.Sprintf("GPU-%s-%d", pod.UID, i), GPU: i}
}

// util sets the GPU utilisation of every GPU of the pod.
func (w *world) util(pod *corev1.Pod, gpus int, pct float64) {
	for i := 0; i < gpus; i++ {
		w.dcgm.Set(w.series(pod, i), pct)
	}
}

// gpuPod creates a running GPU pod on the world's node with the given
// owner references.
func (w *world) gpuPod(ns, name string, gpus int, owners ...metav1.OwnerReference) *corev1.Pod {
	w.t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, OwnerReferences: owners, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{NodeName: w.node, Containers: []corev1.Container{{Name: "main", Image: "registry.example/train:1",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(int64(gpus), resource.DecimalSI)}}}}},
	}
	require.NoError(w.t, w.env.Client.Create(context.Background(), pod))
	w.waitRunning(pod)
	return pod
}

// migPod creates a running pod holding one MIG instance and gives it a
// GR_ENGINE_ACTIVE series (a ratio) with the given value.
func (w *world) migPod(ns, name string, ratio float64) *corev1.Pod {
	w.t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{NodeName: w.node, Containers: []corev1.Container{{Name: "main", Image: "registry.example/nb:1",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/mig-1g.10gb": resource.MustParse("1")}}}}},
	}
	require.NoError(w.t, w.env.Client.Create(context.Background(), pod))
	w.waitRunning(pod)
	w.dcgm.Set(harness.DCGMSeries{Namespace: ns, Pod: name, Container: "main", Hostname: w.node,
		UUID: "GPU-" + string(pod.UID), GPU: 0, MIGInstance: "7", MIGProfile: "1g.10gb"}, ratio)
	return pod
}

func (w *world) waitRunning(pod *corev1.Pod) {
	w.t.Helper()
	require.Eventually(w.t, func() bool {
		got := &corev1.Pod{}
		if err := w.env.Client.Get(context.Background(), client.ObjectKeyFromObject(pod), got); err != nil {
			return false
		}
		pod.Status = got.Status
		return got.Status.Phase == corev1.PodRunning && got.Status.StartTime != nil
	}, 30*time.Second, 100*time.Millisecond, "pod %s/%s never ran", pod.Namespace, pod.Name)
}

func ownerRef(apiVersion, kind, name string, uid types.UID) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: ptr.To(true)}
}

// statefulSet creates a StatefulSet (no controller runs: it only has to exist).
func (w *world) statefulSet(ns, name string, replicas int32, owners ...metav1.OwnerReference) *appsv1.StatefulSet {
	w.t.Helper()
	ss := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, OwnerReferences: owners},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "registry.example/nb:1"}}}}}}
	require.NoError(w.t, w.env.Client.Create(context.Background(), ss))
	return ss
}

// notebookGVR is Kubeflow's Notebook.
var notebookGVK = schema.GroupVersionKind{Group: "kubeflow.org", Version: "v1", Kind: "Notebook"}

// installNotebookCRD installs Kubeflow's Notebook kind. Kubeflow's
// notebook-controller module is not served by the Go module proxy (403 for
// every version tried, and the kubeflow/kubeflow root module excludes it),
// so its CRD cannot be read from the real module here; this is the kind
// with its group, versions and names, and an open schema.
func (w *world) installNotebookCRD() {
	w.t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "notebooks.kubeflow.org"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "kubeflow.org", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "notebooks", Singular: "notebook", Kind: "Notebook", ListKind: "NotebookList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true)}}}},
		},
	}
	raw, err := json.Marshal(crd)
	require.NoError(w.t, err)
	u := &unstructured.Unstructured{}
	require.NoError(w.t, json.Unmarshal(raw, &u.Object))
	u.SetAPIVersion("apiextensions.k8s.io/v1")
	u.SetKind("CustomResourceDefinition")
	require.NoError(w.t, w.env.Client.Create(context.Background(), u))
	require.Eventually(w.t, func() bool {
		_, err := w.env.Client.RESTMapper().RESTMapping(notebookGVK.GroupKind(), "v1")
		return err == nil
	}, 30*time.Second, 200*time.Millisecond, "Notebook CRD not served")
}

// messagesFor are the Slack messages whose text names the pod.
func (w *world) messagesFor(pod *corev1.Pod) []notifytest.Posted {
	var out []notifytest.Posted
	for _, m := range w.slack.Messages() {
		if strings.Contains(m.Text, pod.Namespace+"/"+pod.Name) {
			out = append(out, m)
		}
	}
	return out
}

// waitMessage waits for a message about the pod containing substr.
func (w *world) waitMessage(pod *corev1.Pod, substr string, timeout time.Duration) notifytest.Posted {
	w.t.Helper()
	var found notifytest.Posted
	require.Eventually(w.t, func() bool {
		for _, m := range w.messagesFor(pod) {
			if strings.Contains(m.Text, substr) {
				found = m
				return true
			}
		}
		return false
	}, timeout, 200*time.Millisecond, "no Slack message about %s/%s with %q; got %v", pod.Namespace, pod.Name, substr, w.texts(pod))
	return found
}

func (w *world) texts(pod *corev1.Pod) []string {
	var out []string
	for _, m := range w.messagesFor(pod) {
		out = append(out, m.Text)
	}
	return out
}

func (w *world) getPod(pod *corev1.Pod) (*corev1.Pod, error) {
	got := &corev1.Pod{}
	err := w.env.Client.Get(context.Background(), client.ObjectKeyFromObject(pod), got)
	return got, err
}

func (w *world) notice(pod *corev1.Pod) *decide.Notice {
	w.t.Helper()
	got, err := w.getPod(pod)
	require.NoError(w.t, err)
	n, err := decide.ParseNotice(got.Annotations[v1alpha1.AnnotationReclaimNotice])
	require.NoError(w.t, err)
	return n
}

// waitNoticed waits until the pod's notice is recorded as sent and returns
// it: the janitor records the deadline after Slack answered, so a test
// that has just seen the message may read the pod before the record.
func (w *world) waitNoticed(pod *corev1.Pod) *decide.Notice {
	w.t.Helper()
	var n *decide.Notice
	require.Eventually(w.t, func() bool { n = w.notice(pod); return n.Noticed() }, 10*time.Second, 100*time.Millisecond,
		"the notice of %s/%s is never recorded as sent", pod.Namespace, pod.Name)
	return n
}

// events returns the notes of the Events about the object with the reason.
func (w *world) events(obj client.Object, reason string) []string {
	w.t.Helper()
	var list eventsv1.EventList
	require.NoError(w.t, w.env.Client.List(context.Background(), &list, client.InNamespace(obj.GetNamespace())))
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Name == obj.GetName() && e.Reason == reason {
			out = append(out, e.Note)
		}
	}
	return out
}
