package demo

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-github/v60/github"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/plan"
)

// Injector puts faults into a demo: the World itself, or a Client of a
// demo in another process.
type Injector interface {
	Inject(ctx context.Context, fault, node string) (string, error)
	IdleNotebooks(ctx context.Context) ([]Notebook, error)
	// Press presses a button of a janitor message in the Slack stand-in
	// (Info.SlackButtons).
	Press(ctx context.Context, req PressRequest) (Pressed, error)
}

// Scenario is a story the demo can tell.
type Scenario struct {
	Name string
	Help string
	// Timeout bounds the scenario at the demo's default speed.
	Timeout time.Duration
	run     func(ctx context.Context, s *Session) error
}

// Scenarios lists the stories, in the order of `kubemedic-demo scenario`.
var Scenarios = []Scenario{
	{"xid", "fatal Xid → drain → GPU reset → verified → uncordoned; the evicted pod's owner hears on Slack; the node's issue is filed and closed", 2 * time.Minute, runXid},
	{"driver-reset", "a GSP fault with every ECC counter 0: the driver asks for a GPU reset → one ladder (gpu-recovery-reset, not also gpu-xid-reset) → drain → reset → verified once the driver reads None → uncordoned", 2 * time.Minute, runDriverReset},
	{"escalate", "a broken GPU: the reset fails → reboot → the Xid returns → quarantine → an issue with the operation history for a person", 2 * time.Minute, runEscalate},
	{"nfs-storm", "60% of the nodes lose NFS at once → the breaker opens → no disruptive operation → one roll-up issue", 3 * time.Minute, runNFSStorm},
	{"idle", "two idle notebooks → a Slack DM each, with buttons → the owner presses Keep 4 h on one: kept → the other is stopped after the grace period and a waiting training job gets its GPU → the owner presses Restore: scaled back", 5 * time.Minute, runIdle},
	{"dstate", "a process of a deleted pod stuck in D state → drain → reboot by policy → healthy", 3 * time.Minute, runDState},
	{"exclusion", "a fatal Xid on GPU 0 of the DRA node → that GPU alone is excluded by DeviceTaintRule, the node stays schedulable → the restarted worker's pod waits (7 of 8 run; the scheduler says why) → reset → verified → rule removed → the pod gets the repaired GPU", 2 * time.Minute, runExclusion},
	{"silent-gpu", "an Xid that a reset clears, on a GPU that still fails DCGM's memory test → reset → every passive check clean, but the GPU test fails: still cordoned → reboot → the test fails again → quarantine → the issue names the failed test and GPU", 3 * time.Minute, runSilentGPU},
	{"new-node", "a node joins with the taint kubemedic.io/unvalidated → a GPU test bound to it → pass → the taint is removed and it serves", time.Minute, runNewNode},
	{"background", "a training job ends and its node's 8 GPUs are idle → a background GPU test runs there at a negative priority → a training job that needs the whole node arrives → the scheduler preempts the test and binds the job; the test is no result, tried again later", 3 * time.Minute, runBackground},
}

// FindScenario returns the scenario called name.
func FindScenario(name string) (Scenario, error) {
	var names []string
	for _, s := range Scenarios {
		if s.Name == name {
			return s, nil
		}
		names = append(names, s.Name)
	}
	return Scenario{}, fmt.Errorf("unknown scenario %q; known: %s", name, strings.Join(names, ", "))
}

// Session is one run of a scenario.
type Session struct {
	Info     Info
	Kube     client.Client
	Inject   Injector
	Timeline *Timeline
	Out      io.Writer
	// Node is the node the scenario acted on, for the caller's checks.
	Node string
	// Nodes are all the nodes it acted on.
	Nodes []string
	// Notebooks are the idle scenario's Deployments, namespace/name: the
	// first is stopped (and restored from Slack), the second kept.
	Notebooks []string
	// Exclusion is what the exclusion scenario saw.
	Exclusion *ExclusionOutcome

	// start is when Run began: operations and issues from before it belong
	// to an earlier story.
	start time.Time
}

