package controller

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/internal/notify"
	"github.com/kubemedic/kubemedic/internal/notify/notifytest"
	"github.com/kubemedic/kubemedic/janitor/decide"
	"github.com/kubemedic/kubemedic/policies"
)

// TestMessageButtons posts the janitor's messages to the Slack stand-in,
// which refuses blocks beyond Slack's limits, and reads the buttons back.
func TestMessageButtons(t *testing.T) {
	s := notifytest.New(t)
	s.AddChannel("C0000001", "gpu")
	slack := notify.NewSlack(notifytest.Token, notify.SlackOptions{APIURL: s.URL()})
	post := func(m notify.Message) notifytest.Posted {
		t.Helper()
		_, err := slack.Post(t.Context(), notify.Recipient{Channel: "C0000001"}, nil, m)
		require.NoError(t, err)
		msgs := s.Messages()
		return msgs[len(msgs)-1]
	}
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	pod := gpuPod(nil)
	pod.Name, pod.UID = strings.Repeat("p", 253), "0b7c1e9e-3f2a-4c1d-9e8f-123456789abc"
	sts := decide.Target{Kind: decide.TargetStatefulSet, Name: strings.Repeat("s", 253), UID: "1b7c1e9e-3f2a-4c1d-9e8f-123456789abc"}
	d := decide.Decision{Rule: decide.RuleIdle, Evidence: "GPU utilisation at most 2%", Target: sts, Deadline: now.Add(time.Hour)}
	for _, tc := range []struct {
		desc   string
		max    time.Duration
		labels []string
		says   string
	}{
		{desc: "default cap", max: 24 * time.Hour, labels: []string{"Keep 4 h", "Keep 24 h", "Reclaim now"}, says: "at most 1d after the deadline"},
		{desc: "8h cap: 24 h is replaced by 8 h", max: 8 * time.Hour, labels: []string{"Keep 4 h", "Keep 8 h", "Reclaim now"}, says: "at most 8h after the deadline"},
		{desc: "no snooze: only Reclaim now", max: 0, labels: []string{"Reclaim now"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			pp := &PodPlan{Pod: pod, Rules: policies.Reclaim{GracePeriod: time.Hour, MaxSnooze: tc.max, Policies: []string{"ClusterReclaimPolicy/p"}}}
			p := post(noticeMessage(pp, d, false, true))
			var labels []string
			for _, b := range p.Buttons() {
				labels = append(labels, b.Text)
				got, err := decide.ParseButton(b.Value)
				require.NoError(t, err)
				require.Equal(t, b.ActionID, got.ActionID())
				require.Equal(t, pod.UID, got.UID)
				require.Equal(t, pod.Name, got.Pod)
				require.LessOrEqual(t, got.Keep, tc.max)
			}
			require.Equal(t, tc.labels, labels)
			require.Contains(t, string(p.Blocks), tc.says)
			require.Contains(t, p.Text, "kubectl annotate pod", "the kubectl way stays")

			plain := post(noticeMessage(pp, d, false, false))
			require.Empty(t, plain.Buttons(), "no signing secret: no buttons")
			require.NotContains(t, plain.Text, "press a button")
		})
	}

	// A dry run's "Reclaim now" says, before and after, that nothing stops.
	dry := &PodPlan{Pod: pod, Rules: policies.Reclaim{GracePeriod: time.Hour, MaxSnooze: 24 * time.Hour, DryRun: true}}
	require.Contains(t, string(post(noticeMessage(dry, d, true, true)).Blocks), "The policy is a dry run: the janitor will only say that it would")
	live := &PodPlan{Pod: pod, Rules: policies.Reclaim{GracePeriod: time.Hour, MaxSnooze: 24 * time.Hour}}
	require.Contains(t, string(post(noticeMessage(live, d, false, true)).Blocks), "\"This will scale StatefulSet ")
	dry.Notice = &decide.Notice{ReclaimRequestedAt: now, ReclaimRequestedBy: "U0ALICE001"}
	asked := d
	asked.Evidence = "U0ALICE001 asked to reclaim it now, at 2026-11-25T12:00:00Z"
	require.Contains(t, wouldReclaimText(dry, asked), "Dry run: reclaiming team/"+pod.Name+" now was asked for (U0ALICE001 asked")
	require.NotContains(t, wouldReclaimText(dry, asked), "grace period")

	pp := &PodPlan{Pod: pod, Rules: policies.Reclaim{GracePeriod: time.Hour, MaxSnooze: 24 * time.Hour}}
	p := post(reclaimedMessage(pp, d, reclaimedText(pp, d, "scaled"), true))
	b, ok := p.Button("Restore")
	require.True(t, ok, "a scaled StatefulSet can be restored")
	got, err := decide.ParseButton(b.Value)
	require.NoError(t, err)
	require.Equal(t, sts.UID, got.TargetUID)
	require.Equal(t, sts.Name, got.TargetName)
	job := decide.Decision{Rule: decide.RuleIdle, Target: decide.Target{Kind: decide.TargetJob, Name: "j", UID: "x"}}
	require.Empty(t, post(reclaimedMessage(pp, job, reclaimedText(pp, job, "deleted"), true)).Buttons(), "a deleted Job cannot be restored")
	require.Empty(t, post(reclaimedMessage(pp, d, reclaimedText(pp, d, "scaled"), false)).Buttons())
}
