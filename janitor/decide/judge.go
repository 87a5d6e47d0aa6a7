package decide

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubemedic/kubemedic/janitor/gpuutil"
	"github.com/kubemedic/kubemedic/policies"
)

// Rule names why a pod is reclaimed. The values are API: they appear in
// annotations, Events, metrics and Slack messages.
type Rule string

const (
	// RuleExpired: a janitor/ttl or janitor/expires annotation has passed.
	RuleExpired Rule = "Expired"
	// RuleMaxLifetime: the pod is older than maxLifetime.
	RuleMaxLifetime Rule = "MaxLifetime"
	// RuleStuckPending: PodScheduled=False for longer than maxPending.
	RuleStuckPending Rule = "StuckPending"
	// RuleIdle: every GPU of the pod stayed below the threshold for the
	// whole window.
	RuleIdle Rule = "Idle"
)

// Rules lists the rules in the order they are judged: an owner's own
// expiry first, then lifetime, pending, idle.
var Rules = []Rule{RuleExpired, RuleMaxLifetime, RuleStuckPending, RuleIdle}

func knownRule(r Rule) bool {
	for _, x := range Rules {
		if x == r {
			return true
		}
	}
	return false
}

func ruleNames() []string {
	out := make([]string, len(Rules))
	for i, r := range Rules {
		out[i] = string(r)
	}
	return out
}

// Pod is what the rules look at, read from the pod, its controllers and
// its namespace.
type Pod struct {
	Namespace, Name string
	Created         time.Time
	// Started is status.startTime (the kubelet accepted the pod); zero
	// while unscheduled.
	Started time.Time
	Phase   corev1.PodPhase
	// Unschedulable is set when PodScheduled is False: since when, and
	// the scheduler's message.
	Unschedulable *Unschedulable
	// WholeGPUs and MIGInstances are what the pod's containers request
	// (nvidia.com/gpu, nvidia.com/mig-*).
	WholeGPUs, MIGInstances int
	// Expiry lists the objects whose kube-janitor annotations apply.
	Expiry []ExpirySource
}

// Unschedulable is the PodScheduled=False condition.
type Unschedulable struct {
	Since   time.Time
	Message string
}

// GPUs is the number of GPU devices (whole GPUs and MIG instances) the pod holds.
func (p *Pod) GPUs() int { return p.WholeGPUs + p.MIGInstances }

// Finding is one rule that holds, with the evidence the owner is shown.
type Finding struct {
	Rule     Rule
	Evidence string
}

// Verdict is the judgement of one pod.
type Verdict struct {
	// Findings are the rules that hold, in Rules order; the first is the
	// one noticed.
	Findings []Finding
	// Unknown maps a rule that could not be judged to why (missing or stale
	// metrics, Prometheus down). An unknown rule never holds.
	Unknown map[Rule]string
	// Idle is the GPU evidence the idle rule was judged on (State empty
	// when it was not judged); a "cancelled" message quotes it.
	Idle Idle
	// Problems are invalid annotations, for a Warning Event each.
	Problems []string
	// NextCheck is when a rule that does not hold yet could start to hold
	// on the clock alone (zero: none). The idle rule is judged every cycle.
	NextCheck time.Time
}

// Holds reports whether the rule holds, and its evidence.
func (v Verdict) Holds(r Rule) (string, bool) {
	for _, f := range v.Findings {
		if f.Rule == r {
			return f.Evidence, true
		}
	}
	return "", false
}

// Candidate is the first finding; ok is false when no rule holds.
func (v Verdict) Candidate() (Finding, bool) {
	if len(v.Findings) == 0 {
		return Finding{}, false
	}
	return v.Findings[0], true
}

// Cleared says why a rule that was judged does not hold ("" when it is
// not known), for the message that cancels a notice: at 50,000 busy pods a
// cycle, the text is made only when it is needed.
func (v Verdict) Cleared(r Rule, rules policies.Reclaim) string {
	if r != RuleIdle || v.Idle.State != IdleIdle || rules.Idle == nil {
		return ""
	}
	return fmt.Sprintf("GPU utilisation reached %s%% in the last %s (threshold %d%%)",
		pct(v.Idle.MaxPercent), Human(rules.Idle.Window.Duration), rules.Idle.UtilizationBelowPercent)
}

