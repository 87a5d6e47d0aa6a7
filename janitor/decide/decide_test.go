package decide_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubemedic/kubemedic/janitor/decide"
	"github.com/kubemedic/kubemedic/janitor/gpuutil"
	"github.com/kubemedic/kubemedic/policies"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

var t0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

func rules() policies.Reclaim {
	return policies.Reclaim{
		Idle:        &v1alpha1.IdleRule{UtilizationBelowPercent: 5, Window: metav1.Duration{Duration: 4 * time.Hour}},
		MaxLifetime: 168 * time.Hour, MaxPending: 24 * time.Hour,
		GracePeriod: time.Hour, MaxSnooze: 24 * time.Hour, RequireNotice: true,
	}
}

func runningPod(age time.Duration) *decide.Pod {
	return &decide.Pod{Namespace: "team", Name: "nb-0", Created: t0.Add(-age), Started: t0.Add(-age), Phase: corev1.PodRunning, WholeGPUs: 2}
}

func TestJudge(t *testing.T) {
	measured := func(max float64, gpus int) decide.Idle {
		return decide.Idle{State: decide.IdleIdle, MaxPercent: max, GPUs: gpus}
	}
	for _, tc := range []struct {
		desc      string
		pod       func() *decide.Pod
		rules     func() policies.Reclaim
		idle      decide.Idle
		want      []decide.Rule
		evidence  string // substring of the first finding
		unknown   decide.Rule
		clear     string
		problems  int
		problem   string // substring of the first problem
		nextCheck time.Time
	}{
		{desc: "idle below threshold on every GPU", pod: func() *decide.Pod { return runningPod(5 * time.Hour) }, idle: measured(2, 2),
			want: []decide.Rule{decide.RuleIdle}, evidence: "GPU utilisation at most 2% over the last 4h on 2 GPUs (threshold 5%)"},
		{desc: "at the threshold is busy", pod: func() *decide.Pod { return runningPod(5 * time.Hour) }, idle: measured(5, 2),
			clear: "GPU utilisation reached 5% in the last 4h (threshold 5%)"},
		// A 4h window is read from 5-minute buckets: the oldest began up to
		// 5 minutes before the window, so the pod must be that much older.
		{desc: "younger than the window is not idle yet", pod: func() *decide.Pod { return runningPod(3 * time.Hour) }, idle: measured(0, 2),
			nextCheck: t0.Add(time.Hour + 5*time.Minute)},
		{desc: "window elapsed but not the bucket before it", pod: func() *decide.Pod { return runningPod(4 * time.Hour) }, idle: measured(0.5, 2),
			nextCheck: t0.Add(5 * time.Minute)},
		{desc: "window and one bucket exactly elapsed", pod: func() *decide.Pod { return runningPod(4*time.Hour + 5*time.Minute) }, idle: measured(0.5, 2),
			want: []decide.Rule{decide.RuleIdle}, evidence: "at most 0.5%"},
		{desc: "unknown metrics never idle", pod: func() *decide.Pod { return runningPod(5 * time.Hour) },
			idle: decide.Idle{State: decide.IdleUnknown, Detail: "query failed"}, unknown: decide.RuleIdle},
		{desc: "no start time is unknown", pod: func() *decide.Pod { p := runningPod(5 * time.Hour); p.Started = time.Time{}; return p },
			idle: measured(0, 2), unknown: decide.RuleIdle},
		{desc: "pending pod is not judged idle", pod: func() *decide.Pod { p := runningPod(5 * time.Hour); p.Phase = corev1.PodPending; return p },
			idle: measured(0, 2)},
		{desc: "max lifetime", pod: func() *decide.Pod { return runningPod(170 * time.Hour) }, idle: measured(50, 2),
			want: []decide.Rule{decide.RuleMaxLifetime}, evidence: "running for 7d2h, longer than the limit of 7d"},
		{desc: "max lifetime not yet: next check at the limit", pod: func() *decide.Pod { return runningPod(100 * time.Hour) }, idle: measured(50, 2),
			nextCheck: t0.Add(68 * time.Hour)},
		{desc: "stuck pending quotes the scheduler", pod: func() *decide.Pod {
			return &decide.Pod{Namespace: "team", Name: "big", Created: t0.Add(-30 * time.Hour), Phase: corev1.PodPending, WholeGPUs: 8,
				Unschedulable: &decide.Unschedulable{Since: t0.Add(-25 * time.Hour), Message: "0/16 nodes are available: 16 Insufficient nvidia.com/gpu."}}
		}, want: []decide.Rule{decide.RuleStuckPending}, evidence: `pending and unschedulable for 1d1h, longer than the limit of 1d. None of the 16 nodes can run it now: 16 have too few free GPUs (nvidia.com/gpu). The scheduler said: "0/16 nodes are available: 16 Insufficient nvidia.com/gpu."`},
		{desc: "stuck pending quotes a message it cannot explain", pod: func() *decide.Pod {
			return &decide.Pod{Namespace: "team", Name: "big", Created: t0.Add(-30 * time.Hour), Phase: corev1.PodPending, WholeGPUs: 1,
				Unschedulable: &decide.Unschedulable{Since: t0.Add(-25 * time.Hour), Message: "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims."}}
		}, want: []decide.Rule{decide.RuleStuckPending}, evidence: `pending and unschedulable for 1d1h, longer than the limit of 1d: "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims."`},
		{desc: "pending without PodScheduled=False is not stuck", pod: func() *decide.Pod {
			return &decide.Pod{Namespace: "team", Name: "big", Created: t0.Add(-30 * time.Hour), Phase: corev1.PodPending, WholeGPUs: 8}
		}},
		{desc: "lifetime is not judged on a pending pod", pod: func() *decide.Pod {
			return &decide.Pod{Namespace: "team", Name: "big", Created: t0.Add(-300 * time.Hour), Phase: corev1.PodPending, WholeGPUs: 1,
				Unschedulable: &decide.Unschedulable{Since: t0.Add(-time.Hour)}}
		}, nextCheck: t0.Add(23 * time.Hour)},
		{desc: "expired by ttl on the pod", pod: func() *decide.Pod {
			p := runningPod(25 * time.Hour)
			p.Expiry = []decide.ExpirySource{{Object: "pod", Created: p.Created, TTL: "1d"}}
			return p
		}, idle: measured(80, 2), want: []decide.Rule{decide.RuleExpired}, evidence: "janitor/ttl=1d on pod"},
		{desc: "expiry on the namespace, earliest wins, several rules in order", pod: func() *decide.Pod {
			p := runningPod(200 * time.Hour)
			p.Expiry = []decide.ExpirySource{{Object: "pod", Created: p.Created, TTL: "2w"}, {Object: "namespace team", Expires: "2026-11-20"}}
			return p
		}, idle: measured(1, 2), want: []decide.Rule{decide.RuleExpired, decide.RuleMaxLifetime, decide.RuleIdle}, evidence: "janitor/expires=2026-11-20 on namespace team"},
		{desc: "bad ttl is a problem and never expires", pod: func() *decide.Pod {
			p := runningPod(time.Hour)
			p.Expiry = []decide.ExpirySource{{Object: "Deployment web", Created: p.Created, TTL: "3 days"}, {Object: "pod", Expires: "tomorrow"}}
			return p
		}, idle: measured(1, 2), problems: 2, nextCheck: t0.Add(3*time.Hour + 5*time.Minute)},
		{desc: "a ttl beyond what a duration holds is a problem and never expires", pod: func() *decide.Pod {
			p := runningPod(100 * time.Hour)
			p.Expiry = []decide.ExpirySource{{Object: "pod", Created: p.Created, TTL: "107000w"}}
			return p
		}, idle: measured(80, 2), problems: 1, problem: `pod annotation janitor/ttl: "107000w" is longer than a duration holds`, nextCheck: t0.Add(68 * time.Hour)},
		{desc: "the longest ttl that fits is far away", pod: func() *decide.Pod {
			p := runningPod(100 * time.Hour)
			p.Expiry = []decide.ExpirySource{{Object: "pod", Created: p.Created, TTL: "15250w"}}
			return p
		}, idle: measured(80, 2), nextCheck: t0.Add(68 * time.Hour)},
		{desc: "forever never expires", pod: func() *decide.Pod {
			p := runningPod(time.Hour)
			p.Expiry = []decide.ExpirySource{{Object: "pod", Created: p.Created, TTL: "forever"}}
			return p
		}, idle: measured(1, 2), nextCheck: t0.Add(3*time.Hour + 5*time.Minute)},
		{desc: "policy without an idle rule ignores idleness", pod: func() *decide.Pod { return runningPod(5 * time.Hour) },
			rules: func() policies.Reclaim { r := rules(); r.Idle = nil; return r }, idle: measured(0, 2), nextCheck: t0.Add(163 * time.Hour)},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			r := rules()
			if tc.rules != nil {
				r = tc.rules()
			}
			v := decide.Judge(tc.pod(), r, tc.idle, t0)
			var got []decide.Rule
			for _, f := range v.Findings {
				got = append(got, f.Rule)
			}
			require.Equal(t, tc.want, got)
			if tc.evidence != "" {
				require.Contains(t, v.Findings[0].Evidence, tc.evidence)
			}
			if tc.unknown != "" {
				require.Contains(t, v.Unknown, tc.unknown)
			} else {
				require.Empty(t, v.Unknown)
			}
			require.Len(t, v.Problems, tc.problems, "%v", v.Problems)
			if tc.problem != "" {
				require.Contains(t, v.Problems[0], tc.problem)
			}
			if tc.clear != "" {
				require.Equal(t, tc.clear, v.Cleared(decide.RuleIdle, r))
			}
			if !tc.nextCheck.IsZero() {
				require.Equal(t, tc.nextCheck, v.NextCheck)
			}
		})
	}
}

