package render_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/alertbridge/config"
	"github.com/kubemedic/kubemedic/alertbridge/marker"
	"github.com/kubemedic/kubemedic/alertbridge/render"
)

var (
	stormStart = time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	guard      = config.StormGuard{MaxNewIssues: 2, Window: 10 * time.Minute}
)

func minute(n int) time.Time { return stormStart.Add(time.Duration(n) * time.Minute) }

func TestRollupBody(t *testing.T) {
	tableRows := func(body string) []string {
		var rows []string
		for _, l := range strings.Split(body, "\n") {
			if strings.HasPrefix(l, "| ") && !strings.HasPrefix(l, "| Alert group |") {
				rows = append(rows, l)
			}
		}
		return rows
	}
	members := func(n int) []marker.Member {
		out := make([]marker.Member, n)
		for i := range out {
			out[i] = marker.Member{Key: fmt.Sprint("k", i), Title: fmt.Sprintf("group %03d", i), Firing: i % 2, Since: minute(i)}
		}
		return out
	}

	tests := []struct {
		desc     string
		members  []marker.Member
		wantRows int
		wantMore string
		contains []string
	}{
		{desc: "no members", members: nil, wantRows: 0, contains: []string{"**Firing: 0 · Resolved: 0**"}},
		{desc: "a few members, firing ones first", members: members(3), wantRows: 3, contains: []string{
			"## Alert storm in acme/gpu-oncall", "These 3 alert groups", "**Firing: 1 · Resolved: 2**",
			"|---|---|---|---|\n| group 001 | 1 | 2026-11-21 09:01:00 UTC |  |\n| group 000 | 0 |",
		}},
		{desc: "a resolved member shows when it resolved", members: []marker.Member{{Key: "k", Title: "t", Since: minute(0), Resolved: minute(5)}},
			wantRows: 1, contains: []string{"| t | 0 | 2026-11-21 09:00:00 UTC | 2026-11-21 09:05:00 UTC |"}},
		{desc: "times are written in UTC", members: []marker.Member{{Key: "k", Title: "t", Firing: 1, Since: minute(0).In(time.FixedZone("CET", 3600))}},
			wantRows: 1, contains: []string{"| t | 1 | 2026-11-21 09:00:00 UTC |  |"}},
		{desc: "exactly the row cap", members: members(render.MaxRollupRows), wantRows: render.MaxRollupRows},
		{desc: "one past the cap", members: members(render.MaxRollupRows + 1), wantRows: render.MaxRollupRows, wantMore: "… and 1 more groups."},
		{desc: "far past the cap", members: members(250), wantRows: render.MaxRollupRows, wantMore: "… and 50 more groups.", contains: []string{
			"These 250 alert groups", "**Firing: 125 · Resolved: 125**",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			body := render.RollupBody("acme/gpu-oncall", guard, tc.members, render.RollupLinks{})
			assert.Len(t, tableRows(body), tc.wantRows)
			if tc.wantMore == "" {
				assert.NotContains(t, body, "more groups")
			} else {
				assert.Contains(t, body, tc.wantMore)
			}
			assert.Contains(t, body, "at most 2 new issues per 10m0s in this repository")
			for _, s := range tc.contains {
				assert.Contains(t, body, s)
			}
			assert.NotContains(t, body, "<!--", "the bridge appends the marker, not render")
		})
	}
}

