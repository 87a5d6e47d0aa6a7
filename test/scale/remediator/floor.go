package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/test/scale/scaleutil"
)

// floorInFlight is how many creates the floor keeps in flight: the policy
// reconciler's createParallelism (remediator/controller).
const floorInFlight = 64

// floorCondition is the condition the floor patches: one the policy does not
// match, so that the remediator decides nothing on it.
const floorCondition = "KubemedicBenchFloor"

// floor measures what the API server alone costs the burst, under the same
// load: at the start of a second t0 this program patches floorCondition
// onto n other nodes, as the burst patched the policy's condition, then at
// t0 + forDur (the lastTransitionTime + for the policy acts at) patches the
// policy's status as the reconciler writes it before it creates, and
// creates n NodeOperations, floorInFlight in flight as the policy
// reconciler does. It takes each operation's watch event minus t0 +
// forDur. Nothing is decided: this is the floor under the remediator's
// latency beyond lastTransitionTime + for on this machine and cluster,
// kwok's heartbeats and the burst's node events included. The operations
// name nodes that do not exist, so the remediator ends them Skipped
// without a pod; they are deleted afterwards, and the condition cleared.
func floor(ctx context.Context, env *localcluster.Cluster, cs kubernetes.Interface, names []string, n int, forDur time.Duration, rep *report) error {
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
	// Other nodes than the burst's: offset by half a stride.
	stride := len(names) / n
	nodes := make([]string, n)
	for i := range n {
		nodes[i] = names[(i*stride+stride/2)%len(names)]
	}
	t0 := time.Now().Add(500 * time.Millisecond).Truncate(time.Second).Add(time.Second)
	if err := scaleutil.Sleep(ctx, time.Until(t0)); err != nil {
		return err
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, node := range nodes {
		wg.Go(func() {
			now := metav1.Now()
			_, errs[i] = patchCondition(ctx, cs, node, corev1.NodeCondition{Type: floorCondition, Status: corev1.ConditionTrue,
				Reason: "Bench", Message: "the floor's burst", LastHeartbeatTime: now, LastTransitionTime: now})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("floor: %w", err)
	}
	due := t0.Add(forDur)
	if err := scaleutil.Sleep(ctx, time.Until(due)); err != nil {
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
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("floor: create: %w", err)
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
		took = append(took, at.Sub(due))
	}
	mu.Unlock()
	slices.Sort(took)
	rep.add("floor", "this program, deciding nothing, under the same burst: %s=True patched onto %d other nodes at %s, then at +%s one policy status patch (%s) and %d NodeOperation creates, %d in flight; watch event - (lastTransitionTime + for): p50 %s, p99 %s, max %s",
		floorCondition, n, t0.UTC().Format("15:04:05.000"), forDur, ms(patched), n, floorInFlight, ms(scaleutil.Pct(took, 50)), ms(scaleutil.Pct(took, 99)), ms(took[n-1]))
	if err := wc.DeleteAllOf(ctx, &v1alpha1.NodeOperation{}, client.MatchingLabels{"bench": "floor"}); err != nil {
		return fmt.Errorf("floor: delete operations: %w", err)
	}
	for _, node := range nodes {
		if err := env.ClearNodeCondition(ctx, node, floorCondition, "Bench", "cleared"); err != nil {
			return fmt.Errorf("floor: %w", err)
		}
	}
	return nil
}