func TestIdleFromMetrics(t *testing.T) {
	w := 4 * time.Hour
	util := gpuutil.Query{Metric: gpuutil.MetricGPUUtil, Window: w}
	mig := gpuutil.Query{Metric: gpuutil.MetricGREngineActive, Window: w}
	key := gpuutil.PodKey{Namespace: "team", Name: "nb-0"}
	pod := &decide.Pod{Namespace: "team", Name: "nb-0", WholeGPUs: 2}
	migPod := &decide.Pod{Namespace: "team", Name: "nb-0", MIGInstances: 1}
	both := &decide.Pod{Namespace: "team", Name: "nb-0", WholeGPUs: 1, MIGInstances: 1}
	gpus := func(vals ...float64) []gpuutil.GPU {
		var out []gpuutil.GPU
		for i, v := range vals {
			out = append(out, gpuutil.GPU{ID: string(rune('a' + i)), MaxPercent: v})
		}
		return out
	}
	for _, tc := range []struct {
		desc    string
		pod     *decide.Pod
		results map[gpuutil.Query]gpuutil.Result
		want    decide.Idle
		detail  string
	}{
		{desc: "both GPUs measured: the max", pod: pod, results: map[gpuutil.Query]gpuutil.Result{util: {Pods: map[gpuutil.PodKey][]gpuutil.GPU{key: gpus(1, 3)}}},
			want: decide.Idle{State: decide.IdleIdle, MaxPercent: 3, GPUs: 2}},
		{desc: "one of two GPUs: unknown, never idle", pod: pod, results: map[gpuutil.Query]gpuutil.Result{util: {Pods: map[gpuutil.PodKey][]gpuutil.GPU{key: gpus(0)}, Dropped: map[gpuutil.PodKey]int{key: 1}}},
			detail: "complete series for 1 of 2 devices over the last 4h (1 stale, gapped, started late or NaN)"},
		{desc: "no series at all", pod: pod, results: map[gpuutil.Query]gpuutil.Result{util: {}}, detail: "complete series for 0 of 2 devices"},
		{desc: "prometheus down", pod: pod, results: map[gpuutil.Query]gpuutil.Result{util: {Err: errors.New("connection refused")}},
			detail: "the Prometheus query for DCGM_FI_DEV_GPU_UTIL failed: connection refused"},
		{desc: "query missing from the cycle", pod: pod, results: nil, detail: "DCGM_FI_DEV_GPU_UTIL was not queried"},
		{desc: "MIG uses GR_ENGINE_ACTIVE", pod: migPod, results: map[gpuutil.Query]gpuutil.Result{mig: {Pods: map[gpuutil.PodKey][]gpuutil.GPU{key: gpus(40)}}},
			want: decide.Idle{State: decide.IdleIdle, MaxPercent: 40, GPUs: 1}},
		{desc: "whole and MIG both needed", pod: both, results: map[gpuutil.Query]gpuutil.Result{util: {Pods: map[gpuutil.PodKey][]gpuutil.GPU{key: gpus(1)}}}, detail: "DCGM_FI_PROF_GR_ENGINE_ACTIVE was not queried"},
		{desc: "whole and MIG both measured", pod: both, results: map[gpuutil.Query]gpuutil.Result{
			util: {Pods: map[gpuutil.PodKey][]gpuutil.GPU{key: gpus(1)}}, mig: {Pods: map[gpuutil.PodKey][]gpuutil.GPU{key: gpus(7)}}},
			want: decide.Idle{State: decide.IdleIdle, MaxPercent: 7, GPUs: 2}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got := decide.IdleFromMetrics(tc.pod, w, tc.results)
			if tc.detail != "" {
				require.Equal(t, decide.IdleUnknown, got.State)
				require.Contains(t, got.Detail, tc.detail)
				return
			}
			require.Equal(t, tc.want, got)
		})
	}
	require.Len(t, decide.Queries(both, w), 2)
}

