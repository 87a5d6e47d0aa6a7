package marker

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"
)

// RollupKey is the key of a repository's roll-up issue.
const RollupKey = "rollup"

// State is the bridge's state of one issue, kept in its body.
type State struct {
	// Firing holds the sorted fingerprints firing at the last applied transition.
	Firing []string `json:"f,omitempty"`
	// Applied is the journal entry whose transition this body reflects.
	Applied string `json:"a,omitempty"`
	// LastComment is the digest of the last timeline comment.
	LastComment string `json:"c,omitempty"`
	// Members are the alert groups of a roll-up issue, by key hash.
	Members []Member `json:"m,omitempty"`
	// Nodes are the nodes the group's alerts name, sorted: the join to
	// their NodeOperations' diagnostics bundles.
	Nodes []string `json:"nd,omitempty"`
}

// Member is one alert group that the storm guard sent to a roll-up issue.
type Member struct {
	Key   string `json:"k"`
	Title string `json:"t"`
	// Firing is the number of firing alerts; 0 once the group resolved.
	Firing   int       `json:"n,omitempty"`
	Since    time.Time `json:"s"`
	Resolved time.Time `json:"r,omitzero"`
}

var (
	diagnosticsRE = regexp.MustCompile(`<!-- kubemedic-alertbridge diagnostics=([0-9A-Za-z._-]+) -->`)
	markerRE      = regexp.MustCompile(`<!-- kubemedic-alertbridge key=([A-Za-z0-9_-]+) state=([A-Za-z0-9_=-]*) -->`)
	transitionRE  = regexp.MustCompile(`<!-- kubemedic-alertbridge transition=([0-9A-Za-z_-]+) -->`)
)

// Append returns body followed by the marker for key and state. Any marker
// already in body is removed first.
func Append(body, key string, st State) (string, error) {
	data, err := encode(st)
	if err != nil {
		return "", err
	}
	body = strings.TrimRight(markerRE.ReplaceAllString(body, ""), "\n")
	return fmt.Sprintf("%s\n\n<!-- kubemedic-alertbridge key=%s state=%s -->\n", body, key, data), nil
}

// Parse finds the marker in body. ok is false when there is none; err is set
// when there is one that cannot be read.
func Parse(body string) (key string, st State, ok bool, err error) {
	m := markerRE.FindAllStringSubmatch(body, -1)
	if len(m) == 0 {
		return "", State{}, false, nil
	}
	if len(m) > 1 {
		return "", State{}, true, fmt.Errorf("marker: %d markers in one body", len(m))
	}
	st, err = decode(m[0][2])
	if err != nil {
		return m[0][1], State{}, true, fmt.Errorf("marker: key %s: %w", m[0][1], err)
	}
	return m[0][1], st, true, nil
}

// Transition returns the mark that ends a timeline comment posted for the
// journal entry id, so that a replay after a crash can tell it was posted.
func Transition(id string) string {
	return fmt.Sprintf("\n\n<!-- kubemedic-alertbridge transition=%s -->", id)
}

// HasTransition reports whether a comment body carries the mark of entry id.
func HasTransition(comment, id string) bool {
	for _, m := range transitionRE.FindAllStringSubmatch(comment, -1) {
		if m[1] == id {
			return true
		}
	}
	return false
}

// The state is JSON, gzipped (a roll-up lists hundreds of similar members)
// and base64url-encoded so it cannot end the HTML comment.
func encode(st State) (string, error) {
	raw, err := json.Marshal(st)
	if err != nil {
		return "", fmt.Errorf("marker: encode state: %w", err)
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if _, err := zw.Write(raw); err != nil {
		return "", fmt.Errorf("marker: compress state: %w", err)
	}
	if err := zw.Close(); err != nil {
		return "", fmt.Errorf("marker: compress state: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(buf.Bytes()), nil
}

// maxState bounds a decoded state, so a hostile body cannot make the bridge
// inflate gigabytes.
const maxState = 4 << 20

func decode(s string) (State, error) {
	var st State
	if s == "" {
		return st, nil
	}
	data, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
	if err != nil {
		return st, fmt.Errorf("state is not base64url: %w", err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return st, fmt.Errorf("state is not gzip: %w", err)
	}
	raw, err := io.ReadAll(io.LimitReader(zr, maxState+1))
	if err != nil {
		return st, fmt.Errorf("state: decompress: %w", err)
	}
	if len(raw) > maxState {
		return st, fmt.Errorf("state is larger than %d bytes", maxState)
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return st, fmt.Errorf("state is not JSON: %w", err)
	}
	return st, nil
}

// Diagnostics is the mark that ends the comment about one diagnostics
// bundle, id being its NodeOperation's UID: the bridge looks for it before
// commenting, so each bundle is commented on once per issue, a restart
// included.
func Diagnostics(id string) string {
	return fmt.Sprintf("\n\n<!-- kubemedic-alertbridge diagnostics=%s -->\n", id)
}

// DiagnosticsIDs returns the ids of the Diagnostics marks in a comment.
func DiagnosticsIDs(body string) []string {
	var out []string
	for _, m := range diagnosticsRE.FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}
