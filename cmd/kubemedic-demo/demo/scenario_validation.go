package demo

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-github/v60/github"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/internal/notify"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/plan"
)

// The stories of proof of health: a GPU that passes every passive check
// but fails DCGM (silent-gpu), a node that joins with the taint
// kubemedic.io/unvalidated (new-node), and a background test preempted by
// a real pod (background).

// silentPolicyName is the demo's policy of the silent-gpu story.
const silentPolicyName = "gpu-xid-reset-validated"

// validationComment starts the alertbridge's comment about a failed GPU
// test (alertbridge/render.ValidationComment).
const validationComment = "**GPU validation failed**"

// runSilentGPU: Xid 46 on GPU 0 of a device-plugin node whose GPU 0 fails
// DCGM's memory test on every run. The reset clears the Xid, yet the gate's
// test keeps the node cordoned; the ladder reboots, the test fails again,
// and the node is quarantined, with the failing test and GPU in the issue.
func runSilentGPU(ctx context.Context, s *Session) error {
	node, err := s.quietNode(ctx, true)
	if err != nil {
		return err
	}
	s.Node, s.Nodes = node, []string{node}
	if err := s.inject(ctx, "silent-gpu", node); err != nil {
		return err
	}
	var issue *github.Issue
	err = s.until(ctx, "the node to be quarantined, and its issue to show each failed GPU test", func(ctx context.Context) (bool, error) {
		n, err := s.node(ctx, node)
		if err != nil || !plan.Quarantined(n) {
			if err == nil {
				if op, err := s.lastOp(ctx, node, silentPolicyName); err == nil && op == nil {
					return false, s.breakerHolds(ctx, silentPolicyName)
				}
			}
			return false, err
		}
		failed, err := s.failedTests(ctx, node, silentPolicyName)
		if err != nil || failed == 0 {
			return false, err
		}
		var comments int
		issue, comments, err = s.issueWithComment(ctx, node, validationComment)
		return comments >= failed, err
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(s.Out, `
Kept out of service by the active test: after the reset every passive check on %[1]s was clean
(GPUXidError cleared), but DCGM's memory test failed GPU %[2]d (%[3]s), so the node stayed cordoned;
the reboot's test failed again, and the node is quarantined. Issue #%[4]d (%[5]s) has one comment per
failed test, naming the test and the GPU. kubectl get node %[1]s -o jsonpath='{.status.conditions}'
shows GPUValidationFailed=True (DCGMDiagFailed); kubectl get nodeoperations shows ValidationFailed.
`, node, silentGPU, gpuUUID(node, silentGPU), issue.GetNumber(), s.Info.PageURL)
	return nil
}

// runNewNode: a node joins with the taint kubemedic.io/unvalidated; the
// demo's ValidationPolicy tests it with a pod bound to it, and the pass
// removes the taint.
func runNewNode(ctx context.Context, s *Session) error {
	node, err := s.newNodeName(ctx)
	if err != nil {
		return err
	}
	s.Node, s.Nodes = node, []string{node}
	if err := s.inject(ctx, "new-node", node); err != nil {
		return err
	}
	err = s.until(ctx, "the node's GPU test to pass and the taint to be removed", func(ctx context.Context) (bool, error) {
		n, err := s.node(ctx, node)
		if err != nil || plan.HasTaint(n, v1alpha1.TaintUnvalidated) {
			return false, err
		}
		var nv v1alpha1.NodeValidation
		if err := s.Kube.Get(ctx, client.ObjectKey{Name: node}, &nv); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return nv.Status.Last != nil && nv.Status.Last.Result == v1alpha1.ValidationPassed, nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(s.Out, "\nValidated and released: %s passed its GPU test (kubectl get nodevalidation %s) and serves; until then nothing could be scheduled on it.\n", node, node)
	return nil
}

// runBackground: a training job on a node ends, so its 8 GPUs are idle;
// the demo's ValidationPolicy tests the node in the background, through
// the scheduler at its negative priority class; a training job that needs
// the whole node arrives, and the scheduler preempts the test for it.
func runBackground(ctx context.Context, s *Session) error {
	node, err := s.quietNode(ctx, false)
	if err != nil {
		return err
	}
	s.Node, s.Nodes = node, []string{node}
	if err := s.scale(ctx, trainingName(node), 0); err != nil {
		return err
	}
	s.Timeline.line("inject", "deployment/"+workloadNS+"/"+trainingName(node), "the training job on "+node+" ends (scaled to 0): its 8 GPUs are idle")
	var test *corev1.Pod
	var started time.Time
	err = s.until(ctx, "a background GPU test to run on "+node, func(ctx context.Context) (bool, error) {
		if test == nil {
			p, err := s.backgroundTest(ctx, node)
			if err != nil || p == nil {
				return false, err
			}
			test, started = p, time.Now()
		}
		// Long enough to see it run; the test takes longer than this.
		return time.Since(started) >= 3*time.Second, nil
	})
	if err != nil {
		return err
	}
	job := wholeNodeJob(node)
	if err := s.Kube.Create(ctx, job); err != nil {
		return fmt.Errorf("create deployment %s/%s: %w", job.Namespace, job.Name, err)
	}
	s.Timeline.line("inject", "deployment/"+job.Namespace+"/"+job.Name, "a training job that needs all 8 GPUs of "+node+" (pinned there), at the default priority")
	err = s.until(ctx, "the training job to preempt the test and be bound", func(ctx context.Context) (bool, error) {
		// As the timeline saw it: the test preempted, the job bound after.
		bound := false
		for _, p := range s.Timeline.Preemptions() {
			bound = bound || p.Node == node && p.Test == test.Name && strings.HasPrefix(p.Pod, workloadNS+"/"+job.Name+"-")
		}
		if !bound {
			return false, nil
		}
		var nv v1alpha1.NodeValidation
		if err := s.Kube.Get(ctx, client.ObjectKey{Name: node}, &nv); err != nil {
			return false, fmt.Errorf("get nodevalidation %s: %w", node, err)
		}
		return nv.Status.Preemptions > 0 && nv.Status.Current == nil, nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(s.Out, "\nThe real pod won: the scheduler preempted background test %s on %s for %s, which runs there now. The test is no result; it is tried again later (kubectl get nodevalidation %s).\n",
		test.Name, node, job.Name, node)
	return nil
}

// quietNode picks the node a story acts on: a simulated node of the device
// plugin, with whole GPUs only (no MIG), serving, with no kubemedic
// condition True, no GPU test record that failed, and running exactly its
// own training pod. The last such node for silent-gpu (away from the
// nodes the other stories use first), the first for background (the
// ValidationPolicy tests never-tested nodes by name).
func (s *Session) quietNode(ctx context.Context, last bool) (string, error) {
	var pods corev1.PodList
	if err := s.Kube.List(ctx, &pods, client.InNamespace(workloadNS)); err != nil {
		return "", fmt.Errorf("list pods in %s: %w", workloadNS, err)
	}
	onNode := map[string][]string{}
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
			onNode[p.Spec.NodeName] = append(onNode[p.Spec.NodeName], p.Labels[localcluster.LabelAppName])
		}
	}
	nodes := append([]string(nil), s.Info.SimulatedNodes...)
	sort.Strings(nodes)
	if last {
		for i, j := 0, len(nodes)-1; i < j; i, j = i+1, j-1 {
			nodes[i], nodes[j] = nodes[j], nodes[i]
		}
	}
	for _, name := range nodes {
		n, err := s.node(ctx, name)
		if err != nil {
			return "", err
		}
		if n.Labels[labelDevicePlugin] != "true" || n.Labels[localcluster.LabelMIGStrategy] != "" || n.Labels[LabelFault] != "" ||
			n.Spec.Unschedulable || len(n.Spec.Taints) > 0 || unhealthy(n) {
			continue
		}
		if apps := onNode[name]; len(apps) == 1 && apps[0] == trainingName(name) {
			return name, nil
		}
	}
	return "", fmt.Errorf("no simulated node of the device plugin is quiet (serving, healthy, whole GPUs, running only its own training job): the other stories used them; start a new demo")
}

// unhealthy reports whether a kubemedic condition of the node is True.
func unhealthy(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		_, ours := v1alpha1.ConditionReasons[string(c.Type)]
		if (ours || string(c.Type) == v1alpha1.ConditionGPUValidationFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// nodeNumber is the number at the end of a node's name.
var nodeNumber = regexp.MustCompile(`^gpu-node-([0-9]{3})$`)

// newNodeName is the next gpu-node-NNN no node has.
func (s *Session) newNodeName(ctx context.Context) (string, error) {
	var nodes corev1.NodeList
	if err := s.Kube.List(ctx, &nodes); err != nil {
		return "", fmt.Errorf("list nodes: %w", err)
	}
	next := 0
	for _, n := range nodes.Items {
		if m := nodeNumber.FindStringSubmatch(n.Name); m != nil {
			if i, err := strconv.Atoi(m[1]); err == nil && i >= next {
				next = i + 1
			}
		}
	}
	return localcluster.NodeSpec{}.NodeName(next), nil
}

// scale sets the replicas of a Deployment in the workload namespace.
func (s *Session) scale(ctx context.Context, name string, replicas int32) error {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: workloadNS, Name: name}}
	patch := client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)))
	if err := s.Kube.Patch(ctx, d, patch); err != nil {
		return fmt.Errorf("scale deployment %s/%s to %d: %w", workloadNS, name, replicas, err)
	}
	return nil
}

// backgroundTest is a background test pod Running on node, or nil.
func (s *Session) backgroundTest(ctx context.Context, node string) (*corev1.Pod, error) {
	var pods corev1.PodList
	if err := s.Kube.List(ctx, &pods, client.InNamespace(Namespace), client.HasLabels{v1alpha1.LabelValidationPolicy}); err != nil {
		return nil, fmt.Errorf("list test pods: %w", err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if isBackgroundTest(p) && p.Spec.NodeName == node && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			return p, nil
		}
	}
	return nil, nil
}

// failedTests counts this story's operations of policy on node whose GPU
// test failed.
func (s *Session) failedTests(ctx context.Context, node, policy string) (int, error) {
	var ops v1alpha1.NodeOperationList
	if err := s.Kube.List(ctx, &ops); err != nil {
		return 0, fmt.Errorf("list nodeoperations: %w", err)
	}
	n := 0
	for _, op := range ops.Items {
		if op.Spec.NodeName == node && op.Spec.Policy == policy && !op.CreationTimestamp.Time.Before(s.start) &&
			op.Status.Validation != nil && op.Status.Validation.Result == v1alpha1.ValidationFailed {
			n++
		}
	}
	return n, nil
}

// issueWithComment is the open issue naming node with the most comments
// that contain text, and how many, or nil.
func (s *Session) issueWithComment(ctx context.Context, node, text string) (*github.Issue, int, error) {
	issues, err := s.Issues(ctx, node)
	if err != nil {
		return nil, 0, err
	}
	owner, name, _ := strings.Cut(s.Info.GitHubRepo, "/")
	var best *github.Issue
	most := 0
	for _, is := range issues {
		if is.GetState() != "open" || is.GetComments() == 0 {
			continue
		}
		comments, _, err := s.Timeline.GitHub.Issues.ListComments(ctx, owner, name, is.GetNumber(), &github.IssueListCommentsOptions{ListOptions: github.ListOptions{PerPage: 100}})
		if err != nil {
			return nil, 0, fmt.Errorf("list comments of issue #%d: %w", is.GetNumber(), err)
		}
		n := 0
		for _, c := range comments {
			if strings.Contains(c.GetBody(), text) {
				n++
			}
		}
		if n > most {
			best, most = is, n
		}
	}
	return best, most, nil
}

// wholeNodeJob is a training Deployment that needs all 8 GPUs of node,
// pinned there, at the default priority: on a busy cluster only the
// background test's GPUs can take it, by preemption.
func wholeNodeJob(node string) *appsv1.Deployment {
	name := "train-whole-" + node
	labels := map[string]string{localcluster.LabelAppName: name, "app": "train"}
	gpus := resource.MustParse("8")
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: workloadNS, Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{localcluster.LabelAppName: name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels,
					Annotations: map[string]string{notify.AnnotationOwner: researchers[2].Email, annotationGPUUtil: strconv.Itoa(trainingUtil)}},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{corev1.LabelHostname: node},
					Tolerations:  []corev1.Toleration{{Key: string(gpuResource), Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
					Containers: []corev1.Container{{Name: "main", Image: "nvcr.io/nvidia/pytorch:25.01-py3",
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{gpuResource: gpus, corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("512Gi")},
							Limits:   corev1.ResourceList{gpuResource: gpus}}}},
				},
			},
		},
	}
}
