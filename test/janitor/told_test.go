package janitor_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/janitor/controller"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// TestToldOnceSurvivesRestart: the Warnings told once (an invalid
// annotation, an owner the janitor cannot stop, a namespaced policy it
// ignores) are told by the first janitor, recorded on their objects, and
// not told again by a second janitor started on the same API server after
// the first stopped. A changed invalid value is told again.
func TestToldOnceSurvivesRestart(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	w.slack.AddUser("U0ALICE001", "alice@example.com")
	w.clusterPolicy("short", func(s *v1alpha1.ClusterReclaimPolicySpec) {
		s.Idle = nil
		s.MaxLifetime = &metav1.Duration{Duration: 2 * time.Second}
		s.GracePeriod = &metav1.Duration{Duration: time.Hour}
		s.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "ray"}}
	})
	w.clusterPolicy("long", func(s *v1alpha1.ClusterReclaimPolicySpec) {
		s.Idle = nil
		s.MaxLifetime = &metav1.Duration{Duration: 1000 * time.Hour}
		s.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "team"}}
	})
	w.namespace("ray", "alice@example.com")
	w.namespace("team", "alice@example.com")
	// Looser than the cluster policy "long": ignored, with a Warning.
	loose := &v1alpha1.ReclaimPolicy{ObjectMeta: metav1.ObjectMeta{Name: "loose", Namespace: "team"},
		Spec: v1alpha1.ReclaimPolicySpec{ReclaimRules: v1alpha1.ReclaimRules{MaxLifetime: &metav1.Duration{Duration: 2000 * time.Hour}}}}
	require.NoError(t, w.env.Client.Create(ctx, loose))
	// Past its lifetime, owned by a RayCluster: nothing the janitor can stop.
	ray := w.gpuPod("ray", "head", 1, ownerRef("ray.io/v1", "RayCluster", "rc", "3d0c8c1e-0000-4000-8000-000000000001"))
	bad := w.gpuPod("team", "bad-ttl", 1)
	patchPod(t, w, bad, `{"metadata":{"annotations":{"janitor/ttl":"3 days"}}}`)

	told := []struct {
		obj    client.Object
		reason string
	}{{bad, controller.EventInvalidValue}, {ray, controller.EventUnsupportedOwner}, {loose, controller.EventPolicyIgnored}}
	counts := func() []int {
		var out []int
		for _, c := range told {
			out = append(out, w.eventCount(c.obj, c.reason))
		}
		return out
	}
	recorded := func(obj client.Object) string {
		got := obj.DeepCopyObject().(client.Object)
		require.NoError(t, w.env.Client.Get(ctx, client.ObjectKeyFromObject(obj), got))
		return got.GetAnnotations()[v1alpha1.AnnotationReclaimTold]
	}

	j1 := w.janitor().start()
	require.Eventually(t, func() bool {
		for _, c := range told {
			if w.eventCount(c.obj, c.reason) == 0 || recorded(c.obj) == "" {
				return false
			}
		}
		return true
	}, 30*time.Second, 200*time.Millisecond, "each Warning is told and recorded on its object")
	require.Contains(t, w.events(bad, controller.EventInvalidValue)[0], `"3 days" is not a TTL`)
	j1.waitCycles(3)
	require.Equal(t, []int{1, 1, 1}, counts(), "told once while the janitor runs")
	rayRecord := recorded(ray)
	j1.stop()

	j2 := w.janitor().start()
	j2.waitCycles(3)
	require.Never(t, func() bool { return counts()[0] > 1 || counts()[1] > 1 || counts()[2] > 1 }, 3*cycle, 200*time.Millisecond,
		"a restarted janitor does not tell again what the first one told")
	require.Equal(t, []int{1, 1, 1}, counts())
	require.Equal(t, rayRecord, recorded(ray), "nothing new told, nothing written")

	// A different invalid value is new: told once more, and only once.
	patchPod(t, w, bad, `{"metadata":{"annotations":{"janitor/ttl":"4 days"}}}`)
	require.Eventually(t, func() bool { return w.eventCount(bad, controller.EventInvalidValue) == 2 }, 20*time.Second, 200*time.Millisecond,
		"a changed value is told again")
	j2.waitCycles(3)
	require.Equal(t, []int{2, 1, 1}, counts())
	var notes []string
	notes = append(notes, w.events(bad, controller.EventInvalidValue)...)
	require.Len(t, notes, 2)
	require.Contains(t, notes[0]+notes[1], `"4 days" is not a TTL`)
}

// eventCount counts the Events about the object with the reason,
// repetitions of one Event (its series) included.
func (w *world) eventCount(obj client.Object, reason string) int {
	w.t.Helper()
	var list eventsv1.EventList
	require.NoError(w.t, w.env.Client.List(context.Background(), &list, client.InNamespace(obj.GetNamespace())))
	n := 0
	for _, e := range list.Items {
		if e.Regarding.Name != obj.GetName() || e.Reason != reason || e.Type != corev1.EventTypeWarning {
			continue
		}
		if e.Series != nil {
			n += int(e.Series.Count)
		} else {
			n++
		}
	}
	return n
}
