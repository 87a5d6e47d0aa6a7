package marker

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"
)

// RollupKey is the key of a repository's roll-up issue.
const RollupKey = "rollup"

// MaxLength bounds what Append adds to a body, the marker line and its
// blank line: a body of GitHub's limit less MaxLength always has room for
// it. What does not fit is compacted (see Append), never written beyond it.
const MaxLength = 4096

// maxNodes bounds State.Nodes when the state must be compacted.
const maxNodes = 32

// State is the bridge's state of one issue, kept in its body.
type State struct {
	// Firing holds the sorted fingerprints firing at the last applied
	// transition, unless they did not fit the marker: then Firing is nil
	// and FiringCount and FiringDigest stand for them.
	Firing []string `json:"f,omitempty"`
	// FiringCount is the number of firing fingerprints left out of Firing.
	FiringCount int `json:"fn,omitempty"`
	// FiringDigest is FiringDigest(fingerprints) of those left out.
	FiringDigest string `json:"fd,omitempty"`
	// Applied is the journal entry whose transition this body reflects.
	Applied string `json:"a,omitempty"`
	// LastComment is the digest of the last timeline comment.
	LastComment string `json:"c,omitempty"`
	// Members are the alert groups of a roll-up issue, by key hash: all of
	// them, or when they did not fit the marker the first ones (in the
	// order given), MembersTotal saying how many there are. The bridge's
	// local roll-up file always holds them all.
	Members      []Member `json:"m,omitempty"`
	MembersTotal int      `json:"mt,omitempty"`
	// Nodes are the nodes the group's alerts name, sorted: the join to
	// their NodeOperations' diagnostics bundles. At most maxNodes of them
	// when the state had to be compacted.
	Nodes []string `json:"nd,omitempty"`
	// TitleDigest is TitleDigest of the title the bridge last gave the
	// issue (when filing it or retitling it): while the title has
	// this digest it is still the bridge's to change. "" when unknown (an
	// issue filed before titles followed their group): never retitled.
	TitleDigest string `json:"td,omitempty"`
	// Labels are the labels the bridge last rendered for the issue,
	// sorted: it adds what is newly rendered and removes only what it
	// rendered before and no longer does. nil when unknown (an issue filed
	// before labels followed their group); never empty otherwise, since
	// the identity label is always rendered.
	Labels []string `json:"l,omitempty"`
}

// FiringTotal is how many alerts fired at the last applied transition,
// whether Firing holds them or only their count.
func (st State) FiringTotal() int {
	if st.Firing == nil {
		return st.FiringCount
	}
	return len(st.Firing)
}

// FiringDigest identifies a sorted set of fingerprints, for comparing a
// firing set with one compacted out of a marker.
func FiringDigest(fps []string) string {
	h := sha256.Sum256([]byte(strings.Join(fps, ",")))
	return hex.EncodeToString(h[:16])
}

// TitleDigest identifies an issue title the bridge set, so that the state
// can tell whether the issue still has it without holding the title.
func TitleDigest(title string) string {
	h := sha256.Sum256([]byte(title))
	return hex.EncodeToString(h[:8])
}

// Member is one alert group that the storm guard sent to a roll-up issue.
type Member struct {
	Key   string `json:"k"`
	Title string `json:"t"`
	// Alertname and Node are the group's common alertname and node labels,
	// "" when its alerts do not share one: the roll-up counts by them.
	Alertname string `json:"an,omitempty"`
	Node      string `json:"no,omitempty"`
	// Firing is the number of firing alerts; 0 once the group resolved.
	Firing   int       `json:"n,omitempty"`
	Since    time.Time `json:"s"`
	Resolved time.Time `json:"r,omitzero"`
}

var (
	diagnosticsRE = regexp.MustCompile(`<!-- kubemedic-alertbridge diagnostics=([0-9A-Za-z._/-]+) -->`)
	markerRE      = regexp.MustCompile(`<!-- kubemedic-alertbridge key=([A-Za-z0-9_-]+) state=([A-Za-z0-9_=-]*) -->`)
	transitionRE  = regexp.MustCompile(`<!-- kubemedic-alertbridge transition=([0-9A-Za-z_-]+) -->`)
)

