package render

import (
	"cmp"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/kubemedic/kubemedic/alertbridge/config"
	"github.com/kubemedic/kubemedic/alertbridge/marker"
)

// RollupLabel marks a roll-up issue, beside the identity label, so people
// can filter storms in or out.
const RollupLabel = "alert-storm"

// MaxRollupRows is the most groups the roll-up's table lists, for a reader;
// fewer when the body's limit comes first. A line counts the rest.
const MaxRollupRows = 200

// maxSummaryRows bounds each count table of the roll-up (by alert, by node).
const maxSummaryRows = 15

const rollupTime = "2006-01-02 15:04:05 MST"

// RollupTitle is the title of repo's roll-up issue for a storm that began at
// since (the first member's start).
func RollupTitle(repo string, since time.Time) string {
	return fitTitle(fmt.Sprintf("Alert storm in %s: alert groups held back by the storm guard (%s)",
		repo, since.UTC().Format("2006-01-02 15:04 MST")))
}

// RollupLabels are the labels of a roll-up issue.
func RollupLabels(identityLabel string) []string {
	return []string{identityLabel, RollupLabel}
}

// RollupLinks are where a reader sees the storm's alerts themselves.
type RollupLinks struct {
	// Alertmanager is the external URL of the Alertmanager that sent the
	// members (the payload's externalURL); "" for none.
	Alertmanager string
	// Receiver is the members' receiver, to filter Alertmanager's view.
	Receiver string
}

// RollupBody is the body of repo's roll-up issue (without the marker): why
// it exists, how many members fire and have resolved (always all of them),
// the counts by alert and by node, and a table of the members, firing
// ones first, as many as fit (at most MaxRollupRows). It is at most
// MaxBodyLength bytes whatever the number of members and their titles, so
// that with the marker it fits GitHub's body limit.
func RollupBody(repo string, guard config.StormGuard, members []marker.Member, links RollupLinks) string {
	firing := 0
	for _, m := range members {
		if m.Firing > 0 {
			firing++
		}
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "## Alert storm in %s\n\n", repo)
	fmt.Fprintf(&sb, "The storm guard files at most %d new issues per %s in this repository. "+
		"These %d alert groups fired beyond that; they are tracked here instead of in issues of their own. "+
		"This issue is updated as they resolve and closes when all of them have.\n\n",
		guard.MaxNewIssues, guard.Window, len(members))
	fmt.Fprintf(&sb, "**Firing: %d · Resolved: %d**\n\n", firing, len(members)-firing)
	if u := alertmanagerView(links, ""); u != "" {
		fmt.Fprintf(&sb, "[Alertmanager's view of these alerts](%s)\n\n", u)
	}
	writeCounts(&sb, "By alert", "Alert", members, func(m marker.Member) string { return m.Alertname }, links)
	writeCounts(&sb, "By node", "Node", members, func(m marker.Member) string { return m.Node }, RollupLinks{})

	rows := slices.Clone(members)
	slices.SortStableFunc(rows, func(a, b marker.Member) int {
		return cmp.Compare(min(b.Firing, 1), min(a.Firing, 1)) // firing first, in the given order
	})
	sb.WriteString("### Groups\n\n| Alert group | Firing alerts | Since | Resolved |\n|---|---|---|---|\n")
	for i, m := range rows {
		resolved := ""
		if !m.Resolved.IsZero() {
			resolved = m.Resolved.UTC().Format(rollupTime)
		}
		row := fmt.Sprintf("| %s | %d | %s | %s |\n", tableCell(m.Title), m.Firing, m.Since.UTC().Format(rollupTime), resolved)
		more := fmt.Sprintf("\n… and %d more groups.\n", len(rows)-i)
		if i == MaxRollupRows || sb.Len()+len(row)+len(more)+len(moreSlack) > MaxBodyLength {
			sb.WriteString(more)
			break
		}
		sb.WriteString(row)
	}
	return sb.String()
}

// moreSlack keeps room for the "… and N more groups." line as N grows.
const moreSlack = "     "

// writeCounts writes a table of the members' groups, firing and resolved
// counts by key(member), the largest first, at most maxSummaryRows rows;
// nothing when no member has a key.
func writeCounts(sb *strings.Builder, heading, column string, members []marker.Member, key func(marker.Member) string, links RollupLinks) {
	type count struct {
		name                   string
		groups, firing, resolv int
	}
	byName := map[string]*count{}
	for _, m := range members {
		name := key(m)
		if name == "" {
			continue
		}
		c := byName[name]
		if c == nil {
			c = &count{name: name}
			byName[name] = c
		}
		c.groups++
		if m.Firing > 0 {
			c.firing++
		} else {
			c.resolv++
		}
	}
	if len(byName) == 0 {
		return
	}
	counts := make([]*count, 0, len(byName))
	for _, c := range byName {
		counts = append(counts, c)
	}
	slices.SortFunc(counts, func(a, b *count) int {
		if c := cmp.Compare(b.groups, a.groups); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	fmt.Fprintf(sb, "### %s\n\n| %s | Groups | Firing | Resolved |\n|---|---|---|---|\n", heading, column)
	for i, c := range counts {
		if i == maxSummaryRows {
			fmt.Fprintf(sb, "\n… and %d more.\n", len(counts)-maxSummaryRows)
			break
		}
		name := "`" + codeSpan(truncateRunes(100, c.name)) + "`"
		if u := alertmanagerView(links, c.name); u != "" {
			name = fmt.Sprintf("[%s](%s)", name, u)
		}
		fmt.Fprintf(sb, "| %s | %d | %d | %d |\n", name, c.groups, c.firing, c.resolv)
	}
	sb.WriteString("\n")
}

// alertmanagerView links Alertmanager's alert list, filtered to the
// receiver and, when given, one alertname; "" without an http(s) URL.
func alertmanagerView(links RollupLinks, alertname string) string {
	u, err := url.Parse(strings.TrimRight(links.Alertmanager, "/"))
	if links.Alertmanager == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return ""
	}
	u.User = nil
	q := url.Values{}
	if links.Receiver != "" {
		q.Set("receiver", links.Receiver)
	}
	if alertname != "" {
		q.Set("filter", fmt.Sprintf("{alertname=%q}", alertname))
	}
	view := u.String() + "/#/alerts"
	if len(q) > 0 {
		view += "?" + q.Encode()
	}
	return view
}

// tableCell keeps a title inside its markdown table cell: a pipe would end
// the cell and a newline the row.
var tableCell = strings.NewReplacer("|", `\|`, "\n", " ", "\r", " ").Replace
