package decide_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/janitor/decide"
)

func TestKeepButtons(t *testing.T) {
	for _, tc := range []struct {
		desc   string
		max    time.Duration
		want   []time.Duration
		capped time.Duration // the capped button's duration, 0 for none
		labels []string
	}{
		{desc: "default 24h: both", max: 24 * time.Hour, want: []time.Duration{4 * time.Hour, 24 * time.Hour}, labels: []string{"Keep 4 h", "Keep 24 h"}},
		{desc: "longer cap: both, none capped", max: 72 * time.Hour, want: []time.Duration{4 * time.Hour, 24 * time.Hour}},
		{desc: "8h: 24 h replaced by the cap", max: 8 * time.Hour, want: []time.Duration{4 * time.Hour, 8 * time.Hour}, capped: 8 * time.Hour, labels: []string{"Keep 4 h", "Keep 8 h"}},
		{desc: "exactly 4h: one button, no duplicate", max: 4 * time.Hour, want: []time.Duration{4 * time.Hour}},
		{desc: "90m: one capped button", max: 90 * time.Minute, want: []time.Duration{90 * time.Minute}, capped: 90 * time.Minute, labels: []string{"Keep 90 min"}},
		{desc: "no snooze allowed: no button", max: 0},
		{desc: "4h30s: no second button in the same minute (equal action_ids)", max: 4*time.Hour + 30*time.Second, want: []time.Duration{4 * time.Hour}},
		{desc: "4h1m: a button for the cap", max: 4*time.Hour + time.Minute, want: []time.Duration{4 * time.Hour, 4*time.Hour + time.Minute}, capped: 4*time.Hour + time.Minute},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got := decide.KeepButtons(tc.max)
			var ds []time.Duration
			var labels []string
			ids := map[string]bool{}
			for _, b := range got {
				id := decide.Button{Action: decide.ActionKeep, Keep: b.Keep}.ActionID()
				require.False(t, ids[id], "action_id %s twice: Slack refuses the message", id)
				ids[id] = true
				ds = append(ds, b.Keep)
				labels = append(labels, decide.ButtonLabel(b.Keep))
				require.LessOrEqual(t, b.Keep, tc.max, "never beyond maxSnooze")
				require.Equal(t, tc.capped != 0 && b.Keep == tc.capped, b.Capped)
			}
			require.Equal(t, tc.want, ds)
			if tc.labels != nil {
				require.Equal(t, tc.labels, labels)
			}
		})
	}
}

func TestButtonRoundTrip(t *testing.T) {
	b := decide.Button{Action: decide.ActionRestore, Namespace: strings.Repeat("n", 63), Pod: strings.Repeat("p", 253), UID: "0b7c1e9e-3f2a-4c1d-9e8f-123456789abc",
		TargetKind: decide.TargetDeployment, TargetName: strings.Repeat("d", 253), TargetUID: "1b7c1e9e-3f2a-4c1d-9e8f-123456789abc", TargetAPIVersion: "kubeflow.org/v1"}
	v := b.Encode()
	require.LessOrEqual(t, len(v), decide.MaxButtonValue, "the longest names fit Slack's limit")
	got, err := decide.ParseButton(v)
	require.NoError(t, err)
	require.Equal(t, b, got)
	require.Equal(t, "kubemedic-keep-240m", decide.Button{Action: decide.ActionKeep, Keep: 4 * time.Hour}.ActionID())

	for _, bad := range []string{
		`{"a":"delete","ns":"a","p":"b","u":"c"}`,
		`{"a":"keep","ns":"a","p":"b","u":"c"}`,
		`{"a":"reclaim","ns":"a","p":"b"}`,
		`{"a":"restore","ns":"a","p":"b","u":"c"}`,
		`not json`,
		strings.Repeat("x", decide.MaxButtonValue+1),
	} {
		_, err := decide.ParseButton(bad)
		require.Error(t, err, bad)
	}
}

