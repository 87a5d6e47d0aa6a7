package notify

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/slack-go/slack"
	"github.com/stretchr/testify/require"
)

func blockJSON(t *testing.T, b slack.Block) string {
	t.Helper()
	raw, err := json.Marshal(b)
	require.NoError(t, err)
	return string(raw)
}

func TestEscape(t *testing.T) {
	require.Equal(t, "a &amp;lt; &lt;!channel&gt; &amp;&amp; &lt;@U1&gt;", Escape("a &lt; <!channel> && <@U1>"))
	require.Equal(t, "plain *text* _stays_", Escape("plain *text* _stays_"))
}

func TestBlocks(t *testing.T) {
	tests := []struct {
		desc  string
		block slack.Block
		want  string
	}{
		{
			desc:  "section keeps mrkdwn",
			block: Section("*Seen:* pod " + Code("team-a/<x>") + " idle"),
			want:  `{"type":"section","text":{"type":"mrkdwn","text":"*Seen:* pod ` + "`team-a/&lt;x&gt;`" + ` idle"}}`,
		},
		{
			desc:  "header is plain text",
			block: Header("GPU pod <train> will be reclaimed"),
			want:  `{"type":"header","text":{"type":"plain_text","text":"GPU pod \u003ctrain\u003e will be reclaimed","emoji":true}}`,
		},
		{
			desc:  "fields escape labels and values",
			block: Fields("Pod", "team-a/<!here>", "Idle", "3h"),
			want:  `{"type":"section","fields":[{"type":"mrkdwn","text":"*Pod*\nteam-a/\u0026lt;!here\u0026gt;"},{"type":"mrkdwn","text":"*Idle*\n3h"}]}`,
		},
		{
			desc:  "a missing last value shows a dash",
			block: Fields("Pod", "p", "Owner"),
			want:  `{"type":"section","fields":[{"type":"mrkdwn","text":"*Pod*\np"},{"type":"mrkdwn","text":"*Owner*\n-"}]}`,
		},
		{
			desc:  "markdown fields keep values, escape labels",
			block: MarkdownFields("Owner <x>", Mention("U0123ABCD")),
			want:  `{"type":"section","fields":[{"type":"mrkdwn","text":"*Owner \u0026lt;x\u0026gt;*\n\u003c@U0123ABCD\u003e"}]}`,
		},
		{
			desc:  "context",
			block: Context("kubemedic janitor", "policy "+Code("default")),
			want:  `{"type":"context","elements":[{"type":"mrkdwn","text":"kubemedic janitor"},{"type":"mrkdwn","text":"policy ` + "`default`" + `"}]}`,
		},
		{
			desc:  "divider",
			block: Divider(),
			want:  `{"type":"divider"}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			require.JSONEq(t, tc.want, blockJSON(t, tc.block))
		})
	}
}

func TestBlockLimits(t *testing.T) {
	var pairs []string
	for range 12 {
		pairs = append(pairs, "k", "v")
	}
	require.Len(t, Fields(pairs...).(*slack.SectionBlock).Fields, 10, "Slack shows at most 10 fields")

	elems := make([]string, 12)
	for i := range elems {
		elems[i] = "x"
	}
	require.Len(t, Context(elems...).(*slack.ContextBlock).ContextElements.Elements, 10)

	h := Header(strings.Repeat("h", 200)).(*slack.HeaderBlock).Text.Text
	require.Equal(t, 150, utf8.RuneCountInString(h))
	require.True(t, strings.HasSuffix(h, "…"))

	s := Section(strings.Repeat("é", 3001)).(*slack.SectionBlock).Text.Text
	require.Equal(t, 3000, utf8.RuneCountInString(s))

	short := Section("short").(*slack.SectionBlock).Text.Text
	require.Equal(t, "short", short)
}

func TestTruncateKeepsEntitiesWhole(t *testing.T) {
	s := Escape(strings.Repeat("a", 8) + "&&&")
	// "aaaaaaaa&amp;&amp;&amp;" cut at 12 would end in "&am".
	got := truncate(s, 12)
	require.Equal(t, "aaaaaaaa…", got)
	require.Equal(t, "aaaaaaaa&amp;…", truncate(s, 15))
}

func TestInlineHelpers(t *testing.T) {
	require.Equal(t, "<@U0123ABCD>", Mention("U0123ABCD"))
	require.Equal(t, "`a'b &lt;c&gt;`", Code("a`b <c>"))
	require.Equal(t, "<https://grafana.example.com/d/x?a=1&b=2|GPU &lt;dashboard&gt;>", Link("https://grafana.example.com/d/x?a=1&b=2", "GPU <dashboard>"))
	require.Equal(t, "<https://x.example.com/%7Cy%3E>", Link("https://x.example.com/|y>", ""))
	when := time.Date(2026, 11, 21, 14, 0, 0, 0, time.FixedZone("CET", 3600))
	require.Equal(t, "<!date^1795266000^{date_short_pretty} at {time}|2026-11-21 13:00 UTC>", Date(when))
}