func TestNext(t *testing.T) {
	idle := decide.Verdict{Findings: []decide.Finding{{Rule: decide.RuleIdle, Evidence: "GPU utilisation at most 1%"}}}
	unknown := decide.Verdict{Unknown: map[decide.Rule]string{decide.RuleIdle: "no metrics"}}
	noticed := func(mut ...func(*decide.Notice)) *decide.Notice {
		n := &decide.Notice{Rule: decide.RuleIdle, Evidence: "at most 1%", ClaimedAt: t0.Add(-31 * time.Minute), NoticedAt: t0.Add(-30 * time.Minute),
			Deadline: t0.Add(30 * time.Minute), Sent: true, Channel: "D1", TS: "1.2"}
		for _, m := range mut {
			m(n)
		}
		return n
	}
	past := func(n *decide.Notice) { n.Deadline = t0.Add(-time.Minute) }
	job := decide.Target{Kind: decide.TargetJob, Name: "train"}
	for _, tc := range []struct {
		desc     string
		in       decide.Input
		step     decide.Step
		state    decide.State
		why      string
		deadline time.Time
		requeue  time.Time
		problems int
	}{
		{desc: "healthy pod", in: decide.Input{}, step: decide.StepNone},
		{desc: "unknown pod is counted, not noticed", in: decide.Input{Verdict: unknown}, step: decide.StepNone, state: decide.StateUnknown},
		{desc: "candidate gets a notice with deadline now+grace", in: decide.Input{Verdict: idle, NotifierReady: true, Target: job},
			step: decide.StepNotify, state: decide.StateCandidate, deadline: t0.Add(time.Hour)},
		{desc: "no Slack and notice required: blocked", in: decide.Input{Verdict: idle, Target: job}, step: decide.StepNoticeBlocked, why: "requires a notice"},
		{desc: "no Slack, notice not required: recorded without message", in: decide.Input{Verdict: idle, Target: job,
			Reclaim: func() policies.Reclaim { r := rules(); r.RequireNotice = false; return r }()}, step: decide.StepNotify},
		{desc: "dry run without notify", in: decide.Input{Verdict: idle, NotifierReady: true, Target: job,
			Reclaim: func() policies.Reclaim { r := rules(); r.DryRun = true; return r }()}, step: decide.StepWouldNotify, why: "dry run: would notify"},
		{desc: "dry run with notify sends", in: decide.Input{Verdict: idle, NotifierReady: true, Target: job,
			Reclaim: func() policies.Reclaim { r := rules(); r.DryRun, r.DryRunNotify = true, true; return r }()}, step: decide.StepNotify},
		{desc: "unsupported owner: event only", in: decide.Input{Verdict: idle, NotifierReady: true, Target: decide.Target{Kind: decide.TargetUnsupported, OwnerKind: "RayCluster", Name: "r"}},
			step: decide.StepUnsupportedOwner, why: "RayCluster r is not one the janitor can stop"},
		{desc: "unsupported owner under deletePodsOfUnknownOwners", in: decide.Input{Verdict: idle, NotifierReady: true, PodName: "p",
			Target:  decide.Target{Kind: decide.TargetUnsupported, OwnerKind: "RayCluster", Name: "r"},
			Reclaim: func() policies.Reclaim { r := rules(); r.DeleteUnknownOwners = true; return r }()}, step: decide.StepNotify},
		{desc: "exempt pod without notice", in: decide.Input{Verdict: idle, Exempt: "opted out"}, step: decide.StepNone},
		{desc: "exempt pod with a notice is cancelled", in: decide.Input{Verdict: idle, Exempt: "opted out", Notice: noticed()}, step: decide.StepCancel, why: "exempt now"},
		{desc: "unreadable notice is reset", in: decide.Input{Verdict: idle, NoticeErr: errors.New("bad json")}, step: decide.StepReset},
		{desc: "claimed by another janitor recently: wait", in: decide.Input{Verdict: idle, Notice: &decide.Notice{Rule: decide.RuleIdle, ClaimedAt: t0.Add(-time.Minute), Claimer: "j2"}},
			step: decide.StepWait, requeue: t0.Add(2 * time.Minute)},
		{desc: "stale claim is sent again", in: decide.Input{Verdict: idle, NotifierReady: true, Notice: &decide.Notice{Rule: decide.RuleIdle, ClaimedAt: t0.Add(-4 * time.Minute), Claimer: "j2"}},
			step: decide.StepNotify, deadline: t0.Add(time.Hour), why: "never recorded as sent"},
		{desc: "stale claim under a policy now in dry run is not sent", in: decide.Input{Verdict: idle, NotifierReady: true, Target: job,
			Notice:  &decide.Notice{Rule: decide.RuleIdle, ClaimedAt: t0.Add(-4 * time.Minute), Claimer: "j2"},
			Reclaim: func() policies.Reclaim { r := rules(); r.DryRun = true; return r }()}, step: decide.StepWouldNotify},
		{desc: "stale claim whose rule ended is reset", in: decide.Input{Notice: &decide.Notice{Rule: decide.RuleIdle, ClaimedAt: t0.Add(-4 * time.Minute)}}, step: decide.StepReset},
		{desc: "noticed, in grace: wait until the deadline", in: decide.Input{Verdict: idle, Notice: noticed()}, step: decide.StepWait, state: decide.StateNoticed,
			requeue: t0.Add(30 * time.Minute), deadline: t0.Add(30 * time.Minute)},
		{desc: "busy during grace: cancelled, saying why", in: decide.Input{Verdict: decide.Verdict{Idle: decide.Idle{State: decide.IdleIdle, MaxPercent: 80, GPUs: 2}}, Notice: noticed()},
			step: decide.StepCancel, why: "rule Idle no longer holds: GPU utilisation reached 80% in the last 4h (threshold 5%)"},
		{desc: "unknown during grace: keep waiting", in: decide.Input{Verdict: unknown, Notice: noticed()}, step: decide.StepWait},
		{desc: "deadline passed, rule holds: reclaim", in: decide.Input{Verdict: idle, Notice: noticed(past), Target: job}, step: decide.StepReclaim, why: "delete Job train"},
		{desc: "deadline passed, unknown: never reclaim", in: decide.Input{Verdict: unknown, Notice: noticed(past), Target: job}, step: decide.StepWait, state: decide.StateUnknown, why: "cannot be checked"},
		{desc: "deadline passed in dry run", in: decide.Input{Verdict: idle, Notice: noticed(past, func(n *decide.Notice) { n.DryRun = true }), Target: job,
			Reclaim: func() policies.Reclaim { r := rules(); r.DryRun, r.DryRunNotify = true, true; return r }()}, step: decide.StepWouldReclaim},
		{desc: "dry run turned off after a dry-run notice: notice again", in: decide.Input{Verdict: idle, Notice: noticed(past, func(n *decide.Notice) { n.DryRun = true }), Target: job},
			step: decide.StepReset},
		{desc: "already reclaimed: nothing", in: decide.Input{Verdict: idle, Notice: noticed(past, func(n *decide.Notice) { n.ReclaimedAt = t0.Add(-time.Second) })},
			step: decide.StepNone, state: decide.StateReclaimed},
		{desc: "would-reclaimed in dry run, then dry run off: noticed again", in: decide.Input{Verdict: idle, Target: job,
			Notice: noticed(past, func(n *decide.Notice) { n.DryRun, n.ReclaimedAt = true, t0.Add(-time.Second) })}, step: decide.StepReset},
		{desc: "would-reclaimed in dry run, rule ended: cancelled", in: decide.Input{Verdict: decide.Verdict{}, Target: job,
			Notice:  noticed(past, func(n *decide.Notice) { n.DryRun, n.ReclaimedAt = true, t0.Add(-time.Second) }),
			Reclaim: func() policies.Reclaim { r := rules(); r.DryRun, r.DryRunNotify = true, true; return r }()}, step: decide.StepCancel},
		{desc: "would-reclaimed in dry run, still idle: nothing more", in: decide.Input{Verdict: idle, Target: job,
			Notice:  noticed(past, func(n *decide.Notice) { n.DryRun, n.ReclaimedAt = true, t0.Add(-time.Second) }),
			Reclaim: func() policies.Reclaim { r := rules(); r.DryRun, r.DryRunNotify = true, true; return r }()}, step: decide.StepNone, state: decide.StateReclaimed},
		{desc: "snooze is confirmed once", in: decide.Input{Verdict: idle, Notice: noticed(past), Snooze: "2026-11-25T18:00:00Z"},
			step: decide.StepConfirmSnooze, state: decide.StateSnoozed},
		{desc: "confirmed snooze holds", in: decide.Input{Verdict: idle, Notice: noticed(past, func(n *decide.Notice) { n.SnoozeAcked = "2026-11-25T18:00:00Z" }), Snooze: "2026-11-25T18:00:00Z"},
			step: decide.StepWait, state: decide.StateSnoozed, requeue: time.Date(2026, 11, 25, 18, 0, 0, 0, time.UTC)},
		{desc: "snooze capped at deadline + maxSnooze", in: decide.Input{Verdict: idle, Notice: noticed(past), Snooze: "2027-01-01"},
			step: decide.StepConfirmSnooze},
		{desc: "snooze over: judged afresh", in: decide.Input{Verdict: idle, Notice: noticed(past, func(n *decide.Notice) { n.SnoozeAcked = "2026-11-25T11:59:00Z" }), Snooze: "2026-11-25T11:59:00Z"},
			step: decide.StepSnoozeEnded},
		{desc: "bad snooze value is a problem and ignored", in: decide.Input{Verdict: idle, Notice: noticed(past), Snooze: "next week", Target: job},
			step: decide.StepReclaim, problems: 1},
		{desc: "unsent notice when a notice is now required: reset", in: decide.Input{Verdict: idle, Notice: noticed(func(n *decide.Notice) { n.Sent = false })}, step: decide.StepReset},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			tc.in.Now = t0
			if tc.in.Reclaim.GracePeriod == 0 {
				tc.in.Reclaim = rules()
			}
			d := decide.Next(tc.in)
			require.Equal(t, tc.step, d.Step, d.Why)
			if tc.state != "" {
				require.Equal(t, tc.state, d.State)
			}
			if tc.why != "" {
				require.Contains(t, d.Why, tc.why)
			}
			if !tc.deadline.IsZero() {
				require.Equal(t, tc.deadline, d.Deadline)
			}
			if !tc.requeue.IsZero() {
				require.Equal(t, tc.requeue, d.RequeueAt)
			}
			require.Len(t, d.Problems, tc.problems, "%v", d.Problems)
		})
	}
}

