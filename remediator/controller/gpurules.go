package controller

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	resourcev1beta2 "k8s.io/api/resource/v1beta2"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubemedic/kubemedic/internal/ctrlmgr"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/devicetaint"
)

// RuleCheckPeriod is how often the remediator checks that each of its
// DeviceTaintRules still selects the GPU it excludes. A reboot that
// numbers the devices again takes minutes; until the check, the rule may
// select another device of the node.
const RuleCheckPeriod = time.Minute

// ruleCheckError is the checks metric's verdict for a check that could not
// be made, or whose write failed.
const ruleCheckError = "Error"

// ruleKeeperName names the rule check in kubemedic_remediation_conflicts_total.
const ruleKeeperName = "gpu-rules"

// ruleKeeper keeps kubemedic's DeviceTaintRules on their GPUs. A rule
// selects a device by driver, pool and name, and a DRA driver may give that
// name to another GPU after a reboot, or to a new card in the slot; a rule
// made at the per-GPU cap stays for good, so it would exclude a healthy GPU
// and leave the faulty one schedulable. Every RuleCheckPeriod the keeper
// reads each rule's node and that node's ResourceSlices from the API
// server and applies devicetaint.Check: it moves a rule to the GPU's new
// device, deletes one whose device is another GPU now or whose node has
// been gone for devicetaint.NodeGoneGrace (recording on the rule when it
// was first seen gone), and leaves one alone on missing evidence. Each
// change is an Event on the node and a log line; each verdict is counted.
type ruleKeeper struct {
	Client   client.Client
	Reader   client.Reader
	Recorder events.EventRecorder
	Metrics  *Metrics
	Clock    clock.PassiveClock
}

// Start checks the rules every RuleCheckPeriod until ctx ends. It runs on
// the leader only (a manager.Runnable without NeedLeaderElection).
func (k *ruleKeeper) Start(ctx context.Context) error {
	k.Metrics.conflicts.WithLabelValues(ruleKeeperName)
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := k.checkAll(ctx); err != nil && ctx.Err() == nil {
			log.FromContext(ctx).Error(err, "Checking the GPU DeviceTaintRules")
		}
	}, RuleCheckPeriod)
	return nil
}

