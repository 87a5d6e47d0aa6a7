package demo

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	resourcev1beta2 "k8s.io/api/resource/v1beta2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/devicetaint"
)

// draPolicyName is the policy of gpu-xid-dra.yaml.
const draPolicyName = "gpu-xid-reset-dra"

// ExclusionOutcome is what the exclusion story saw, for the caller's
// checks.
type ExclusionOutcome struct {
	// Operation excluded the GPU UUID, the DRA device Device
	// (driver/pool/device), by the DeviceTaintRule Rule.
	Operation, Rule, Device, UUID string
	// Restarted is the pod whose worker the Xid killed on that GPU, which
	// the story deleted; Pending is the pod its ReplicaSet made instead,
	// which the scheduler could not place, for Reason.
	Restarted, Pending, Reason string
	// Running is how many pods of the Deployment ran on the node, each on
	// another GPU, while Pending waited.
	Running int
	// Scheduled is the device Pending's claim got after the repair.
	Scheduled string
}

// claimPod is a pod of the DRA node's Deployment and the devices its
// claims were allocated.
type claimPod struct {
	pod     corev1.Pod
	devices []string // device names, e.g. gpu-3
}

// runExclusion: a fatal Xid on GPU 0 of the DRA node. gpu-xid-reset-dra's
// reset excludes that GPU by DeviceTaintRule and leaves the node
// schedulable. The Xid killed the worker on GPU 0, whose pod is restarted
// (deleted, as a training operator replaces a failed worker): its
// replacement cannot get the tainted GPU and the other 7 are taken, so it
// waits, Pending, with the scheduler's reason, while the 7 others keep
// running. The reset is verified, the rule removed, and the waiting pod
// gets the repaired GPU. The node is never cordoned.
func runExclusion(ctx context.Context, s *Session) error {
	if len(s.Info.DRANodes) == 0 {
		return fmt.Errorf("exclusion needs a node whose GPUs DRA allocates, the demo has none (Options.DRANodes)")
	}
	node := s.Info.DRANodes[0]
	s.Node, s.Nodes = node, []string{node}
	deploy := inferenceName(node)
	const gpu = 0
	device := fmt.Sprintf("gpu-%d", gpu)
	out := &ExclusionOutcome{UUID: gpuUUID(node, gpu), Device: localcluster.NVIDIADRADriver + "/" + node + "/" + device,
		Rule: devicetaint.RuleName(node, gpuUUID(node, gpu))}
	s.Exclusion = out

	pods, err := s.claimPods(ctx, deploy)
	if err != nil {
		return err
	}
	var victim *corev1.Pod
	running := 0
	for i := range pods {
		if pods[i].pod.Status.Phase == corev1.PodRunning && pods[i].pod.Spec.NodeName == node {
			running++
		}
		if len(pods[i].devices) == 1 && pods[i].devices[0] == device {
			victim = &pods[i].pod
		}
	}
	if running != 8 || victim == nil {
		return fmt.Errorf("deployment %s/%s should run 8 pods on %s, one on each GPU, to begin with: %d run, and %s is held: %t (run the story on a fresh demo)",
			workloadNS, deploy, node, running, device, victim != nil)
	}
	if err := s.inject(ctx, "xid", node); err != nil {
		return err
	}

	err = s.until(ctx, "kubemedic to exclude GPU "+device+" by DeviceTaintRule", func(ctx context.Context) (bool, error) {
		if err := s.notCordoned(ctx, node); err != nil {
			return false, err
		}
		op, err := s.lastOp(ctx, node, draPolicyName)
		if err != nil {
			return false, err
		}
		if op == nil {
			return false, s.breakerHolds(ctx, draPolicyName)
		}
		out.Operation = op.Name
		if ex := op.Status.Exclusion; ex != nil && ex.Method != v1alpha1.ExclusionDeviceTaintRule {
			return false, fmt.Errorf("nodeoperation/%s kept new pods away by %s, not by a DeviceTaintRule: %s", op.Name, ex.Method, ex.Message)
		}
		if op.Status.Phase == v1alpha1.PhaseFailed || op.Status.Phase == v1alpha1.PhaseSucceeded {
			return false, fmt.Errorf("nodeoperation/%s ended %s before the story saw its DeviceTaintRule: %s", op.Name, op.Status.Phase, op.Status.Message)
		}
		return s.ruleExists(ctx, out.Rule)
	})
	if err != nil {
		return err
	}

	s.Timeline.line("inject", "pod/"+workloadNS+"/"+victim.Name, "the Xid killed its worker on "+device+": the pod is restarted (deleted, as a training operator replaces a failed worker), and its ReplicaSet makes a new one")
	if err := s.Kube.Delete(ctx, victim); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete pod %s/%s: %w", victim.Namespace, victim.Name, err)
	}
	out.Restarted = victim.Name

	err = s.until(ctx, "7 pods to run on the other GPUs and the new one to wait", func(ctx context.Context) (bool, error) {
		if err := s.notCordoned(ctx, node); err != nil {
			return false, err
		}
		if ok, err := s.ruleExists(ctx, out.Rule); err != nil || !ok {
			return false, errorOr(err, fmt.Errorf("DeviceTaintRule %s was removed before the story saw the restarted pod wait: the repair outran the scheduler", out.Rule))
		}
		pods, err := s.claimPods(ctx, deploy)
		if err != nil {
			return false, err
		}
		running, pending, reason := 0, "", ""
		for _, p := range pods {
			if p.pod.Name == victim.Name {
				continue
			}
			for _, d := range p.devices {
				if d == device {
					return false, fmt.Errorf("pod %s got %s while DeviceTaintRule %s excluded it", p.pod.Name, device, out.Rule)
				}
			}
			switch {
			case p.pod.Status.Phase == corev1.PodRunning && p.pod.Spec.NodeName == node:
				running++
			case p.pod.Spec.NodeName == "" && unschedulableMessage(&p.pod) != "":
				pending, reason = p.pod.Name, schedulerReason(unschedulableMessage(&p.pod))
			}
		}
		if running != 7 || pending == "" {
			return false, nil
		}
		out.Running, out.Pending, out.Reason = running, pending, reason
		return true, nil
	})
	if err != nil {
		return err
	}
	s.Timeline.line("serving", "deployment/"+workloadNS+"/"+deploy, fmt.Sprintf("%d of 8 pods run on %s's other GPUs; %s waits: %s", out.Running, node, out.Pending, out.Reason))

	err = s.until(ctx, "the repair to be verified, the rule removed and the waiting pod placed on the repaired GPU", func(ctx context.Context) (bool, error) {
		if err := s.notCordoned(ctx, node); err != nil {
			return false, err
		}
		op, err := s.lastOp(ctx, node, draPolicyName)
		if err != nil {
			return false, err
		}
		switch {
		case op == nil:
			return false, fmt.Errorf("nodeoperation/%s is gone", out.Operation)
		case op.Status.Phase == v1alpha1.PhaseFailed:
			return false, fmt.Errorf("nodeoperation/%s failed: %s", op.Name, op.Status.Message)
		case op.Status.Phase != v1alpha1.PhaseSucceeded:
			return false, nil
		}
		if ok, err := s.ruleExists(ctx, out.Rule); err != nil || ok {
			return false, err
		}
		pods, err := s.claimPods(ctx, deploy)
		if err != nil {
			return false, err
		}
		for _, p := range pods {
			if p.pod.Name != out.Pending {
				continue
			}
			if p.pod.Status.Phase != corev1.PodRunning || p.pod.Spec.NodeName != node {
				return false, nil
			}
			if len(p.devices) != 1 || p.devices[0] != device {
				return false, fmt.Errorf("pod %s was given %v after the repair, want the repaired %s", p.pod.Name, p.devices, device)
			}
			out.Scheduled = p.devices[0]
			return true, nil
		}
		return false, fmt.Errorf("pod %s is gone", out.Pending)
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(s.Out, "\nOne GPU out, not the node: %s stayed schedulable; %d pods kept running while %s was excluded; after the verified reset the rule was removed and %s got %s. "+
		"Read it back: kubectl get nodeoperation %s -o jsonpath='{.status.exclusion}'; kubectl get resourceclaims -n %s\n",
		node, out.Running, device, out.Pending, out.Scheduled, out.Operation, workloadNS)
	return nil
}

// errorOr is err, or other when err is nil.
func errorOr(err, other error) error {
	if err != nil {
		return err
	}
	return other
}

// notCordoned returns an error when node is cordoned: the story is about
// a node that stays schedulable.
func (s *Session) notCordoned(ctx context.Context, node string) error {
	n, err := s.node(ctx, node)
	if err != nil {
		return err
	}
	if n.Spec.Unschedulable {
		return fmt.Errorf("node %s was cordoned: kubemedic should have excluded the one GPU instead", node)
	}
	return nil
}

// ruleExists reports whether the DeviceTaintRule name exists.
func (s *Session) ruleExists(ctx context.Context, name string) (bool, error) {
	err := s.Kube.Get(ctx, client.ObjectKey{Name: name}, &resourcev1beta2.DeviceTaintRule{})
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		return false, nil
	}
	return false, fmt.Errorf("get devicetaintrule %s: %w", name, err)
}