// TestTTLBeyondADuration: a TTL longer than a time.Duration holds (about
// 292 years) once wrapped around to a negative or arbitrary TTL, and a pod
// whose owner meant "keep it" was noticed and reclaimed. It is an invalid
// value: a problem that names the annotation (a Warning Event), and the pod
// is neither noticed nor reclaimed, whatever the notice's state.
func TestTTLBeyondADuration(t *testing.T) {
	job := decide.Target{Kind: decide.TargetJob, Name: "train"}
	for _, tc := range []struct {
		desc   string
		ttl    string
		notice *decide.Notice
	}{
		{desc: "wraps to a negative TTL", ttl: "107000w"},
		{desc: "one week too many", ttl: "15251w"},
		{desc: "one day too many", ttl: "106752d"},
		{desc: "one hour too many", ttl: "2562048h"},
		{desc: "one minute too many", ttl: "153722868m"},
		{desc: "nine digits of weeks", ttl: "999999999w"},
		{desc: "on a pod noticed before the fix, past its deadline", ttl: "107000w",
			notice: &decide.Notice{Rule: decide.RuleExpired, NoticedAt: t0.Add(-2 * time.Hour), Deadline: t0.Add(-time.Hour), Sent: true}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			p := runningPod(100 * time.Hour)
			p.Expiry = []decide.ExpirySource{{Object: "Deployment web", Created: p.Created, TTL: tc.ttl}}
			v := decide.Judge(p, rules(), decide.Idle{State: decide.IdleIdle, MaxPercent: 80, GPUs: 2}, t0)
			require.Empty(t, v.Findings)
			d := decide.Next(decide.Input{Now: t0, Reclaim: rules(), Verdict: v, Notice: tc.notice, NotifierReady: true, Target: job})
			require.NotEqual(t, decide.StepNotify, d.Step, d.Why)
			require.NotEqual(t, decide.StepReclaim, d.Step, d.Why)
			if tc.notice != nil {
				require.Equal(t, decide.StepCancel, d.Step, d.Why)
			} else {
				require.Equal(t, decide.StepNone, d.Step, d.Why)
			}
			require.Len(t, d.Problems, 1)
			require.Contains(t, d.Problems[0], "Deployment web annotation janitor/ttl: ")
			require.Contains(t, d.Problems[0], `"`+tc.ttl+`" is longer than a duration holds`)
		})
	}
}

