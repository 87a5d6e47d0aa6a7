package decide

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/kubemedic/kubemedic/alertbridge/marker"
)

func TestFollowRendered(t *testing.T) {
	const (
		detected    = "[critical] Node gpu-7: GPUXidError — detected"
		repairing   = "[critical] Node gpu-7: GPUXidError — repairing"
		quarantined = "[critical] Node gpu-7: GPUXidError — quarantined"
		personal    = "gpu-7: GPU 3 needs an RMA (alice)"
	)
	d := marker.TitleDigest
	labels := func(phase string, more ...string) []string {
		return append([]string{"incident:" + phase, "kubemedic-alert", "severity:critical"}, more...)
	}
	tests := []struct {
		desc  string
		shown Shown
		owned Owned
		next  Rendered
		want  Follow
	}{
		{
			desc:  "nothing rendered changed: nothing to do, the record stays",
			shown: Shown{Title: repairing, Labels: labels("repairing")},
			owned: Owned{TitleDigest: d(repairing), Labels: labels("repairing")},
			next:  Rendered{Title: repairing, Labels: labels("repairing")},
			want:  Follow{Record: Owned{TitleDigest: d(repairing), Labels: labels("repairing")}},
		},
		{
			desc:  "the phase changes: retitled, the old phase label swapped for the new one",
			shown: Shown{Title: repairing, Labels: labels("repairing")},
			owned: Owned{TitleDigest: d(repairing), Labels: labels("repairing")},
			next:  Rendered{Title: quarantined, Labels: labels("quarantined")},
			want: Follow{Title: quarantined, Labels: []string{"kubemedic-alert", "severity:critical", "incident:quarantined"},
				Add: []string{"incident:quarantined"}, Remove: []string{"incident:repairing"},
				Record: Owned{TitleDigest: d(quarantined), Labels: labels("quarantined")}},
		},
		{
			desc:  "a title a person changed stays theirs; the labels still follow",
			shown: Shown{Title: personal, Labels: labels("repairing")},
			owned: Owned{TitleDigest: d(repairing), Labels: labels("repairing")},
			next:  Rendered{Title: quarantined, Labels: labels("quarantined")},
			want: Follow{Labels: []string{"kubemedic-alert", "severity:critical", "incident:quarantined"},
				Add: []string{"incident:quarantined"}, Remove: []string{"incident:repairing"},
				Record: Owned{TitleDigest: d(repairing), Labels: labels("quarantined")},
				Why:    "title not changed: a person changed it"},
		},
		{
			desc:  "a person's title stays theirs at every later change too",
			shown: Shown{Title: personal, Labels: labels("quarantined")},
			owned: Owned{TitleDigest: d(repairing), Labels: labels("quarantined")},
			next:  Rendered{Title: detected, Labels: labels("quarantined")},
			want:  Follow{Record: Owned{TitleDigest: d(repairing), Labels: labels("quarantined")}, Why: "title not changed: a person changed it"},
		},
		{
			desc:  "a person who sets the rendered title back gives it back to the bridge",
			shown: Shown{Title: quarantined, Labels: labels("quarantined")},
			owned: Owned{TitleDigest: d(repairing), Labels: labels("quarantined")},
			next:  Rendered{Title: quarantined, Labels: labels("quarantined")},
			want:  Follow{Record: Owned{TitleDigest: d(quarantined), Labels: labels("quarantined")}},
		},
		{
			desc:  "people's labels are kept, in their order, when the bridge's change",
			shown: Shown{Title: repairing, Labels: []string{"hardware", "incident:repairing", "kubemedic-alert", "severity:critical", "rma"}},
			owned: Owned{TitleDigest: d(repairing), Labels: labels("repairing")},
			next:  Rendered{Title: quarantined, Labels: labels("quarantined")},
			want: Follow{Title: quarantined, Labels: []string{"hardware", "kubemedic-alert", "severity:critical", "rma", "incident:quarantined"},
				Add: []string{"incident:quarantined"}, Remove: []string{"incident:repairing"},
				Record: Owned{TitleDigest: d(quarantined), Labels: labels("quarantined")}},
		},
		{
			desc:  "a rendered label a person removed is never put back while it is still rendered",
			shown: Shown{Title: repairing, Labels: []string{"incident:repairing", "kubemedic-alert"}},
			owned: Owned{TitleDigest: d(repairing), Labels: labels("repairing")},
			next:  Rendered{Title: quarantined, Labels: labels("quarantined")},
			want: Follow{Title: quarantined, Labels: []string{"kubemedic-alert", "incident:quarantined"},
				Add: []string{"incident:quarantined"}, Remove: []string{"incident:repairing"},
				Record: Owned{TitleDigest: d(quarantined), Labels: labels("quarantined")}},
		},
		{
			desc:  "a label no longer rendered that a person already removed: nothing to remove",
			shown: Shown{Title: repairing, Labels: []string{"kubemedic-alert", "severity:critical"}},
			owned: Owned{TitleDigest: d(repairing), Labels: labels("repairing")},
			next:  Rendered{Title: repairing, Labels: []string{"kubemedic-alert", "severity:critical"}},
			want:  Follow{Record: Owned{TitleDigest: d(repairing), Labels: []string{"kubemedic-alert", "severity:critical"}}},
		},
		{
			desc:  "a newly rendered label a person already put on is not added twice",
			shown: Shown{Title: repairing, Labels: []string{"Incident:Quarantined", "incident:repairing", "kubemedic-alert", "severity:critical"}},
			owned: Owned{TitleDigest: d(repairing), Labels: labels("repairing")},
			next:  Rendered{Title: repairing, Labels: labels("quarantined")},
			want: Follow{Labels: []string{"Incident:Quarantined", "kubemedic-alert", "severity:critical"}, Remove: []string{"incident:repairing"},
				Record: Owned{TitleDigest: d(repairing), Labels: labels("quarantined")}},
		},
		{
			desc:  "label names compare case-insensitively, as on GitHub",
			shown: Shown{Title: repairing, Labels: []string{"INCIDENT:REPAIRING", "kubemedic-alert", "severity:critical"}},
			owned: Owned{TitleDigest: d(repairing), Labels: labels("repairing")},
			next:  Rendered{Title: repairing, Labels: []string{"incident:Repairing", "kubemedic-alert", "severity:critical"}},
			want:  Follow{Record: Owned{TitleDigest: d(repairing), Labels: []string{"incident:Repairing", "kubemedic-alert", "severity:critical"}}},
		},
		{
			desc:  "an issue with no record (filed before titles and labels followed) changes neither, and records what is rendered",
			shown: Shown{Title: "[critical] KubemedicGPUXidError on gpu-7", Labels: []string{"kubemedic-alert", "severity:critical"}},
			next:  Rendered{Title: quarantined, Labels: labels("quarantined")},
			want: Follow{Record: Owned{Labels: labels("quarantined")},
				Why: "title not changed: the issue has no record of the title the bridge set"},
		},
		{
			desc:  "after that first record, its labels follow",
			shown: Shown{Title: "[critical] KubemedicGPUXidError on gpu-7", Labels: []string{"kubemedic-alert", "severity:critical"}},
			owned: Owned{Labels: labels("quarantined")},
			next:  Rendered{Title: detected, Labels: labels("detected")},
			want: Follow{Labels: []string{"kubemedic-alert", "severity:critical", "incident:detected"}, Add: []string{"incident:detected"},
				Record: Owned{Labels: labels("detected")}, Why: "title not changed: the issue has no record of the title the bridge set"},
		},
		{
			desc:  "an issue with no record whose title is the rendered one: the title becomes the bridge's",
			shown: Shown{Title: repairing, Labels: labels("repairing")},
			next:  Rendered{Title: repairing, Labels: labels("repairing")},
			want:  Follow{Record: Owned{TitleDigest: d(repairing), Labels: labels("repairing")}},
		},
		{
			desc:  "the last rendered label removed leaves an empty set, sent as such",
			shown: Shown{Title: repairing, Labels: []string{"incident:repairing"}},
			owned: Owned{TitleDigest: d(repairing), Labels: []string{"incident:repairing"}},
			next:  Rendered{Title: repairing, Labels: []string{"kubemedic-alert"}},
			want: Follow{Labels: []string{"kubemedic-alert"}, Add: []string{"kubemedic-alert"}, Remove: []string{"incident:repairing"},
				Record: Owned{TitleDigest: d(repairing), Labels: []string{"kubemedic-alert"}}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			got := FollowRendered(tc.shown, tc.owned, tc.next)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.want.Title != "" || tc.want.Labels != nil, got.Changes())
		})
	}
}

func TestRelabelled(t *testing.T) {
	tests := []struct {
		desc          string
		before, after []string
		want          string
	}{
		{desc: "a phase change", before: []string{"incident:repairing", "kubemedic-alert"}, after: []string{"incident:quarantined", "kubemedic-alert"},
			want: "Incident now quarantined (was repairing)."},
		{desc: "two changes, in the order rendered", before: []string{"incident:detected", "severity:warning"}, after: []string{"incident:repairing", "severity:critical"},
			want: "Incident now repairing (was detected). Severity now critical (was warning)."},
		{desc: "no change", before: []string{"incident:repairing"}, after: []string{"incident:repairing"}},
		{desc: "a label that appears without a previous value is not a change of value", before: []string{"kubemedic-alert"}, after: []string{"incident:detected", "kubemedic-alert"}},
		{desc: "labels without a colon are not name:value", before: []string{"storage"}, after: []string{"network"}},
		{desc: "before unknown: nothing said", after: []string{"incident:quarantined"}},
		{desc: "case alone is no change", before: []string{"incident:Repairing"}, after: []string{"incident:repairing"}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			assert.Equal(t, tc.want, Relabelled(tc.before, tc.after))
		})
	}
}