// checkAll checks every kubemedic rule once: one LIST of the rules, and
// per node with rules a node GET and a LIST of its ResourceSlices.
func (k *ruleKeeper) checkAll(ctx context.Context) error {
	var rules resourcev1beta2.DeviceTaintRuleList
	if err := k.Reader.List(ctx, &rules, client.MatchingLabels{devicetaint.LabelManagedBy: devicetaint.ManagedBy}); err != nil {
		return fmt.Errorf("list kubemedic's DeviceTaintRules: %w", err)
	}
	byNode := map[string][]*resourcev1beta2.DeviceTaintRule{}
	for i := range rules.Items {
		n, _ := devicetaint.NodeOf(&rules.Items[i])
		byNode[n] = append(byNode[n], &rules.Items[i])
	}
	nodes := make([]string, 0, len(byNode))
	for n := range byNode {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	var failed int
	for _, name := range nodes {
		if err := k.checkNode(ctx, name, byNode[name]); err != nil {
			if ctx.Err() != nil {
				return nil // stopping
			}
			failed++
			log.FromContext(ctx).Error(err, "Checking the GPU DeviceTaintRules of a node", "node", name)
		}
	}
	if failed > 0 {
		return fmt.Errorf("the rules of %d of %d nodes could not be checked", failed, len(nodes))
	}
	return nil
}

func (k *ruleKeeper) checkNode(ctx context.Context, name string, rules []*resourcev1beta2.DeviceTaintRule) error {
	node := &corev1.Node{}
	gone := false
	if err := k.Reader.Get(ctx, client.ObjectKey{Name: name}, node); apierrors.IsNotFound(err) {
		gone, node = true, nil
	} else if err != nil {
		k.Metrics.ruleChecks.WithLabelValues(ruleCheckError).Add(float64(len(rules)))
		return fmt.Errorf("get node %s: %w", name, err)
	}
	var slices resourcev1.ResourceSliceList
	if !gone {
		if err := k.Reader.List(ctx, &slices, client.MatchingFields{"spec.nodeName": name}); err != nil {
			k.Metrics.ruleChecks.WithLabelValues(ruleCheckError).Add(float64(len(rules)))
			return fmt.Errorf("list ResourceSlices of node %s: %w", name, err)
		}
	}
	var errs []error
	now := k.Clock.Now()
	for _, rule := range rules {
		c := devicetaint.Check(rule, slices.Items, gone, now)
		err := k.act(ctx, node, rule, c, now)
		if ctrlmgr.OnlyConflicts(err) {
			// The rule changed since it was read (an operation excluded
			// its GPU again): checked again at the next period.
			k.Metrics.conflicts.WithLabelValues(ruleKeeperName).Inc()
			log.FromContext(ctx).V(1).Info("Optimistic-concurrency conflict on a GPU's DeviceTaintRule; checked again later", "deviceTaintRule", rule.Name, "node", name, "error", err.Error())
			continue
		}
		if err != nil {
			k.Metrics.ruleChecks.WithLabelValues(ruleCheckError).Inc()
			errs = append(errs, err)
			continue
		}
		k.Metrics.ruleChecks.WithLabelValues(c.Verdict.String()).Inc()
	}
	if len(errs) > 0 {
		return fmt.Errorf("node %s: %d of %d rules: first error: %w", name, len(errs), len(rules), errs[0])
	}
	return nil
}

// act carries out one verdict. Writes are conditional on the rule's
// resourceVersion, so a rule changed meanwhile (a new exclusion by an
// operation) is checked again next time rather than overwritten.
func (k *ruleKeeper) act(ctx context.Context, node *corev1.Node, rule *resourcev1beta2.DeviceTaintRule, c devicetaint.Checked, now time.Time) error {
	name, _ := devicetaint.NodeOf(rule)
	logger := log.FromContext(ctx).WithValues("deviceTaintRule", rule.Name, "node", name, "gpu", rule.Labels[devicetaint.LabelGPUUUID])
	updated := rule.DeepCopy()
	if c.Verdict == devicetaint.Move {
		updated = devicetaint.Moved(rule, c.To)
	}
	switch {
	case c.MarkGone:
		metav1.SetMetaDataAnnotation(&updated.ObjectMeta, devicetaint.AnnotationNodeGoneSince, now.UTC().Format(time.RFC3339))
		logger.Info("A GPU's DeviceTaintRule outlives its node for a while", "why", c.Why)
	case c.ClearGone:
		delete(updated.Annotations, devicetaint.AnnotationNodeGoneSince)
	}
	if c.Verdict != devicetaint.Release && !equality.Semantic.DeepEqual(updated, rule) {
		if err := k.Client.Update(ctx, updated); err != nil {
			return fmt.Errorf("update DeviceTaintRule %s (%s): %w", rule.Name, c.Why, err)
		}
	}
	switch c.Verdict {
	case devicetaint.Move:
		logger.Info("Moved a GPU's DeviceTaintRule to the GPU's new device", "why", c.Why)
		k.event(node, rule, corev1.EventTypeNormal, v1alpha1.EventGPUExclusionMoved,
			fmt.Sprintf("DeviceTaintRule %s follows its GPU: %s", rule.Name, c.Why))
	case devicetaint.Release:
		rv := rule.ResourceVersion
		if err := k.Client.Delete(ctx, rule, client.Preconditions{ResourceVersion: &rv}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete DeviceTaintRule %s: %w", rule.Name, err)
		}
		note := fmt.Sprintf("deleted DeviceTaintRule %s: %s. The GPU's faults stay in the node's kubemedic.io/gpu-history; if it is back and fails again, the per-GPU cap excludes it again", rule.Name, c.Why)
		logger.Info("Released a GPU's DeviceTaintRule", "why", c.Why, "permanent", rule.Annotations[devicetaint.AnnotationPermanent] != "")
		k.event(node, rule, corev1.EventTypeWarning, v1alpha1.EventGPUExclusionReleased, note)
	case devicetaint.Unknown:
		logger.V(1).Info("Leaving a GPU's DeviceTaintRule as it is", "why", c.Why)
	}
	return nil
}

// event tells it on the node, when there is one.
func (k *ruleKeeper) event(node *corev1.Node, rule *resourcev1beta2.DeviceTaintRule, typ, reason, note string) {
	if node == nil || k.Recorder == nil {
		return
	}
	k.Recorder.Eventf(node, rule, typ, reason, "CheckGPUExclusion", "%s", note)
}