func TestSnoozeCap(t *testing.T) {
	n := &decide.Notice{Rule: decide.RuleIdle, NoticedAt: t0.Add(-2 * time.Hour), Deadline: t0.Add(-time.Hour), Sent: true}
	d := decide.Next(decide.Input{Now: t0, Reclaim: rules(), Notice: n, Snooze: "2027-01-01",
		Verdict: decide.Verdict{Findings: []decide.Finding{{Rule: decide.RuleIdle}}}})
	require.True(t, d.SnoozeCapped)
	require.Equal(t, t0.Add(23*time.Hour), d.SnoozeUntil)
}

func TestNoticeRoundTrip(t *testing.T) {
	n := &decide.Notice{Rule: decide.RuleStuckPending, Evidence: "pending", ClaimedAt: t0, NoticedAt: t0, Deadline: t0.Add(time.Hour), Sent: true, Channel: "D1", TS: "1.2"}
	got, err := decide.ParseNotice(n.Encode())
	require.NoError(t, err)
	require.Equal(t, n, got)
	for _, bad := range []string{`{`, `{"rule":"Bogus","deadline":"2026-11-25T12:00:00Z"}`, `{"rule":"Idle"}`} {
		_, err := decide.ParseNotice(bad)
		require.Error(t, err, bad)
		require.True(t, strings.Contains(err.Error(), v1alpha1.AnnotationReclaimNotice), err.Error())
	}
	got, err = decide.ParseNotice(`{"rule":"Idle","deadline":"2026-11-25T12:00:00Z","fromANewerJanitor":1}`)
	require.NoError(t, err, "a newer janitor's fields are kept out of the way, not an error")
	require.True(t, got.Noticed())
	got, err = decide.ParseNotice("")
	require.NoError(t, err)
	require.Nil(t, got)
}

