package render

import (
	"fmt"
	"strings"
	"time"

	"github.com/kubemedic/kubemedic/alertbridge/config"
	"github.com/kubemedic/kubemedic/alertbridge/marker"
)

// RollupLabel marks a roll-up issue, beside the identity label, so people
// can filter storms in or out.
const RollupLabel = "alert-storm"

// MaxRollupRows is how many groups the roll-up's table lists; a line counts
// the rest. 200 rows stay far below GitHub's body limit whatever the titles
// (each at most MaxTitleLength characters).
const MaxRollupRows = 200

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

// RollupBody is the body of repo's roll-up issue (without the marker): why
// it exists, how many members fire, and a table of the members in the
// given order, at most MaxRollupRows rows.
func RollupBody(repo string, guard config.StormGuard, members []marker.Member) string {
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
	sb.WriteString("| Alert group | Firing alerts | Since | Resolved |\n|---|---|---|---|\n")
	for i, m := range members {
		if i == MaxRollupRows {
			fmt.Fprintf(&sb, "\n… and %d more groups.\n", len(members)-MaxRollupRows)
			break
		}
		resolved := ""
		if !m.Resolved.IsZero() {
			resolved = m.Resolved.UTC().Format(rollupTime)
		}
		fmt.Fprintf(&sb, "| %s | %d | %s | %s |\n", tableCell(m.Title), m.Firing, m.Since.UTC().Format(rollupTime), resolved)
	}
	return sb.String()
}

// tableCell keeps a title inside its markdown table cell: a pipe would end
// the cell and a newline the row.
var tableCell = strings.NewReplacer("|", `\|`, "\n", " ", "\r", " ").Replace