// claimPods lists the live pods of Deployment name in the workload
// namespace with the devices of their claims.
func (s *Session) claimPods(ctx context.Context, name string) ([]claimPod, error) {
	var pods corev1.PodList
	if err := s.Kube.List(ctx, &pods, client.InNamespace(workloadNS), client.MatchingLabels{localcluster.LabelAppName: name}); err != nil {
		return nil, fmt.Errorf("list the pods of %s/%s: %w", workloadNS, name, err)
	}
	var claims resourcev1.ResourceClaimList
	if err := s.Kube.List(ctx, &claims, client.InNamespace(workloadNS)); err != nil {
		return nil, fmt.Errorf("list resourceclaims in %s: %w", workloadNS, err)
	}
	byName := map[string]*resourcev1.ResourceClaim{}
	for i := range claims.Items {
		byName[claims.Items[i].Name] = &claims.Items[i]
	}
	var out []claimPod
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		cp := claimPod{pod: p}
		for _, st := range p.Status.ResourceClaimStatuses {
			c := byName[ptr.Deref(st.ResourceClaimName, "")]
			if c == nil || c.Status.Allocation == nil {
				continue
			}
			for _, r := range c.Status.Allocation.Devices.Results {
				cp.devices = append(cp.devices, r.Device)
			}
		}
		out = append(out, cp)
	}
	return out, nil
}