// The storm of issue 28: 1,500 groups with titles of GitHub's longest,
// pipes escaped, fit GitHub's body limit with the marker, and the counts
// are of every group, not of the rows shown.
func TestRollupBodyFitsGitHubWhateverTheStorm(t *testing.T) {
	title := "[critical] " + strings.Repeat("NFS | mount ", 19) // 249 characters with the node
	for _, n := range []int{300, 1500, 5000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			ms := make([]marker.Member, n)
			for i := range ms {
				ms[i] = marker.Member{Key: fmt.Sprintf("%032x", i), Title: fmt.Sprintf("%s gpu-%05d", title, i),
					Alertname: "KubemedicNFSMountUnhealthy", Node: fmt.Sprintf("gpu-%05d", i), Firing: 1 - i%3/2, Since: minute(i % 60)}
			}
			body := render.RollupBody("acme/gpu-oncall", guard, ms, render.RollupLinks{Alertmanager: "http://am.example:9093", Receiver: "bridge"})
			assert.LessOrEqual(t, len(body), render.MaxBodyLength)
			withMarker, err := marker.Append(body, marker.RollupKey, marker.State{Members: ms})
			require.NoError(t, err)
			assert.LessOrEqual(t, len([]rune(withMarker)), render.GitHubBodyLimit)
			firing := 0
			for _, m := range ms {
				firing += min(m.Firing, 1)
			}
			assert.Contains(t, body, fmt.Sprintf("**Firing: %d · Resolved: %d**", firing, n-firing))
			assert.Contains(t, body, fmt.Sprintf("| [`KubemedicNFSMountUnhealthy`](http://am.example:9093/#/alerts?filter=%%7Balertname%%3D%%22KubemedicNFSMountUnhealthy%%22%%7D&receiver=bridge) | %d | %d | %d |", n, firing, n-firing))
			assert.Contains(t, body, "[Alertmanager's view of these alerts](http://am.example:9093/#/alerts?receiver=bridge)")
			assert.Contains(t, body, fmt.Sprintf("… and %d more.", n-15), "the node table is bounded")
			assert.Regexp(t, `… and \d+ more groups\.\n$`, body)
		})
	}
}

func TestEveryBodyLeavesRoomForTheMarker(t *testing.T) {
	assert.LessOrEqual(t, render.MaxBodyLength+marker.MaxLength, render.GitHubBodyLimit)
}

func TestRollupBodyKeepsTitlesInTheirCell(t *testing.T) {
	body := render.RollupBody("acme/gpu-oncall", guard, []marker.Member{{
		Key: "k", Title: "disk | full\non node|a\r\n", Firing: 1, Since: minute(0), Resolved: minute(5),
	}}, render.RollupLinks{})
	assert.Contains(t, body, `| disk \| full on node\|a   | 1 | 2026-11-21 09:00:00 UTC | 2026-11-21 09:05:00 UTC |`)
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "| disk") {
			cells := strings.Split(strings.ReplaceAll(l, `\|`, ""), "|")
			assert.Len(t, cells, 6, "four cells between the outer pipes: %q", l)
		}
	}
}

func TestRollupBodyRoundTripsThroughTheMarker(t *testing.T) {
	ms := []marker.Member{{Key: "k1", Title: "t1", Firing: 2, Since: minute(0)}, {Key: "k2", Title: "t2", Since: minute(1), Resolved: minute(2)}}
	body, err := marker.Append(render.RollupBody("acme/gpu-oncall", guard, ms, render.RollupLinks{}), marker.RollupKey, marker.State{Members: ms})
	require.NoError(t, err)
	key, st, ok, err := marker.Parse(body)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, marker.RollupKey, key)
	require.Len(t, st.Members, 2)
	assert.Equal(t, "k1", st.Members[0].Key)
	assert.True(t, st.Members[1].Resolved.Equal(minute(2)))
}

func TestRollupTitleAndLabels(t *testing.T) {
	title := render.RollupTitle("acme/gpu-oncall", minute(7).In(time.FixedZone("CET", 3600)))
	assert.Equal(t, "Alert storm in acme/gpu-oncall: alert groups held back by the storm guard (2026-11-21 09:07 UTC)", title)
	assert.Equal(t, []string{"kubemedic-alert", "alert-storm"}, render.RollupLabels("kubemedic-alert"))
}

func TestLinkPrevious(t *testing.T) {
	assert.Equal(t, "Fired again after the reopen window; previous occurrence: #41.\n\n## GPU lost\n",
		render.LinkPrevious("## GPU lost\n", 41))
}