func TestParseTTLAndTime(t *testing.T) {
	for in, want := range map[string]time.Duration{"30s": 30 * time.Second, "5m": 5 * time.Minute, "24h": 24 * time.Hour, "7d": 7 * 24 * time.Hour, "2w": 14 * 24 * time.Hour} {
		d, ok, err := decide.ParseTTL(in)
		require.NoError(t, err, in)
		require.True(t, ok)
		require.Equal(t, want, d, in)
	}
	_, ok, err := decide.ParseTTL("forever")
	require.NoError(t, err)
	require.False(t, ok)
	for _, bad := range []string{"", "1.5h", "1h30m", "-1h", "10", "3 days", "1y", "1000000000s"} {
		_, _, err := decide.ParseTTL(bad)
		require.Error(t, err, bad)
	}
	for in, want := range map[string]time.Time{
		"2026-12-01T18:00:00Z":      time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC),
		"2026-12-01T18:00:00+01:00": time.Date(2026, 12, 1, 17, 0, 0, 0, time.UTC),
		"2026-12-01T18:00":          time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC),
		"2026-12-01":                time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
	} {
		got, err := decide.ParseTime(in)
		require.NoError(t, err, in)
		require.True(t, want.Equal(got), "%s: %s", in, got)
	}
	_, err = decide.ParseTime("tomorrow")
	require.ErrorContains(t, err, `"tomorrow" is not a time`)
}