func TestDecidePress(t *testing.T) {
	keep4 := decide.Button{Action: decide.ActionKeep, Namespace: "team", Pod: "nb-0", UID: "u1", Keep: 4 * time.Hour}
	keep24 := keep4
	keep24.Keep = 24 * time.Hour
	now := decide.Button{Action: decide.ActionReclaimNow, Namespace: "team", Pod: "nb-0", UID: "u1"}
	noticed := func(mut ...func(*decide.Notice)) *decide.Notice {
		n := &decide.Notice{Rule: decide.RuleIdle, ClaimedAt: t0.Add(-31 * time.Minute), NoticedAt: t0.Add(-30 * time.Minute),
			Deadline: t0.Add(30 * time.Minute), Sent: true, Channel: "D1", TS: "1.2"}
		for _, m := range mut {
			m(n)
		}
		return n
	}
	ok := func(b decide.Button, mut ...func(*decide.PressInput)) decide.PressInput {
		in := decide.PressInput{Now: t0, Button: b, Found: true, UID: "u1", Owner: decide.OwnerCheck{Match: true}, Notice: noticed(), MaxSnooze: 24 * time.Hour}
		for _, m := range mut {
			m(&in)
		}
		return in
	}
	for _, tc := range []struct {
		desc    string
		in      decide.PressInput
		outcome decide.PressOutcome
		result  string
		until   time.Time
		capped  bool
		answer  string
	}{
		{desc: "keep 4 h from the press", in: ok(keep4), outcome: decide.PressKeep, result: decide.ResultDone, until: t0.Add(4 * time.Hour)},
		{desc: "keep 24 h within the cap (deadline + 24h)", in: ok(keep24), outcome: decide.PressKeep, until: t0.Add(24 * time.Hour), result: decide.ResultDone},
		{desc: "keep 24 h pressed while snoozed past the deadline is capped", in: ok(keep24, func(in *decide.PressInput) { in.Now = t0.Add(5 * time.Hour) }),
			outcome: decide.PressKeep, result: decide.ResultDone, until: t0.Add(30*time.Minute + 24*time.Hour), capped: true},
		{desc: "keep under a smaller cap is capped", in: ok(keep24, func(in *decide.PressInput) { in.MaxSnooze = 8 * time.Hour }),
			outcome: decide.PressKeep, result: decide.ResultDone, until: t0.Add(8*time.Hour + 30*time.Minute), capped: true},
		{desc: "keep after the cap has passed: nothing", in: ok(keep4, func(in *decide.PressInput) { in.Now = t0.Add(25 * time.Hour) }),
			outcome: decide.PressRefused, result: decide.ResultNotAllowed, answer: "cannot be kept longer"},
		{desc: "keep where the policy allows no snooze", in: ok(keep4, func(in *decide.PressInput) { in.MaxSnooze = 0 }),
			outcome: decide.PressRefused, result: decide.ResultNotAllowed, answer: "allow no snooze"},
		{desc: "reclaim now", in: ok(now), outcome: decide.PressReclaim, result: decide.ResultDone},
		{desc: "reclaim now twice", in: ok(now, func(in *decide.PressInput) { in.Notice.ReclaimRequestedAt = t0.Add(-time.Minute) }),
			outcome: decide.PressRefused, result: decide.ResultDone, answer: "already asked for"},
		{desc: "keep after reclaim now was asked", in: ok(keep4, func(in *decide.PressInput) { in.Notice.ReclaimRequestedAt = t0.Add(-time.Minute) }),
			outcome: decide.PressRefused, result: decide.ResultNotAllowed, answer: "can no longer be kept"},
		{desc: "pod gone", in: ok(keep4, func(in *decide.PressInput) { in.Found, in.UID, in.Notice = false, "", nil }),
			outcome: decide.PressRefused, result: decide.ResultGone, answer: "team/nb-0 no longer exists"},
		{desc: "pod terminating after a reclaim", in: ok(now, func(in *decide.PressInput) { in.Terminating = true }),
			outcome: decide.PressRefused, result: decide.ResultGone, answer: "is gone"},
		{desc: "pod recreated under the same name", in: ok(keep4, func(in *decide.PressInput) { in.UID = "u2" }),
			outcome: decide.PressRefused, result: decide.ResultRecreated, answer: "was recreated"},
		{desc: "recreated is told before not-owner", in: ok(keep4, func(in *decide.PressInput) { in.UID, in.Owner.Match = "u2", false }),
			outcome: decide.PressRefused, result: decide.ResultRecreated},
		{desc: "not the owner, whose user ID is known: mentioned", in: ok(keep4, func(in *decide.PressInput) {
			in.Owner = decide.OwnerCheck{UserID: "U0ALICE001", Source: "namespace annotation kubemedic.io/owner"}
		}),
			outcome: decide.PressRefused, result: decide.ResultNotOwner, answer: "Only the pod's owner (<@U0ALICE001>) can keep team/nb-0. Nothing was done. Ask them to press it, or use kubectl if you have access."},
		{desc: "not the owner, who is not on Slack: where the owner is recorded", in: ok(now, func(in *decide.PressInput) {
			in.Owner = decide.OwnerCheck{Source: "pod annotation kubemedic.io/owner", Note: "that owner is not found on Slack"}
		}),
			outcome: decide.PressRefused, result: decide.ResultNotOwner, answer: "Only the pod's owner, as recorded in pod annotation kubemedic.io/owner, can reclaim team/nb-0 now (that owner is not found on Slack). Nothing was done. Ask the owner"},
		{desc: "no owner recorded", in: ok(keep4, func(in *decide.PressInput) { in.Owner = decide.OwnerCheck{} }),
			outcome: decide.PressRefused, result: decide.ResultNotOwner, answer: "no owner is recorded. Nothing was done. Use kubectl"},
		{desc: "owner not checked (Slack failed): failed, try again", in: ok(keep4, func(in *decide.PressInput) {
			in.Owner = decide.OwnerCheck{Source: "namespace annotation kubemedic.io/owner", Failed: true}
		}),
			outcome: decide.PressRefused, result: decide.ResultFailed, answer: "could not check that you are the pod's owner, who alone can keep team/nb-0: Slack's user lookup failed (a rate limit, an outage or the network). Nothing was done. Press again in a minute"},
		{desc: "not the owner of a reclaimed pod learns nothing more", in: ok(now, func(in *decide.PressInput) { in.Owner.Match = false; in.Notice.ReclaimedAt = t0 }),
			outcome: decide.PressRefused, result: decide.ResultNotOwner},
		{desc: "no notice any more (cancelled)", in: ok(keep4, func(in *decide.PressInput) { in.Notice = nil }),
			outcome: decide.PressRefused, result: decide.ResultNoNotice, answer: "No reclaim"},
		{desc: "unreadable notice", in: ok(keep4, func(in *decide.PressInput) { in.NoticeErr = errors.New("bad") }),
			outcome: decide.PressRefused, result: decide.ResultNoNotice},
		{desc: "claimed, not yet sent", in: ok(keep4, func(in *decide.PressInput) { in.Notice.Deadline = time.Time{} }),
			outcome: decide.PressRefused, result: decide.ResultNoNotice},
		{desc: "already reclaimed, pod still there", in: ok(keep4, func(in *decide.PressInput) { in.Notice.ReclaimedAt = t0.Add(-time.Minute) }),
			outcome: decide.PressRefused, result: decide.ResultReclaimed, answer: "already reclaimed at 2026-11-25T11:59:00Z"},
		{desc: "dry run over", in: ok(keep4, func(in *decide.PressInput) { in.Notice.ReclaimedAt, in.Notice.DryRun = t0, true }),
			outcome: decide.PressRefused, result: decide.ResultReclaimed, answer: "dry run"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			d := decide.DecidePress(tc.in)
			require.Equal(t, tc.outcome, d.Outcome, d.Answer)
			if tc.result != "" {
				require.Equal(t, tc.result, d.Result)
			}
			require.Equal(t, tc.until, d.SnoozeUntil)
			require.Equal(t, tc.capped, d.Capped)
			require.Contains(t, d.Answer, tc.answer)
			if d.Outcome == decide.PressRefused {
				require.NotEmpty(t, d.Answer, "a refusal says why")
			}
		})
	}
}

