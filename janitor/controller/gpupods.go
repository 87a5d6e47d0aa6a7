package controller

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
)

// gpuPods keeps pointers to the GPU pods in the janitor's cache, fed by
// the pod informer, so that a cycle reads 50,000 pods without copying them
// (a List copies each pod's 1.2 KB struct even without a deep copy). The
// pods are the cache's own objects: nothing may change them.
type gpuPods struct {
	// mu guards pods.
	mu   sync.RWMutex
	pods map[types.UID]*corev1.Pod
}

func newGPUPods() *gpuPods { return &gpuPods{pods: map[types.UID]*corev1.Pod{}} }

// handler is the informer's event handler.
func (g *gpuPods) handler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { g.set(obj) },
		UpdateFunc: func(_, obj any) { g.set(obj) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				g.mu.Lock()
				delete(g.pods, p.UID)
				g.mu.Unlock()
			}
		},
	}
}

func (g *gpuPods) set(obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	w, m := GPURequests(p)
	g.mu.Lock()
	defer g.mu.Unlock()
	if w+m == 0 {
		delete(g.pods, p.UID)
		return
	}
	g.pods[p.UID] = p
}

// list returns the GPU pods; the slice is the caller's, the pods are not.
func (g *gpuPods) list() []*corev1.Pod {
	g.mu.RLock()
	defer g.mu.RUnlock()
	out := make([]*corev1.Pod, 0, len(g.pods))
	for _, p := range g.pods {
		out = append(out, p)
	}
	return out
}
