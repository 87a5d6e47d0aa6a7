package evidence

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1beta2 "k8s.io/api/resource/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubemedic/kubemedic/remediator/devicetaint"
	"github.com/kubemedic/kubemedic/remediator/diagnostics"
	diagstore "github.com/kubemedic/kubemedic/remediator/diagnostics/store"
	"github.com/kubemedic/kubemedic/remediator/plan"
)

// RetentionSweep is how often the store is swept of bundles past their
// retention.
const RetentionSweep = time.Hour

// sweepLoop deletes bundles older than the retention, every RetentionSweep
// from a minute after the start, on the leader only (a manager runnable
// that does not say otherwise runs on the leader).
func (k *Keeper) sweepLoop(ctx context.Context) error {
	wait, every := time.Minute, RetentionSweep
	if d := k.Options; d != nil && d.SweepEvery > 0 {
		wait, every = d.SweepEvery, d.SweepEvery
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		wait = every
		if err := k.sweep(ctx); err != nil && ctx.Err() == nil {
			log.FromContext(ctx).Error(err, "Sweeping the diagnostics store failed; trying again later")
		}
	}
}

// sweep deletes the bundles older than the retention, but for those of
// nodes still quarantined: the evidence of an RMA in progress.
func (k *Keeper) sweep(ctx context.Context) error {
	if !k.storeConfigured() {
		return nil
	}
	retention := k.Options.Retention
	if retention <= 0 {
		retention = diagnostics.DefaultRetention
	}
	store, err := k.store(ctx)
	if err != nil {
		return err
	}
	objs, err := store.List(ctx, "")
	if err != nil {
		return err
	}
	// Read, never changed: no deep copy of every node (about 75 MB at
	// 10,000 nodes).
	var nodes corev1.NodeList
	if err := k.Client.List(ctx, &nodes, client.UnsafeDisableDeepCopy); err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	quarantined := map[string]bool{}
	for i := range nodes.Items {
		if plan.Quarantined(&nodes.Items[i]) {
			quarantined[nodes.Items[i].Name] = true
		}
	}
	excluded, err := k.excludedForGood(ctx)
	if err != nil {
		return err
	}
	// The GPU is in the object's metadata, which a listing does not
	// carry: read only for the expired bundles, and kept when it cannot
	// be read (no evidence is no reason to delete evidence).
	keep := func(o diagnostics.Object) bool {
		if quarantined[diagnostics.NodeOf(o.Key)] {
			return true
		}
		if len(excluded) == 0 {
			return false
		}
		full, err := store.Stat(ctx, o.Key)
		if err != nil {
			return !errors.Is(err, diagstore.ErrNotFound)
		}
		return full.GPU != "" && excluded[devicetaint.CanonicalUUID(full.GPU)]
	}
	var errs []error
	for _, key := range diagnostics.Expired(objs, k.Clock.Now(), retention, keep) {
		if err := store.Delete(ctx, key); err != nil {
			errs = append(errs, err)
			continue
		}
		log.FromContext(ctx).Info("Deleted a diagnostics bundle past its retention", "key", key, "retention", retention)
	}
	return errors.Join(errs...)
}

// excludedForGood are the GPUs (canonical UUIDs) a permanent
// DeviceTaintRule excludes (the per-GPU cap's): quarantined, one GPU at a
// time. Empty where the API server serves no DeviceTaintRule.
func (k *Keeper) excludedForGood(ctx context.Context) (map[string]bool, error) {
	out := map[string]bool{}
	if !k.DRA {
		return out, nil
	}
	var rules resourcev1beta2.DeviceTaintRuleList
	if err := k.Reader.List(ctx, &rules, client.MatchingLabels{devicetaint.LabelManagedBy: devicetaint.ManagedBy}); err != nil {
		return nil, fmt.Errorf("list DeviceTaintRules: %w", err)
	}
	for _, rule := range rules.Items {
		if rule.Annotations[devicetaint.AnnotationPermanent] != "" {
			if uuid := rule.Labels[devicetaint.LabelGPUUUID]; uuid != "" {
				out[uuid] = true
			}
		}
	}
	return out, nil
}
