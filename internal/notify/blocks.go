package notify

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/slack-go/slack"
)

// Block Kit limits (https://docs.slack.dev/reference/block-kit/blocks):
// longer text is cut with an ellipsis, extra fields or elements dropped.
const (
	maxHeaderChars   = 150
	maxSectionChars  = 3000
	maxFieldChars    = 2000
	maxFields        = 10
	maxContextElems  = 10
	truncationSuffix = "…"
)

// The helpers below build the parts that every kubemedic message has: what
// was seen, what will be done, when, and how to stop it. They take either
// plain text (escaped here) or mrkdwn (the caller's; escape any
// user-provided part of it with Escape). The wording is the caller's.

var mrkdwnEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// Escape makes user-provided text (pod names, labels, annotation values)
// safe to put inside mrkdwn: '&', '<' and '>' become entities, so that the
// text cannot form a link, a mention (<!channel>) or a date.
func Escape(text string) string {
	return mrkdwnEscaper.Replace(text)
}

// Header is a header block with plain text (at most 150 characters).
func Header(text string) slack.Block {
	return slack.NewHeaderBlock(slack.NewTextBlockObject(slack.PlainTextType, truncate(text, maxHeaderChars), true, false))
}

// Section is a section block with mrkdwn text (at most 3000 characters).
func Section(markdown string) slack.Block {
	return slack.NewSectionBlock(mrkdwn(markdown, maxSectionChars), nil, nil)
}

// Fields is a section block of label/value pairs shown in two columns, e.g.
// Fields("Pod", "team-a/train-0", "Idle since", "…"). Labels and values are
// plain text, escaped here; a missing last value shows as "-". Slack shows
// at most 10 fields: further pairs are dropped.
func Fields(pairs ...string) slack.Block {
	escaped := make([]string, len(pairs))
	for i, p := range pairs {
		escaped[i] = Escape(p)
	}
	return fieldsBlock(escaped)
}

// MarkdownFields is Fields with values that are mrkdwn (for Mention, Date,
// Link, Code); labels are still plain text.
func MarkdownFields(pairs ...string) slack.Block {
	out := make([]string, len(pairs))
	for i, p := range pairs {
		if i%2 == 0 {
			p = Escape(p)
		}
		out[i] = p
	}
	return fieldsBlock(out)
}

func fieldsBlock(pairs []string) slack.Block {
	var fields []*slack.TextBlockObject
	for i := 0; i < len(pairs) && len(fields) < maxFields; i += 2 {
		value := "-"
		if i+1 < len(pairs) && pairs[i+1] != "" {
			value = pairs[i+1]
		}
		fields = append(fields, mrkdwn("*"+pairs[i]+"*\n"+value, maxFieldChars))
	}
	return slack.NewSectionBlock(nil, fields, nil)
}

// Context is a context block (small grey text) of mrkdwn elements, at most
// 10, e.g. Context("kubemedic janitor", "policy "+Code(name)).
func Context(markdown ...string) slack.Block {
	var elems []slack.MixedElement
	for _, m := range markdown {
		if len(elems) == maxContextElems {
			break
		}
		elems = append(elems, mrkdwn(m, maxSectionChars))
	}
	return slack.NewContextBlock("", elems...)
}

// Divider is a divider block.
func Divider() slack.Block {
	return slack.NewDividerBlock()
}

// Mention is mrkdwn that mentions a Slack user by ID.
func Mention(userID string) string {
	return "<@" + Escape(userID) + ">"
}

// Code is text as inline code in mrkdwn. Backticks in text become quotes,
// as mrkdwn has no way to escape them.
func Code(text string) string {
	return "`" + Escape(strings.ReplaceAll(text, "`", "'")) + "`"
}

// Link is mrkdwn for a link to url showing text (escaped). Characters that
// would end the link early are percent-encoded in url.
func Link(url, text string) string {
	url = strings.NewReplacer("|", "%7C", "<", "%3C", ">", "%3E").Replace(url)
	if text == "" {
		return "<" + url + ">"
	}
	return "<" + url + "|" + Escape(text) + ">"
}

// Date is mrkdwn that each reader sees in their own time zone, e.g.
// "Nov 21, 2026 at 14:00"; clients that cannot format it show the UTC time.
func Date(t time.Time) string {
	fallback := t.UTC().Format("2006-01-02 15:04 UTC")
	return fmt.Sprintf("<!date^%d^{date_short_pretty} at {time}|%s>", t.Unix(), fallback)
}

func mrkdwn(text string, limit int) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.MarkdownType, truncate(text, limit), false, false)
}

// truncate cuts s to at most limit characters, ending in an ellipsis when
// cut, and never in the middle of an entity made by Escape.
func truncate(s string, limit int) string {
	if utf8.RuneCountInString(s) <= limit {
		return s
	}
	runes := []rune(s)
	cut := string(runes[:limit-utf8.RuneCountInString(truncationSuffix)])
	if amp := strings.LastIndexByte(cut, '&'); amp >= 0 && !strings.Contains(cut[amp:], ";") {
		cut = cut[:amp]
	}
	return cut + truncationSuffix
}
