package demo

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/google/go-github/v60/github"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/plan"
)

// timelinePoll is how often the timeline reads the API server, the GitHub
// stand-in and the Slack log.
const timelinePoll = 500 * time.Millisecond

// Slack is where the timeline reads the demo's Slack messages from.
type Slack interface {
	SlackMessages(ctx context.Context, after int) ([]SlackMessage, error)
}

// worldSlack adapts World to Slack.
type worldSlack struct{ w *World }

func (s worldSlack) SlackMessages(_ context.Context, after int) ([]SlackMessage, error) {
	return s.w.SlackMessages(after), nil
}

// Timeline tells the story of the demo as it happens: node conditions,
// cordons and quarantines, NodeOperations and their phases, GPUs excluded
// by DeviceTaintRule, workloads the janitor stopped, pods evicted, waiting
// and scheduled (timeline_pods.go), GitHub issues and their comments, and
// Slack messages, one line each with the time and the object to `kubectl
// get`. It reads everything from where a person
// would: the API server, GitHub's API and Slack.
type Timeline struct {
	Kube   client.Client
	GitHub *github.Client
	Repo   string
	Slack  Slack
	Out    io.Writer

	start    time.Time
	conds    map[string]string // node/type -> status+reason
	cordoned map[string]string
	ops      map[string]string // op -> phase
	breakers map[string]string // policy -> BreakerOpen status and reason
	issues   map[int]string    // number -> state
	comments map[int]int
	slackSeq int

	pods      map[types.UID]*podState
	lastNode  map[string]string        // namespace/pod -> node, of pods seen placed
	stopped   map[types.UID]string     // pod -> the NodeOperation whose drain stops it
	evictions map[types.UID][]eviction // controller -> its evicted pods not yet replaced
	rules     map[string]string        // kubemedic's DeviceTaintRules -> their GPU
	reclaimed map[string]bool          // kind/namespace/name of workloads the janitor stopped
	freed     []freed                  // GPUs freed on a node, oldest first
	// reschedules and waits are the records behind Reschedules and Waits.
	reschedules []Reschedule
	waits       []Wait

	tests       map[types.UID]*testState // background test pods seen running
	preemptions []*Preemption
	unvalidated map[string]bool   // node -> carries the join taint
	validations map[string]string // NodeValidation -> what was printed of it
}

// NewTimeline makes a timeline reading from info's demo.
func NewTimeline(kube client.Client, info Info, slack Slack, out io.Writer) (*Timeline, error) {
	tok, err := os.ReadFile(info.GitHubTokenFile)
	if err != nil {
		return nil, fmt.Errorf("read the GitHub token: %w", err)
	}
	gh := github.NewClient(nil).WithAuthToken(strings.TrimSpace(string(tok)))
	u, err := url.Parse(strings.TrimSuffix(info.GitHubURL, "/") + "/")
	if err != nil {
		return nil, fmt.Errorf("GitHub URL %q: %w", info.GitHubURL, err)
	}
	gh.BaseURL = u
	return &Timeline{Kube: kube, GitHub: gh, Repo: info.GitHubRepo, Slack: slack, Out: out}, nil
}

// Timeline makes a timeline of this world, in process.
func (w *World) Timeline(out io.Writer) (*Timeline, error) {
	return NewTimeline(w.Cluster.Client, w.Info(w.Cluster.Kubeconfig), worldSlack{w}, out)
}

// Prime reads the current state without printing it, so that Run prints
// only what changes from now on.
func (t *Timeline) Prime(ctx context.Context) error {
	t.start = time.Now()
	quiet := t.Out
	t.Out = io.Discard
	defer func() { t.Out = quiet }()
	return t.Poll(ctx)
}

