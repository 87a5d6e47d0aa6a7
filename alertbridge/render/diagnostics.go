package render

import (
	"fmt"
	"strings"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// maxDiagnosticsFiles bounds the file list of a diagnostics comment; the
// bundle's manifest.json lists them all.
const maxDiagnosticsFiles = 20

// DiagnosticsReady reports whether an operation's capture left a bundle
// the store holds, with a link: what a diagnostics comment needs.
func DiagnosticsReady(op *v1alpha1.NodeOperation) bool {
	d := op.Status.Diagnostics
	return d != nil && d.Bundle != nil && d.Bundle.Stored && d.Bundle.URL != "" && d.CompletionTime != nil
}

// DiagnosticsComment is the comment that tells the readers that
// an operation kept the node's evidence before it changed the node: what
// was captured, the link and until when it works, the sha256 to check,
// the files, and what failed to be captured.
func DiagnosticsComment(op *v1alpha1.NodeOperation) string {
	d := op.Status.Diagnostics
	b := d.Bundle
	var s strings.Builder
	what := op.Spec.Operation
	if op.Spec.Quarantine {
		what = "quarantine"
	}
	fmt.Fprintf(&s, "**Diagnostics kept** on node `%s` before kubemedic's `%s` (NodeOperation `%s`, policy `%s`, step `%s`), captured %s.\n\n",
		codeSpan(op.Spec.NodeName), codeSpan(what), codeSpan(op.Name), codeSpan(op.Spec.Policy), codeSpan(op.Spec.Step), historyTimestamp(d.CompletionTime.Time))
	expires := ""
	if b.URLExpires != nil {
		expires = ", valid until " + historyTimestamp(b.URLExpires.Time)
	}
	fmt.Fprintf(&s, "- Bundle: [`%s`](%s) (%s%s)\n", codeSpan(b.Key), b.URL, sizeText(b.Size), expires)
	fmt.Fprintf(&s, "- sha256: `%s` (check with `sha256sum`)\n", b.SHA256)
	switch d.Result {
	case v1alpha1.DiagnosticsPartial:
		fmt.Fprintf(&s, "- Result: **Partial**; not captured: %s\n", mdCellText(strings.Join(d.FailedParts, "; ")))
	default:
		fmt.Fprintf(&s, "- Result: %s\n", d.Result)
	}
	files := b.Files
	more := 0
	if len(files) > maxDiagnosticsFiles {
		files, more = files[:maxDiagnosticsFiles], len(files)-maxDiagnosticsFiles
	}
	quoted := make([]string, len(files))
	for i, f := range files {
		quoted[i] = "`" + codeSpan(f) + "`"
	}
	line := strings.Join(quoted, ", ")
	if more > 0 {
		line += fmt.Sprintf(" and %d more (manifest.json lists them)", more)
	}
	fmt.Fprintf(&s, "- Files: %s\n", line)
	if c := d.Cluster; c != nil && c.URL != "" {
		fmt.Fprintf(&s, "- What the API server knew (the Node, its Events, its NodeOperations, the GPU Operator's logs): [`%s`](%s) (%s), sha256 `%s`\n",
			codeSpan(c.Key), c.URL, sizeText(c.Size), c.SHA256)
	}
	s.WriteString("\nThe link is presigned and expires; the bundle stays in the store for its retention. `manifest.json` in the bundle lists every file's sha256 and each command's exit status or timeout.")
	return s.String()
}

// sizeText is a byte count for people.
func sizeText(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