func TestDecideRestore(t *testing.T) {
	b := decide.Button{Action: decide.ActionRestore, Namespace: "team", Pod: "nb-0", UID: "u1", TargetKind: decide.TargetDeployment, TargetName: "web", TargetUID: "d1"}
	nb := b
	nb.TargetKind = decide.TargetNotebook
	in := func(b decide.Button, mut ...func(*decide.RestoreInput)) decide.RestoreInput {
		r := decide.RestoreInput{Button: b, Found: true, UID: "d1", Owner: decide.OwnerCheck{Match: true}, Replicas: "3"}
		for _, m := range mut {
			m(&r)
		}
		return r
	}
	for _, tc := range []struct {
		desc     string
		in       decide.RestoreInput
		outcome  decide.PressOutcome
		result   string
		replicas int32
		answer   string
	}{
		{desc: "scale back to the recorded count", in: in(b), outcome: decide.PressRestore, result: decide.ResultDone, replicas: 3},
		{desc: "gone", in: in(b, func(r *decide.RestoreInput) { r.Found = false }), outcome: decide.PressRefused, result: decide.ResultGone, answer: "no longer exists"},
		{desc: "recreated", in: in(b, func(r *decide.RestoreInput) { r.UID = "d2" }), outcome: decide.PressRefused, result: decide.ResultRecreated, answer: "recreated"},
		{desc: "not the owner", in: in(b, func(r *decide.RestoreInput) { r.Owner = decide.OwnerCheck{UserID: "U0ALICE001"} }), outcome: decide.PressRefused, result: decide.ResultNotOwner,
			answer: "Only the pod's owner (<@U0ALICE001>) can restore Deployment team/web. Nothing was done."},
		{desc: "owner not checked (Slack failed)", in: in(b, func(r *decide.RestoreInput) { r.Owner = decide.OwnerCheck{Failed: true} }), outcome: decide.PressRefused, result: decide.ResultFailed,
			answer: "Press again in a minute"},
		{desc: "restored already", in: in(b, func(r *decide.RestoreInput) { r.Replicas = "" }), outcome: decide.PressRefused, result: decide.ResultNoNotice, answer: "restored already"},
		{desc: "scaled by someone else", in: in(b, func(r *decide.RestoreInput) { r.Current = 2 }), outcome: decide.PressRefused, result: decide.ResultNoNotice, answer: "runs 2 replicas"},
		{desc: "bad recorded count", in: in(b, func(r *decide.RestoreInput) { r.Replicas = "lots" }), outcome: decide.PressRefused, result: decide.ResultFailed, answer: "kubectl scale"},
		{desc: "notebook stopped by the janitor", in: in(nb, func(r *decide.RestoreInput) { r.Replicas, r.Stopped, r.ReclaimedBy = "", true, "janitor" }),
			outcome: decide.PressRestore, result: decide.ResultDone},
		{desc: "notebook started already", in: in(nb, func(r *decide.RestoreInput) { r.Stopped, r.ReclaimedBy = false, "janitor" }),
			outcome: decide.PressRefused, result: decide.ResultNoNotice},
		{desc: "notebook stopped by someone else", in: in(nb, func(r *decide.RestoreInput) { r.Stopped = true }),
			outcome: decide.PressRefused, result: decide.ResultNoNotice},
		{desc: "a Job cannot be restored", in: in(func() decide.Button { j := b; j.TargetKind = decide.TargetJob; return j }()),
			outcome: decide.PressRefused, result: decide.ResultNotAllowed, answer: "submit it again"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			d := decide.DecideRestore(tc.in)
			require.Equal(t, tc.outcome, d.Outcome, d.Answer)
			require.Equal(t, tc.result, d.Result)
			require.Equal(t, tc.replicas, d.Replicas)
			require.Contains(t, d.Answer, tc.answer)
		})
	}
}