// Judge checks every rule of r against the pod at now. idle is the GPU
// evidence for r.Idle's window (see IdleFromMetrics); it is ignored when
// the policy has no idle rule.
func Judge(p *Pod, r policies.Reclaim, idle Idle, now time.Time) Verdict {
	var v Verdict
	next := func(t time.Time) {
		if t.After(now) && (v.NextCheck.IsZero() || t.Before(v.NextCheck)) {
			v.NextCheck = t
		}
	}
	unknown := func(rule Rule, why string) {
		if v.Unknown == nil {
			v.Unknown = map[Rule]string{}
		}
		v.Unknown[rule] = why
	}
	running := p.Phase == corev1.PodRunning

	at, from, problems := Expiry(p.Expiry)
	v.Problems = problems
	if !at.IsZero() {
		if !now.Before(at) {
			v.Findings = append(v.Findings, Finding{RuleExpired, fmt.Sprintf("expired at %s (%s)", at.UTC().Format(time.RFC3339), from)})
		} else {
			next(at)
		}
	}

	if r.MaxLifetime > 0 && p.Phase != corev1.PodPending {
		end := p.Created.Add(r.MaxLifetime)
		if !now.Before(end) {
			v.Findings = append(v.Findings, Finding{RuleMaxLifetime, fmt.Sprintf("running for %s, longer than the limit of %s (created %s)",
				Human(now.Sub(p.Created)), Human(r.MaxLifetime), p.Created.UTC().Format(time.RFC3339))})
		} else {
			next(end)
		}
	}

	if r.MaxPending > 0 && p.Phase == corev1.PodPending && p.Unschedulable != nil {
		end := p.Unschedulable.Since.Add(r.MaxPending)
		if !now.Before(end) {
			msg := p.Unschedulable.Message
			if msg == "" {
				msg = "the scheduler gave no message"
			}
			seen := fmt.Sprintf("pending and unschedulable for %s, longer than the limit of %s", Human(now.Sub(p.Unschedulable.Since)), Human(r.MaxPending))
			// The owner reads why in words, and the scheduler's own
			// message in full, for what the words leave out.
			if words, ok := ExplainUnschedulable(msg); ok {
				seen += fmt.Sprintf(". %s. The scheduler said: %q", words, msg)
			} else {
				seen += fmt.Sprintf(": %q", msg)
			}
			v.Findings = append(v.Findings, Finding{RuleStuckPending, seen})
		} else {
			next(end)
		}
	}

	if r.Idle != nil && running {
		w := r.Idle.Window.Duration
		switch {
		case p.Started.IsZero():
			unknown(RuleIdle, "the pod has no start time yet")
		case now.Sub(p.Started) < gpuutil.Reach(w):
			// Younger than the evidence reaches back (the window, and a
			// bucket more when it is read from buckets): not idle yet.
			next(p.Started.Add(gpuutil.Reach(w)))
		default:
			switch idle.State {
			case IdleUnknown:
				unknown(RuleIdle, idle.Detail)
			case IdleIdle:
				if idle.MaxPercent < float64(r.Idle.UtilizationBelowPercent) {
					v.Findings = append(v.Findings, Finding{RuleIdle, fmt.Sprintf("GPU utilisation at most %s%% over the last %s on %s (threshold %d%%)",
						pct(idle.MaxPercent), Human(w), plural(idle.GPUs, "GPU"), r.Idle.UtilizationBelowPercent)})
				}
				v.Idle = idle
			}
		}
	}
	sort.SliceStable(v.Findings, func(i, j int) bool { return ruleIndex(v.Findings[i].Rule) < ruleIndex(v.Findings[j].Rule) })
	return v
}

func ruleIndex(r Rule) int {
	for i, x := range Rules {
		if x == r {
			return i
		}
	}
	return len(Rules)
}

func pct(f float64) string {
	if f == float64(int64(f)) {
		return fmt.Sprintf("%d", int64(f))
	}
	return fmt.Sprintf("%.1f", f)
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// Human writes a duration the way people say it: 4h, 1h30m, 7d, 45s.
func Human(d time.Duration) string {
	if d < 0 {
		d = -d
	}
	d = d.Round(time.Second)
	var parts []string
	if days := d / (24 * time.Hour); days > 0 {
		parts = append(parts, fmt.Sprintf("%dd", days))
		d -= days * 24 * time.Hour
	}
	if h := d / time.Hour; h > 0 {
		parts = append(parts, fmt.Sprintf("%dh", h))
		d -= h * time.Hour
	}
	if m := d / time.Minute; m > 0 {
		parts = append(parts, fmt.Sprintf("%dm", m))
		d -= m * time.Minute
	}
	if s := d / time.Second; s > 0 || len(parts) == 0 {
		parts = append(parts, fmt.Sprintf("%ds", s))
	}
	if len(parts) > 2 {
		parts = parts[:2]
	}
	return strings.Join(parts, "")
}
