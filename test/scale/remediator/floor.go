package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/test/scale/scaleutil"
)

// floorInFlight is how many creates the floor keeps in flight: the policy
// reconciler's createParallelism (remediator/controller).
const floorInFlight = 64

// floor measures what the API server alone costs the burst: this program
// creates n NodeOperations at once, floorInFlight in flight as the policy
// reconciler creates them, preceded by one status patch of the policy as
// the reconciler writes it before it creates, and takes each operation's
// watch event minus the start. Nothing is decided: this is the floor
// under the remediator's latency beyond lastTransitionTime + for, on this
// machine and cluster. The operations name nodes that do not exist, so the
// remediator fails them without a pod; they are deleted afterwards.
func floor(ctx context.Context, env *localcluster.Cluster, n int, rep *report) error {
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		return err
	}
	watchCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := wc.Watch(watchCtx, &v1alpha1.NodeOperationList{}, client.MatchingLabels{"bench": "floor"})
	if err != nil {
		return fmt.Errorf("floor: watch operations: %w", err)
	}
	defer w.Stop()
	var mu sync.Mutex
	seen := map[string]time.Time{}
	all := make(chan struct{})
	go func() {
		for ev := range w.ResultChan() {
			at := time.Now()
			op, ok := ev.Object.(*v1alpha1.NodeOperation)
			if !ok || ev.Type != watch.Added {
				continue
			}
			mu.Lock()
			if _, dup := seen[op.Name]; !dup {
				seen[op.Name] = at
				if len(seen) == n {
					close(all)
				}
			}
			mu.Unlock()
		}
	}()
	// Let the watch start before the clock does.
	if err := scaleutil.Sleep(ctx, time.Second); err != nil {
		return err
	}

	pol := &v1alpha1.RemediationPolicy{}
	if err := wc.Get(ctx, client.ObjectKey{Name: policyName}, pol); err != nil {
		return fmt.Errorf("floor: get policy: %w", err)
	}
	start := time.Now()
	orig := pol.DeepCopy()
	pol.Status.MatchedNodes++ // the remediator's next pass puts it right
	if err := wc.Status().Patch(ctx, pol, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("floor: patch policy status: %w", err)
	}
	patched := time.Since(start)
	sem := make(chan struct{}, floorInFlight)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			op := &v1alpha1.NodeOperation{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("floor-%03d", i), Labels: map[string]string{"bench": "floor"}},
				Spec: v1alpha1.NodeOperationSpec{NodeName: fmt.Sprintf("floor-node-%03d", i),
					StepAction: v1alpha1.StepAction{Operation: templateName}},
			}
			errs[i] = wc.Create(ctx, op)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return fmt.Errorf("floor: create: %w", err)
		}
	}
	select {
	case <-all:
	case <-time.After(time.Minute):
		return fmt.Errorf("floor: not every operation's watch event came within a minute")
	case <-ctx.Done():
		return ctx.Err()
	}
	mu.Lock()
	took := make([]time.Duration, 0, n)
	for _, at := range seen {
		took = append(took, at.Sub(start))
	}
	mu.Unlock()
	slices.Sort(took)
	rep.add("floor", "this program, deciding nothing: one policy status patch (%s), then %d NodeOperation creates, %d in flight; watch event - start: p50 %s, p99 %s, max %s",
		ms(patched), n, floorInFlight, ms(scaleutil.Pct(took, 50)), ms(scaleutil.Pct(took, 99)), ms(took[n-1]))
	if err := wc.DeleteAllOf(ctx, &v1alpha1.NodeOperation{}, client.MatchingLabels{"bench": "floor"}); err != nil {
		return fmt.Errorf("floor: delete operations: %w", err)
	}
	return nil
}
