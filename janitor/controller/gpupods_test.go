package controller

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
)

func TestGPUPods(t *testing.T) {
	g := newGPUPods()
	h := g.handler()
	gpu := func(uid string, n int) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: uid, UID: types.UID("u-" + uid)}}
		if n > 0 {
			p.Spec.Containers = []corev1.Container{{Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(int64(n), resource.DecimalSI)}}}}
		}
		return p
	}
	a, b, c := gpu("a", 1), gpu("b", 2), gpu("c", 0)
	h.OnAdd(a, true)
	h.OnAdd(b, true)
	h.OnAdd(c, true)
	require.ElementsMatch(t, []*corev1.Pod{a, b}, g.list(), "pods without GPUs are not kept")
	b2 := gpu("b", 0)
	h.OnUpdate(b, b2)
	require.ElementsMatch(t, []*corev1.Pod{a}, g.list(), "a pod that no longer requests GPUs is dropped")
	a2 := gpu("a", 4)
	h.OnUpdate(a, a2)
	require.Same(t, a2, g.list()[0], "the newest object is kept")
	h.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "a", Obj: a2})
	require.Empty(t, g.list(), "a tombstone deletes")
}