func TestHuman(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "0s", 45 * time.Second: "45s", 90 * time.Minute: "1h30m", 4 * time.Hour: "4h",
		170 * time.Hour: "7d2h", 7*24*time.Hour + 3*time.Minute + 4*time.Second: "7d3m"} {
		require.Equal(t, want, decide.Human(d))
	}
}

// TestParseTTLBoundary: a TTL is the number times its unit, and a
// time.Duration holds at most math.MaxInt64 ns (about 292 years). The
// largest value of each unit that fits parses; one more is an error, never
// a wrapped value. Nine digits (the most the syntax takes) fit in seconds
// only.
func TestParseTTLBoundary(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration // 0: an error
	}{
		{in: "999999999s", want: 999999999 * time.Second},
		{in: "153722867m", want: 153722867 * time.Minute},
		{in: "153722868m"},
		{in: "999999999m"},
		{in: "2562047h", want: 2562047 * time.Hour},
		{in: "2562048h"},
		{in: "999999999h"},
		{in: "106751d", want: 106751 * 24 * time.Hour},
		{in: "106752d"},
		{in: "999999999d"},
		{in: "15250w", want: 15250 * 7 * 24 * time.Hour},
		{in: "15251w"},
		{in: "107000w"},
		{in: "999999999w"},
		{in: "000015250w", want: 15250 * 7 * 24 * time.Hour},
		{in: "0s", want: 0},
	} {
		t.Run(tc.in, func(t *testing.T) {
			d, ok, err := decide.ParseTTL(tc.in)
			if tc.want == 0 && tc.in != "0s" {
				require.ErrorContains(t, err, fmt.Sprintf("%q is longer than a duration holds", tc.in))
				require.False(t, ok)
				require.Zero(t, d)
				return
			}
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, tc.want, d)
		})
	}
}