// Run runs the scenario: it injects, then prints the timeline until the
// story has ended or ctx ends.
func (sc Scenario) Run(ctx context.Context, s *Session) error {
	// Whole seconds: the API server and GitHub keep creation times in
	// seconds, and an object made in this second belongs to this story.
	s.start = time.Now().Truncate(time.Second)
	if err := s.Timeline.Prime(ctx); err != nil {
		return err
	}
	fmt.Fprintf(s.Out, "Scenario %s: %s\n\n", sc.Name, sc.Help)
	return sc.run(ctx, s)
}

func (s *Session) inject(ctx context.Context, fault, node string) error {
	what, err := s.Inject.Inject(ctx, fault, node)
	if err != nil {
		return err
	}
	s.Timeline.line("inject", "node/"+node, fault+": "+what)
	return nil
}

// until runs the timeline until cond holds; cond's error ends it.
func (s *Session) until(ctx context.Context, what string, cond func(ctx context.Context) (bool, error)) error {
	var condErr error
	err := s.Timeline.Run(ctx, func() bool {
		ok, err := cond(ctx)
		if err != nil {
			condErr = err
			return true
		}
		return ok
	})
	if condErr != nil {
		return condErr
	}
	if err != nil {
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	return nil
}

func runXid(ctx context.Context, s *Session) error {
	s.Node = s.Info.NPDNodes[0]
	s.Nodes = []string{s.Node}
	if err := s.inject(ctx, "xid", s.Node); err != nil {
		return err
	}
	err := s.until(ctx, "the GPU reset to be verified, the node uncordoned and the issue closed", func(ctx context.Context) (bool, error) {
		op, err := s.lastOp(ctx, s.Node, "gpu-xid-reset")
		if err != nil {
			return false, err
		}
		if op == nil {
			return false, s.breakerHolds(ctx, "gpu-xid-reset")
		}
		if op.Status.Phase != v1alpha1.PhaseSucceeded {
			return false, nil
		}
		n, err := s.node(ctx, s.Node)
		if err != nil || n.Spec.Unschedulable {
			return false, err
		}
		return s.issuesClosed(ctx, s.Node, "KubemedicGPUXidError")
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(s.Out, "\nHealed. Read the audit trail: kubectl get nodeoperations; kubectl describe nodeoperation; kubectl get events --field-selector involvedObject.name=%s\n", s.Node)
	return nil
}

// runDriverReset: the driver's own recovery action asks for a reset on the
// last NPD node. The Xid 154 line sets GPUXidError too; gpu-recovery-reset
// ranks above gpu-xid-reset, so one ladder runs.
func runDriverReset(ctx context.Context, s *Session) error {
	if len(s.Info.NPDNodes) == 0 {
		return fmt.Errorf("driver-reset needs a node with NPD, the demo has none (--npd-nodes)")
	}
	s.Node = s.Info.NPDNodes[len(s.Info.NPDNodes)-1]
	s.Nodes = []string{s.Node}
	if err := s.inject(ctx, "driver-reset", s.Node); err != nil {
		return err
	}
	err := s.until(ctx, "the reset to be verified (the driver reads None) and the node uncordoned", func(ctx context.Context) (bool, error) {
		op, err := s.lastOp(ctx, s.Node, "gpu-recovery-reset")
		if err != nil {
			return false, err
		}
		if op == nil {
			return false, s.breakerHolds(ctx, "gpu-recovery-reset")
		}
		if op.Status.Phase != v1alpha1.PhaseSucceeded {
			return false, nil
		}
		n, err := s.node(ctx, s.Node)
		return err == nil && !n.Spec.Unschedulable, err
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(s.Out, "\nHealed on the driver's word: kubectl get nodeoperations; kubectl get node %s -o jsonpath='{.status.conditions}'\n", s.Node)
	return nil
}

func runEscalate(ctx context.Context, s *Session) error {
	if len(s.Info.NPDNodes) < 2 {
		return fmt.Errorf("escalate needs two nodes with NPD (the second one), the demo has %d (--npd-nodes)", len(s.Info.NPDNodes))
	}
	s.Node = s.Info.NPDNodes[1]
	s.Nodes = []string{s.Node}
	if err := s.inject(ctx, "broken-gpu", s.Node); err != nil {
		return err
	}
	err := s.until(ctx, "the node to be quarantined and its issue filed", func(ctx context.Context) (bool, error) {
		n, err := s.node(ctx, s.Node)
		if err != nil || !plan.Quarantined(n) {
			return false, err
		}
		is, err := s.openIssue(ctx, s.Node, "KubemedicNodeQuarantined")
		return is != nil, err
	})
	if err != nil {
		return err
	}
	is, _ := s.openIssue(ctx, s.Node, "KubemedicNodeQuarantined")
	fmt.Fprintf(s.Out, `
Handed to a person: node %[1]s is quarantined, and issue #%[2]d lists every attempt (%[3]s).
Closing the issue (its Close button on that page) does not release the node: kubemedic never
touches a quarantined node again.
Replace the GPU (in the demo: kubemedic-demo inject replace-gpu %[1]s), then take the documented
manual step (docs/runbooks.md, KubemedicNodeQuarantined):

    kubectl taint node %[1]s %[4]s-
    kubectl uncordon %[1]s
`, s.Node, is.GetNumber(), s.Info.PageURL, v1alpha1.TaintQuarantined)
	return nil
}

func runNFSStorm(ctx context.Context, s *Session) error {
	all := append(append([]string(nil), s.Info.NPDNodes...), s.Info.SimulatedNodes...)
	n := (len(all)*60 + 99) / 100
	s.Nodes = all[:n]
	s.Node = s.Nodes[0]
	for _, node := range s.Nodes {
		if err := s.inject(ctx, "nfs", node); err != nil {
			return err
		}
	}
	err := s.until(ctx, "the breaker of nfs-mounts to open and the roll-up issue", func(ctx context.Context) (bool, error) {
		var p v1alpha1.RemediationPolicy
		if err := s.Kube.Get(ctx, client.ObjectKey{Name: "nfs-mounts"}, &p); err != nil {
			return false, err
		}
		if !meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.PolicyBreakerOpen) {
			return false, nil
		}
		return s.hasRollup(ctx)
	})
	if err != nil {
		return err
	}
	var ops v1alpha1.NodeOperationList
	if err := s.Kube.List(ctx, &ops); err != nil {
		return err
	}
	disruptive := 0
	for _, op := range ops.Items {
		if op.Spec.Policy == "nfs-mounts" && !op.CreationTimestamp.Time.Before(s.start) {
			disruptive++
		}
	}
	fmt.Fprintf(s.Out, "\nThe breaker of nfs-mounts is open: %d of %d nodes lost NFS, which is an NFS server problem, not %d node problems. Operations started: %d. Restore the mounts (or the server) and the breaker closes after its cooldown.\n",
		n, len(all), n, disruptive)
	return nil
}

func runIdle(ctx context.Context, s *Session) error {
	nbs, err := s.Inject.IdleNotebooks(ctx)
	if err != nil {
		return err
	}
	if len(nbs) != 2 {
		return fmt.Errorf("the demo started %d notebooks, want 2", len(nbs))
	}
	idle, kept := nbs[0], nbs[1]
	s.Notebooks = []string{idle.Namespace + "/" + idle.Deployment, kept.Namespace + "/" + kept.Deployment}
	s.Timeline.line("inject", "pod/"+idle.Pod, "a Jupyter notebook whose GPU dcgm-exporter reports 0.5% busy, on "+idle.Node)
	s.Timeline.line("inject", "pod/"+kept.Pod, "another, on "+kept.Node)
	if idle.Waiting != "" {
		s.Timeline.line("inject", "deployment/"+idle.Waiting, "a training job on "+idle.Node+" that needs the notebook's GPU too")
	}
	// With the Slack stand-in the owner answers the janitor's messages
	// with their buttons; a real workspace's buttons are pressed by a
	// person there, so the story keeps the notebook with kubectl.
	buttons := s.Info.SlackButtons && kept.Owner != ""
	snoozed := false
	err = s.until(ctx, "the first notebook to be stopped", func(ctx context.Context) (bool, error) {
		if !snoozed {
			var p corev1.Pod
			if err := s.Kube.Get(ctx, client.ObjectKey{Namespace: kept.Namespace, Name: kept.Pod}, &p); err != nil {
				return false, fmt.Errorf("get pod %s/%s: %w", kept.Namespace, kept.Pod, err)
			}
			if p.Annotations[v1alpha1.AnnotationReclaimNotice] != "" {
				var err error
				if buttons {
					snoozed, err = s.pressKeep(ctx, kept)
				} else {
					err = s.snoozeWithKubectl(ctx, &p)
					snoozed = err == nil
				}
				if err != nil {
					return false, err
				}
			}
		}
		replicas, err := s.replicas(ctx, idle)
		return err == nil && replicas == 0, err
	})
	if err != nil {
		return err
	}
	if replicas, err := s.replicas(ctx, kept); err != nil || replicas == 0 {
		return fmt.Errorf("the kept notebook %s/%s was stopped too (replicas %d, %v)", kept.Namespace, kept.Deployment, replicas, err)
	}
	if idle.Waiting != "" {
		ns, name, _ := strings.Cut(idle.Waiting, "/")
		err := s.until(ctx, "the waiting training pod to get the notebook's GPU", func(ctx context.Context) (bool, error) {
			var pods corev1.PodList
			if err := s.Kube.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{localcluster.LabelAppName: name}); err != nil {
				return false, fmt.Errorf("list the pods of %s: %w", idle.Waiting, err)
			}
			for _, p := range pods.Items {
				if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && p.Spec.NodeName == idle.Node {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return err
		}
	}
	if !buttons {
		s.Timeline.line("restore", "deployment/"+idle.Namespace+"/"+idle.Deployment,
			"a real Slack workspace: its owner gets it back with Restore on the janitor's reply there, or kubectl scale deployment -n "+idle.Namespace+" "+idle.Deployment+" --replicas=<"+v1alpha1.AnnotationReclaimedReplicas+">")
		fmt.Fprintf(s.Out, "\nThe idle notebook was stopped (Deployment %s scaled to 0; the old count is in its %s annotation), and the training job waiting on %s got its GPU; the snoozed one keeps its GPU.\n",
			idle.Deployment, v1alpha1.AnnotationReclaimedReplicas, idle.Node)
		return nil
	}
	if err := s.pressRestore(ctx, idle); err != nil {
		return err
	}
	fmt.Fprintf(s.Out, "\nThe owner kept one notebook with \"Keep 4 h\" and got the other back with \"Restore\", both from the Slack message. The idle one had been stopped (Deployment %s scaled to 0) and its GPU went to the training job waiting on %s; restored, it asks for a GPU again and starts when one is free.\n",
		idle.Deployment, idle.Node)
	return nil
}

// show prints what changed now, such as the janitor's confirmation of a
// press in Slack, before the story's own line about it.
func (s *Session) show(ctx context.Context) {
	if err := s.Timeline.Poll(ctx); err != nil && ctx.Err() == nil {
		s.Timeline.line("error", "", err.Error())
	}
}

// keepButton is the notice's button the owner presses in the idle story.
const keepButton = "Keep 4 h"

// pressKeep presses "Keep 4 h" on the kept notebook's notice as its owner,
// and checks what the janitor recorded on the pod. It reports false, to
// be pressed again, when the janitor answered that the pod changed while
// it was pressed.
func (s *Session) pressKeep(ctx context.Context, nb Notebook) (bool, error) {
	s.Timeline.line("press", "pod/"+nb.Pod, fmt.Sprintf("%s presses %q on the notice in Slack (the stand-in signs it as Slack does)", nb.Owner, keepButton))
	p, err := s.Inject.Press(ctx, PressRequest{Namespace: nb.Namespace, Pod: nb.Pod, Button: keepButton, As: nb.Owner})
	if err != nil {
		return false, err
	}
	if p.Refusal != "" {
		if strings.Contains(p.Refusal, "press again") {
			s.Timeline.line("press", "pod/"+nb.Pod, "the janitor answers only to "+nb.Owner+": "+oneLine(p.Refusal, 110))
			return false, nil
		}
		return false, fmt.Errorf("the janitor refused %s's %q on pod %s/%s: %s", nb.Owner, keepButton, nb.Namespace, nb.Pod, p.Refusal)
	}
	s.show(ctx)
	var pod corev1.Pod
	if err := s.Kube.Get(ctx, client.ObjectKey{Namespace: nb.Namespace, Name: nb.Pod}, &pod); err != nil {
		return false, fmt.Errorf("get pod %s/%s: %w", nb.Namespace, nb.Pod, err)
	}
	until := pod.Annotations[v1alpha1.AnnotationReclaimSnoozeUntil]
	if until == "" {
		return false, fmt.Errorf("the janitor confirmed %q on pod %s/%s (%s) but recorded no %s", keepButton, nb.Namespace, nb.Pod, oneLine(p.Confirmation, 110), v1alpha1.AnnotationReclaimSnoozeUntil)
	}
	s.Timeline.line("kept", "pod/"+nb.Pod, "confirmed in the notice's thread, and recorded on the pod: "+v1alpha1.AnnotationReclaimSnoozeUntil+"="+until)
	return true, nil
}

// snoozeWithKubectl snoozes the notebook's pod for 2 h as its owner
// would with kubectl, where the demo cannot press Slack's buttons.
func (s *Session) snoozeWithKubectl(ctx context.Context, p *corev1.Pod) error {
	until := time.Now().Add(2 * time.Hour).UTC().Format(time.RFC3339)
	patch := client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, v1alpha1.AnnotationReclaimSnoozeUntil, until)))
	if err := s.Kube.Patch(ctx, p, patch); err != nil {
		return fmt.Errorf("snooze pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	s.Timeline.line("snooze", "pod/"+p.Name, "its owner snoozes it (a real Slack workspace: the demo cannot press its Keep button there): kubectl annotate pod -n "+p.Namespace+" "+p.Name+" "+v1alpha1.AnnotationReclaimSnoozeUntil+"="+until)
	return nil
}

// pressRestore presses "Restore" on the janitor's reply that it stopped
// nb, as its owner, and waits for the Deployment's recorded replicas and
// its pod to come back.
func (s *Session) pressRestore(ctx context.Context, nb Notebook) error {
	var d appsv1.Deployment
	if err := s.Kube.Get(ctx, client.ObjectKey{Namespace: nb.Namespace, Name: nb.Deployment}, &d); err != nil {
		return fmt.Errorf("get deployment %s/%s: %w", nb.Namespace, nb.Deployment, err)
	}
	recorded, err := strconv.Atoi(d.Annotations[v1alpha1.AnnotationReclaimedReplicas])
	if err != nil {
		return fmt.Errorf("deployment %s/%s: %s: %w", nb.Namespace, nb.Deployment, v1alpha1.AnnotationReclaimedReplicas, err)
	}
	key := "deployment/" + nb.Namespace + "/" + nb.Deployment
	pressed := false
	var restored *corev1.Pod
	return s.until(ctx, "the stopped notebook to be restored", func(ctx context.Context) (bool, error) {
		if !pressed {
			s.Timeline.line("press", key, fmt.Sprintf("%s presses \"Restore\" on the janitor's reply that it stopped pod %s", nb.Owner, nb.Pod))
			p, err := s.Inject.Press(ctx, PressRequest{Namespace: nb.Namespace, Pod: nb.Pod, Button: "Restore", As: nb.Owner})
			if err != nil {
				return false, err
			}
			if p.Refusal != "" {
				if strings.Contains(p.Refusal, "press again") {
					s.Timeline.line("press", key, "the janitor answers only to "+nb.Owner+": "+oneLine(p.Refusal, 110))
					return false, nil
				}
				return false, fmt.Errorf("the janitor refused %s's Restore of %s/%s: %s", nb.Owner, nb.Namespace, nb.Deployment, p.Refusal)
			}
			pressed = true
			s.show(ctx)
		}
		if restored == nil {
			replicas, err := s.replicas(ctx, nb)
			if err != nil || replicas != int32(recorded) {
				return false, err
			}
			var pods corev1.PodList
			if err := s.Kube.List(ctx, &pods, client.InNamespace(nb.Namespace), client.MatchingLabels{localcluster.LabelAppName: nb.Deployment}); err != nil {
				return false, fmt.Errorf("list the pods of %s: %w", key, err)
			}
			for i := range pods.Items {
				if pods.Items[i].DeletionTimestamp == nil {
					restored = &pods.Items[i]
				}
			}
			if restored == nil {
				return false, nil
			}
		}
		// Its pod runs, or waits with the scheduler's reason.
		if err := s.Kube.Get(ctx, client.ObjectKeyFromObject(restored), restored); err != nil {
			return false, fmt.Errorf("get pod %s/%s: %w", restored.Namespace, restored.Name, err)
		}
		why := unschedulableMessage(restored)
		if restored.Status.Phase != corev1.PodRunning && why == "" {
			return false, nil
		}
		state := "runs on " + restored.Spec.NodeName
		if restored.Status.Phase != corev1.PodRunning {
			state = "waits for a GPU (" + oneLine(why, 80) + ")"
		}
		s.Timeline.line("restored", key, fmt.Sprintf("spec.replicas back to the recorded %d (the janitor removed %s); its new pod %s %s", recorded, v1alpha1.AnnotationReclaimedReplicas, restored.Name, state))
		return true, nil
	})
}

// replicas is the notebook's Deployment's desired replicas.
func (s *Session) replicas(ctx context.Context, nb Notebook) (int32, error) {
	var d appsv1.Deployment
	if err := s.Kube.Get(ctx, client.ObjectKey{Namespace: nb.Namespace, Name: nb.Deployment}, &d); err != nil {
		return 0, fmt.Errorf("get deployment %s/%s: %w", nb.Namespace, nb.Deployment, err)
	}
	if d.Spec.Replicas == nil {
		return 1, nil
	}
	return *d.Spec.Replicas, nil
}

func runDState(ctx context.Context, s *Session) error {
	s.Node = s.Info.NPDNodes[len(s.Info.NPDNodes)-1] // the last: xid and escalate take the first two
	s.Nodes = []string{s.Node}
	if err := s.inject(ctx, "dstate", s.Node); err != nil {
		return err
	}
	return s.until(ctx, "the reboot to be verified", func(ctx context.Context) (bool, error) {
		op, err := s.lastOp(ctx, s.Node, "dstate-orphans")
		if err != nil || op == nil || op.Status.Phase != v1alpha1.PhaseSucceeded {
			return false, err
		}
		n, err := s.node(ctx, s.Node)
		return err == nil && !n.Spec.Unschedulable, err
	})
}

// breakerHolds returns an error saying why when policy's breaker is open:
// the story cannot go on until it closes.
func (s *Session) breakerHolds(ctx context.Context, policy string) error {
	var p v1alpha1.RemediationPolicy
	if err := s.Kube.Get(ctx, client.ObjectKey{Name: policy}, &p); err != nil {
		return fmt.Errorf("get remediationpolicy %s: %w", policy, err)
	}
	c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.PolicyBreakerOpen)
	if c == nil || c.Status != metav1.ConditionTrue {
		return nil
	}
	return fmt.Errorf("the circuit breaker of %s is open (%s), so it starts nothing: this is the breaker doing its job. "+
		"A quarantined node that is still unhealthy counts too (after escalate: kubemedic-demo inject replace-gpu, then the manual step; "+
		"the breaker closes after its cooldown). kubemedic status shows it", policy, c.Message)
}

func (s *Session) node(ctx context.Context, name string) (*corev1.Node, error) {
	var n corev1.Node
	if err := s.Kube.Get(ctx, client.ObjectKey{Name: name}, &n); err != nil {
		return nil, fmt.Errorf("get node %s: %w", name, err)
	}
	return &n, nil
}

// lastOp is the newest NodeOperation of policy on node made in this story,
// or nil.
func (s *Session) lastOp(ctx context.Context, node, policy string) (*v1alpha1.NodeOperation, error) {
	var ops v1alpha1.NodeOperationList
	if err := s.Kube.List(ctx, &ops); err != nil {
		return nil, fmt.Errorf("list nodeoperations: %w", err)
	}
	var last *v1alpha1.NodeOperation
	for i := range ops.Items {
		op := &ops.Items[i]
		if op.Spec.NodeName != node || op.Spec.Policy != policy || op.CreationTimestamp.Time.Before(s.start) {
			continue
		}
		if last == nil || !op.CreationTimestamp.Before(&last.CreationTimestamp) {
			last = op
		}
	}
	return last, nil
}

// Issues lists the issues this story filed, reopened or changed, whose
// title or body names node (any node when empty).
func (s *Session) Issues(ctx context.Context, node string) ([]*github.Issue, error) {
	owner, name, _ := strings.Cut(s.Info.GitHubRepo, "/")
	all, _, err := s.Timeline.GitHub.Issues.ListByRepo(ctx, owner, name, &github.IssueListByRepoOptions{State: "all", ListOptions: github.ListOptions{PerPage: 100}})
	if err != nil {
		return nil, fmt.Errorf("list issues of %s: %w", s.Info.GitHubRepo, err)
	}
	var out []*github.Issue
	for _, is := range all {
		if is.GetUpdatedAt().Time.Before(s.start) {
			continue
		}
		if node == "" || strings.Contains(is.GetBody(), node) || strings.Contains(is.GetTitle(), node) {
			out = append(out, is)
		}
	}
	return out, nil
}

// issuesClosed: this story filed an issue about node's alertname (the
// node's incident issue, or with the old grouping the alert's issue), and
// every one is closed.
func (s *Session) issuesClosed(ctx context.Context, node, alertname string) (bool, error) {
	issues, err := s.Issues(ctx, node)
	if err != nil {
		return false, err
	}
	filed := false
	for _, is := range issues {
		if !incidentOf(is, node) && !strings.Contains(is.GetTitle()+is.GetBody(), alertname) {
			continue
		}
		filed = true
		if is.GetState() != "closed" {
			return false, nil
		}
	}
	return filed, nil
}

// incidentOf reports whether is is node's incident issue, as the shipped
// config titles it ("[critical] Node gpu-node-001: GPUXidError —
// repairing"): its body names only the alerts of the last notification,
// which may not be the one the story began with.
func incidentOf(is *github.Issue, node string) bool {
	_, rest, ok := strings.Cut(is.GetTitle(), "] Node "+node)
	return ok && (strings.HasPrefix(rest, ":") || strings.HasPrefix(rest, " "))
}

// openIssue is the open issue of alertname that names node, or nil.
func (s *Session) openIssue(ctx context.Context, node, alertname string) (*github.Issue, error) {
	issues, err := s.Issues(ctx, node)
	if err != nil {
		return nil, err
	}
	for _, is := range issues {
		if is.GetState() == "open" && (strings.Contains(is.GetTitle(), alertname) || strings.Contains(is.GetBody(), alertname)) {
			return is, nil
		}
	}
	return nil, nil
}

func (s *Session) hasRollup(ctx context.Context) (bool, error) {
	issues, err := s.Issues(ctx, "")
	if err != nil {
		return false, err
	}
	for _, is := range issues {
		for _, l := range is.Labels {
			if l.GetName() == "alert-storm" {
				return true, nil
			}
		}
	}
	return false, nil
}