func TestNextReclaimRequested(t *testing.T) {
	idle := decide.Verdict{Findings: []decide.Finding{{Rule: decide.RuleIdle, Evidence: "GPU utilisation at most 1%"}}}
	busy := decide.Verdict{}
	requested := func() *decide.Notice {
		return &decide.Notice{Rule: decide.RuleIdle, ClaimedAt: t0.Add(-31 * time.Minute), NoticedAt: t0.Add(-30 * time.Minute),
			Deadline: t0.Add(30 * time.Minute), Sent: true, Channel: "D1", TS: "1.2", ReclaimRequestedAt: t0.Add(-time.Second), ReclaimRequestedBy: "U1"}
	}
	sts := decide.Target{Kind: decide.TargetStatefulSet, Name: "nb", UID: "s1"}
	dry := rules()
	dry.DryRun, dry.DryRunNotify = true, true
	for _, tc := range []struct {
		desc string
		in   decide.Input
		step decide.Step
	}{
		{desc: "before the deadline", in: decide.Input{Verdict: idle, Notice: requested(), Target: sts, Reclaim: rules()}, step: decide.StepReclaim},
		{desc: "even if the rule no longer holds", in: decide.Input{Verdict: busy, Notice: requested(), Target: sts, Reclaim: rules()}, step: decide.StepReclaim},
		{desc: "even if snoozed", in: decide.Input{Verdict: idle, Notice: requested(), Target: sts, Reclaim: rules(), Snooze: t0.Add(3 * time.Hour).Format(time.RFC3339)}, step: decide.StepReclaim},
		{desc: "dry run: would reclaim", in: decide.Input{Verdict: idle, Notice: func() *decide.Notice { n := requested(); n.DryRun = true; return n }(), Target: sts, Reclaim: dry}, step: decide.StepWouldReclaim},
		{desc: "exempt now: cancelled", in: decide.Input{Verdict: idle, Notice: requested(), Target: sts, Reclaim: rules(), Exempt: "opted out"}, step: decide.StepCancel},
		{desc: "reclaimed already: nothing", in: decide.Input{Verdict: idle, Notice: func() *decide.Notice { n := requested(); n.ReclaimedAt = t0; return n }(), Target: sts, Reclaim: rules()}, step: decide.StepNone},
		{desc: "unsupported owner", in: decide.Input{Verdict: idle, Notice: requested(), Target: decide.Target{Kind: decide.TargetUnsupported, OwnerKind: "RayCluster"}, Reclaim: rules()}, step: decide.StepUnsupportedOwner},
		{desc: "without a request the deadline holds", in: decide.Input{Verdict: idle, Notice: func() *decide.Notice { n := requested(); n.ReclaimRequestedAt = time.Time{}; return n }(), Target: sts, Reclaim: rules()}, step: decide.StepWait},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			tc.in.Now = t0
			d := decide.Next(tc.in)
			require.Equal(t, tc.step, d.Step, d.Why)
			if tc.step == decide.StepReclaim {
				require.Contains(t, d.Evidence, "U1 asked to reclaim it now")
			}
		})
	}
}