// Append returns body followed by the marker for key and state. Any marker
// already in body is removed first. The marker, with the blank line before
// it, is at most MaxLength bytes: a state that would make it longer is
// compacted first, in this order, until it fits:
//   - Firing becomes FiringCount and FiringDigest;
//   - Nodes keeps its first maxNodes;
//   - Members keeps as many of its first members as fit, MembersTotal
//     counting them all.
//
// A state that still does not fit (a key of hundreds of bytes) is an
// error.
func Append(body, key string, st State) (string, error) {
	line, err := Line(key, st)
	if err != nil {
		return "", err
	}
	body = strings.TrimRight(markerRE.ReplaceAllString(body, ""), "\n")
	return body + line, nil
}

// Line is what Append adds to a body for key and st: a blank line and the
// marker line, compacted to at most MaxLength bytes.
func Line(key string, st State) (string, error) {
	full, err := encodeLine(key, st)
	if err != nil || len(full) <= MaxLength {
		return full, err
	}
	if st.Firing != nil {
		st.FiringCount, st.FiringDigest, st.Firing = len(st.Firing), FiringDigest(st.Firing), nil
	}
	if len(st.Nodes) > maxNodes {
		st.Nodes = st.Nodes[:maxNodes]
	}
	if st.MembersTotal == 0 && len(st.Members) > 0 {
		st.MembersTotal = len(st.Members)
	}
	all := st.Members
	fits := func(n int) (string, bool, error) {
		st.Members = all[:n]
		l, err := encodeLine(key, st)
		return l, err == nil && len(l) <= MaxLength, err
	}
	// The longest prefix of the members that fits. The encoding grows with
	// the prefix: gallop up from a few members (a marker holds about a
	// hundred), then bisect, so a roll-up of thousands is not encoded whole
	// again and again.
	best, lo, hi := "", 0, 0
	for n := min(len(all), 16); ; n = min(2*n, len(all)) {
		l, ok, err := fits(n)
		if err != nil {
			return "", err
		}
		if !ok {
			hi = n - 1
			break
		}
		best, lo = l, n
		if n == len(all) {
			hi = n
			break
		}
	}
	for lo < hi {
		mid := (lo + hi + 1) / 2
		l, ok, err := fits(mid)
		if err != nil {
			return "", err
		}
		if ok {
			best, lo = l, mid
		} else {
			hi = mid - 1
		}
	}
	if best == "" {
		if l, ok, err := fits(0); err == nil && ok {
			return l, nil
		}
		return "", fmt.Errorf("marker: key %.40s: the state does not fit in %d bytes even compacted", key, MaxLength)
	}
	return best, nil
}

func encodeLine(key string, st State) (string, error) {
	data, err := encode(st)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("\n\n<!-- kubemedic-alertbridge key=%s state=%s -->\n", key, data), nil
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

// trailerRE matches the hidden marks that end a body or comment.
var trailerRE = regexp.MustCompile(`(?:\s*<!-- kubemedic-alertbridge (?:key|transition|diagnostics)=[^>]*-->)+\s*$`)

// SplitTrailer splits a body or comment the bridge wrote into its visible
// text and the hidden marks that end it (the marker, a transition or
// diagnostics mark), so that the text can be cut and the marks kept.
func SplitTrailer(body string) (text, trailer string) {
	loc := trailerRE.FindStringIndex(body)
	if loc == nil {
		return body, ""
	}
	return body[:loc[0]], body[loc[0]:]
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
// included. The comments about a NodeOperation's other results carry the
// same mark with a suffix on the id (ValidationID), so that one scan of an
// issue's comments finds them all and no two of them share an id.
func Diagnostics(id string) string {
	return fmt.Sprintf("\n\n<!-- kubemedic-alertbridge diagnostics=%s -->\n", id)
}

// ValidationID is the id in the mark of the comment about the active GPU
// test of the NodeOperation whose id (UID) is opID: "<opID>/validation",
// never the id of its diagnostics comment.
func ValidationID(opID string) string {
	return opID + "/validation"
}

// DiagnosticsIDs returns the ids of the Diagnostics marks in a comment,
// ValidationIDs included.
func DiagnosticsIDs(body string) []string {
	var out []string
	for _, m := range diagnosticsRE.FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}