// Run polls until ctx ends or done returns true, then returns.
func (t *Timeline) Run(ctx context.Context, done func() bool) error {
	tick := time.NewTicker(timelinePoll)
	defer tick.Stop()
	for {
		if err := t.Poll(ctx); err != nil && ctx.Err() == nil {
			t.line("error", "", err.Error())
		}
		if done != nil && done() {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

func (t *Timeline) line(kind, object, text string) {
	now := time.Now()
	l := fmt.Sprintf("%s +%5.1fs  %-16s %-58s %s", now.Format("15:04:05"), now.Sub(t.start).Seconds(), kind, object, text)
	fmt.Fprintln(t.Out, l)
}

// Poll reads everything once and prints what changed.
func (t *Timeline) Poll(ctx context.Context) error {
	if t.start.IsZero() {
		t.start = time.Now()
	}
	if t.conds == nil {
		t.conds, t.cordoned, t.ops, t.issues, t.comments = map[string]string{}, map[string]string{}, map[string]string{}, map[int]string{}, map[int]int{}
		t.breakers = map[string]string{}
		t.pods, t.lastNode, t.stopped = map[types.UID]*podState{}, map[string]string{}, map[types.UID]string{}
		t.evictions, t.rules, t.reclaimed = map[types.UID][]eviction{}, map[string]string{}, map[string]bool{}
		t.tests, t.unvalidated, t.validations = map[types.UID]*testState{}, map[string]bool{}, map[string]string{}
	}
	if err := t.pollNodes(ctx); err != nil {
		return err
	}
	if err := t.pollOps(ctx); err != nil {
		return err
	}
	if err := t.pollPolicies(ctx); err != nil {
		return err
	}
	if err := t.pollRules(ctx); err != nil {
		return err
	}
	if err := t.pollReclaims(ctx); err != nil {
		return err
	}
	if err := t.pollPods(ctx); err != nil {
		return err
	}
	if err := t.pollValidations(ctx); err != nil {
		return err
	}
	if err := t.pollIssues(ctx); err != nil {
		return err
	}
	return t.pollSlack(ctx)
}

func (t *Timeline) pollNodes(ctx context.Context) error {
	var nodes corev1.NodeList
	if err := t.Kube.List(ctx, &nodes); err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		for _, c := range n.Status.Conditions {
			if _, ours := v1alpha1.ConditionReasons[string(c.Type)]; !ours && string(c.Type) != v1alpha1.ConditionGPUValidationFailed {
				continue
			}
			key := n.Name + "/" + string(c.Type)
			reason := v1alpha1.EffectiveReason(string(c.Type), c.Reason, c.Message)
			v := string(c.Status) + " " + reason
			if old, seen := t.conds[key]; seen && old != v || !seen && c.Status != corev1.ConditionFalse {
				kind := "detected"
				if c.Status == corev1.ConditionFalse {
					kind = "cleared"
				}
				t.line(kind, "node/"+n.Name, fmt.Sprintf("%s=%s %s", c.Type, c.Status, oneLine(c.Message, 90)))
			}
			t.conds[key] = v
		}
		state := ""
		switch {
		case plan.Quarantined(n):
			state = "quarantined"
		case n.Spec.Unschedulable:
			state = "cordoned"
		}
		if old, seen := t.cordoned[n.Name]; seen && old != state || !seen && state != "" {
			switch state {
			case "":
				t.line("uncordon", "node/"+n.Name, "schedulable again")
			case "quarantined":
				t.line("quarantine", "node/"+n.Name, "cordoned and tainted "+v1alpha1.TaintQuarantined+": a person takes over")
			default:
				t.line("cordon", "node/"+n.Name, "unschedulable")
			}
		}
		t.cordoned[n.Name] = state
		tainted := plan.HasTaint(n, v1alpha1.TaintUnvalidated)
		if old, seen := t.unvalidated[n.Name]; seen && old != tainted || !seen && tainted {
			if tainted {
				t.line("unvalidated", "node/"+n.Name, "carries the taint "+v1alpha1.TaintUnvalidated+":NoSchedule: no pod is placed on it until a GPU test passes")
			} else {
				t.line("validated", "node/"+n.Name, "the taint "+v1alpha1.TaintUnvalidated+" is removed: it serves")
			}
		}
		t.unvalidated[n.Name] = tainted
	}
	return nil
}

// pollValidations prints what the NodeValidations say about the tests
// outside of a repair: a join test started, a test's result, a background
// test preempted. Background tests that wait for GPUs and are put off
// (most, on a busy cluster) are not printed.
func (t *Timeline) pollValidations(ctx context.Context) error {
	var list v1alpha1.NodeValidationList
	if err := t.Kube.List(ctx, &list); err != nil {
		if meta.IsNoMatchError(err) {
			return nil
		}
		return fmt.Errorf("list nodevalidations: %w", err)
	}
	for _, nv := range list.Items {
		st := nv.Status
		var last, join string
		if l := st.Last; l != nil && l.CompletionTime != nil {
			last = string(l.Result) + " " + l.CompletionTime.UTC().Format(time.RFC3339)
		}
		if c := st.Current; c != nil && st.Mode == v1alpha1.ValidationJoin {
			join = c.PodName
		}
		v := fmt.Sprintf("%s|%s|%d", last, join, st.Preemptions)
		old, seen := t.validations[nv.Name]
		t.validations[nv.Name] = v
		if !seen && last == "" && join == "" && st.Preemptions == 0 || old == v {
			continue
		}
		var was []string
		if seen {
			was = strings.SplitN(old, "|", 3)
		} else {
			was = []string{"", "", "0"}
		}
		obj := "nodevalidation/" + nv.Name
		switch {
		case last != "" && last != was[0]:
			kind := "test passed"
			if st.Last.Result == v1alpha1.ValidationFailed {
				kind = "test failed"
			}
			t.line(kind, obj, oneLine(st.Message, 140))
		case join != "" && join != was[1]:
			t.line("testing", obj, oneLine(st.Message, 140))
		case fmt.Sprint(st.Preemptions) != was[2]:
			t.line("put off", obj, oneLine(st.Message, 140))
		}
	}
	return nil
}

func (t *Timeline) pollOps(ctx context.Context) error {
	var ops v1alpha1.NodeOperationList
	if err := t.Kube.List(ctx, &ops); err != nil {
		return fmt.Errorf("list nodeoperations: %w", err)
	}
	sort.Slice(ops.Items, func(i, j int) bool { return ops.Items[i].CreationTimestamp.Before(&ops.Items[j].CreationTimestamp) })
	for i := range ops.Items {
		op := &ops.Items[i]
		for _, n := range op.Status.OwnerNotices {
			t.stopped[types.UID(n.UID)] = op.Name
		}
		phase := string(op.Status.Phase)
		if phase == "" {
			phase = string(v1alpha1.PhasePending)
		}
		old, seen := t.ops[op.Name]
		if !seen || old != phase {
			what := op.Spec.Operation
			if op.Spec.Quarantine {
				what = "quarantine"
			}
			text := fmt.Sprintf("%s on %s: %s", what, op.Spec.NodeName, phase)
			if !seen {
				text = fmt.Sprintf("created by policy %s step %s (%s on %s): %s", op.Spec.Policy, op.Spec.Step, what, op.Spec.NodeName, phase)
			}
			if op.Status.Message != "" {
				text += " — " + oneLine(op.Status.Message, 100)
			}
			t.line(strings.ToLower(phase), "nodeoperation/"+op.Name, text)
		}
		t.ops[op.Name] = phase
	}
	return nil
}

func (t *Timeline) pollPolicies(ctx context.Context) error {
	var pols v1alpha1.RemediationPolicyList
	if err := t.Kube.List(ctx, &pols); err != nil {
		return fmt.Errorf("list remediationpolicies: %w", err)
	}
	for _, p := range pols.Items {
		c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.PolicyBreakerOpen)
		if c == nil {
			continue
		}
		v := string(c.Status) + " " + c.Reason
		old, seen := t.breakers[p.Name]
		t.breakers[p.Name] = v
		if seen && old == v || !seen && c.Status != metav1.ConditionTrue {
			continue
		}
		kind := "breaker"
		text := "closed: " + c.Message
		if c.Status == metav1.ConditionTrue {
			text = "OPEN, starting nothing new: " + c.Message
		}
		t.line(kind, "remediationpolicy/"+p.Name, oneLine(text, 120))
	}
	return nil
}

func (t *Timeline) pollIssues(ctx context.Context) error {
	owner, name, _ := strings.Cut(t.Repo, "/")
	issues, _, err := t.GitHub.Issues.ListByRepo(ctx, owner, name, &github.IssueListByRepoOptions{State: "all", ListOptions: github.ListOptions{PerPage: 100}})
	if err != nil {
		return fmt.Errorf("list GitHub issues of %s: %w", t.Repo, err)
	}
	sort.Slice(issues, func(i, j int) bool { return issues[i].GetNumber() < issues[j].GetNumber() })
	for _, is := range issues {
		n := is.GetNumber()
		obj := fmt.Sprintf("issue %s#%d", t.Repo, n)
		state := is.GetState()
		old, seen := t.issues[n]
		switch {
		case !seen:
			t.line("filed", obj, oneLine(is.GetTitle(), 100))
		case old != state && state == "closed":
			t.line("closed", obj, "state reason "+is.GetStateReason())
		case old != state:
			t.line("reopened", obj, oneLine(is.GetTitle(), 100))
		}
		t.issues[n] = state
		if is.GetComments() > t.comments[n] {
			comments, _, err := t.GitHub.Issues.ListComments(ctx, owner, name, n, &github.IssueListCommentsOptions{ListOptions: github.ListOptions{PerPage: 100}})
			if err != nil {
				return fmt.Errorf("list comments of %s: %w", obj, err)
			}
			for _, c := range comments[min(t.comments[n], len(comments)):] {
				t.line("commented", obj, oneLine(c.GetBody(), 100))
			}
			t.comments[n] = len(comments)
		}
	}
	return nil
}

func (t *Timeline) pollSlack(ctx context.Context) error {
	msgs, err := t.Slack.SlackMessages(ctx, t.slackSeq)
	if err != nil {
		return fmt.Errorf("read Slack messages: %w", err)
	}
	for _, m := range msgs {
		t.line("slack", "to "+m.To, oneLine(m.Text, 110))
		t.slackSeq = m.Seq
	}
	return nil
}

// oneLine is the first line of s, cut to n characters.
func oneLine(s string, n int) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
