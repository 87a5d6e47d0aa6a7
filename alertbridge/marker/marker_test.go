package marker

import (
	"crypto/sha256"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRoundTrip(t *testing.T) {
	st := State{Firing: []string{"a1", "b2"}, Applied: "00000001763719200000000000", LastComment: "abc",
		TitleDigest: TitleDigest("[critical] Node gpu-7: GPUXidError — repairing"), Labels: []string{"incident:repairing", "kubemedic-alert"}}
	body, err := Append("## GPU lost on gpu-7\n\nbody text", "0123abcd", st)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(body, "## GPU lost on gpu-7\n\nbody text\n\n<!-- kubemedic-alertbridge key=0123abcd state="))

	key, got, ok, err := Parse(body)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, "0123abcd", key)
	assert.Equal(t, st, got)

	// Appending again replaces the marker instead of adding a second one.
	st.Firing = nil
	body2, err := Append(body, "0123abcd", st)
	require.NoError(t, err)
	assert.Equal(t, 1, strings.Count(body2, "<!-- kubemedic-alertbridge key="))
	_, got, _, err = Parse(body2)
	require.NoError(t, err)
	assert.Empty(t, got.Firing)
}

func TestParse(t *testing.T) {
	good, err := Append("x", "k1", State{Applied: "1"})
	require.NoError(t, err)
	tests := []struct {
		desc    string
		body    string
		wantOK  bool
		wantErr string
	}{
		{desc: "no marker: not ours", body: "a human's issue"},
		{desc: "a marker survives text people add around it", body: "note from on-call\n" + good + "\nmore notes", wantOK: true},
		{desc: "two markers are an error", body: good + good, wantOK: true, wantErr: "2 markers"},
		{desc: "damaged state is an error, not an empty state", body: "<!-- kubemedic-alertbridge key=k1 state=AAAA -->", wantOK: true, wantErr: "not gzip"},
		{desc: "an empty state is allowed", body: "<!-- kubemedic-alertbridge key=k1 state= -->", wantOK: true},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			_, _, ok, err := Parse(tc.body)
			assert.Equal(t, tc.wantOK, ok)
			if tc.wantErr == "" {
				assert.NoError(t, err)
			} else {
				assert.ErrorContains(t, err, tc.wantErr)
			}
		})
	}
}

func TestStateIsCompactedToFit(t *testing.T) {
	key := func(i int) string { return fmt.Sprintf("%x", sha256.Sum256([]byte(strconv.Itoa(i))))[:32] }
	since := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	member := func(i int) Member {
		return Member{Key: key(i), Title: fmt.Sprintf("[critical] KubemedicNFSMountUnhealthy on gpu-node-%04d: %s", i, strings.Repeat("x", 150)),
			Firing: 1, Since: since.Add(time.Duration(i) * time.Second)}
	}
	tests := []struct {
		desc        string
		st          State
		wantFiring  int // fingerprints kept in Firing; -1: compacted
		wantMembers int // members kept; -1: all
		wantNodes   int
	}{
		{desc: "a small state is kept whole", st: State{Firing: []string{"a1", "b2"}, Applied: "7", Nodes: []string{"gpu-7"}},
			wantFiring: 2, wantMembers: -1, wantNodes: 1},
		{desc: "300 roll-up members: the first ones that fit", st: State{Members: members(300, member)}, wantMembers: 0, wantFiring: 0},
		{desc: "1,500 roll-up members", st: State{Members: members(1500, member)}, wantMembers: 0, wantFiring: 0},
		{desc: "2,000 firing fingerprints become a count and a digest", st: State{Firing: fingerprints(2000), Applied: "9"},
			wantFiring: -1, wantMembers: -1},
		{desc: "100 nodes keep the first 32 once compacted", st: State{Firing: fingerprints(2000), Nodes: nodes(100)},
			wantFiring: -1, wantMembers: -1, wantNodes: 32},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			const body = "## table\n\nrows"
			out, err := Append(body, key(0), tc.st)
			require.NoError(t, err)
			assert.LessOrEqual(t, len(out)-len(body), MaxLength, "the marker may add at most MaxLength bytes")
			_, got, ok, err := Parse(out)
			require.NoError(t, err)
			require.True(t, ok)
			switch tc.wantFiring {
			case -1:
				assert.Nil(t, got.Firing)
				assert.Equal(t, len(tc.st.Firing), got.FiringCount)
				assert.Equal(t, FiringDigest(tc.st.Firing), got.FiringDigest)
				assert.Equal(t, len(tc.st.Firing), got.FiringTotal())
			default:
				assert.Equal(t, tc.st.Firing, got.Firing)
				assert.Equal(t, tc.wantFiring, got.FiringTotal())
			}
			if tc.wantMembers == -1 {
				assert.Equal(t, tc.st.Members, got.Members)
				assert.Zero(t, got.MembersTotal)
			} else {
				assert.Equal(t, len(tc.st.Members), got.MembersTotal)
				require.NotEmpty(t, got.Members, "the first members still fit")
				assert.Less(t, len(got.Members), len(tc.st.Members))
				assert.Equal(t, tc.st.Members[:len(got.Members)], got.Members, "a prefix, in the order given")
				t.Logf("%d of %d members kept", len(got.Members), len(tc.st.Members))
			}
			assert.Len(t, got.Nodes, tc.wantNodes)
		})
	}
}

func members(n int, f func(int) Member) []Member {
	out := make([]Member, n)
	for i := range out {
		out[i] = f(i)
	}
	return out
}

func fingerprints(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%016x", uint64(i)*0x9e3779b97f4a7c15)
	}
	sort.Strings(out)
	return out
}

func nodes(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("gpu-node-%04d", i)
	}
	return out
}

func TestTransition(t *testing.T) {
	c := "**Resolved**" + Transition("0042")
	assert.True(t, HasTransition(c, "0042"))
	assert.False(t, HasTransition(c, "004"))
	assert.False(t, HasTransition("**Resolved**", "0042"))
}

func TestTitleDigest(t *testing.T) {
	a := TitleDigest("[critical] Node gpu-7: GPUXidError — repairing")
	assert.Len(t, a, 16)
	assert.Equal(t, a, TitleDigest("[critical] Node gpu-7: GPUXidError — repairing"))
	assert.NotEqual(t, a, TitleDigest("[critical] Node gpu-7: GPUXidError — quarantined"))
}

// TestOperationCommentMarks: the comments about one NodeOperation's
// diagnostics bundle and its validation carry different ids, both found by
// DiagnosticsIDs and kept as the trailer by SplitTrailer; a mark written
// before validations (a bare UID) still reads.
func TestOperationCommentMarks(t *testing.T) {
	const uid = "5d3c0b7e-9a41-4f2e-8c6d-1b2a3c4d5e6f"
	require.Equal(t, uid+"/validation", ValidationID(uid))
	diag := "**Diagnostics kept** ..." + Diagnostics(uid)
	val := "**GPU validation failed** ..." + Diagnostics(ValidationID(uid))
	require.Equal(t, []string{uid}, DiagnosticsIDs(diag))
	require.Equal(t, []string{uid + "/validation"}, DiagnosticsIDs(val))
	require.Equal(t, []string{uid, uid + "/validation"}, DiagnosticsIDs(diag+"\n"+val))
	text, trailer := SplitTrailer(val)
	require.Equal(t, "**GPU validation failed** ...", text)
	require.Equal(t, []string{uid + "/validation"}, DiagnosticsIDs(trailer))
	require.Empty(t, DiagnosticsIDs("<!-- kubemedic-alertbridge diagnostics=a b -->"), "no spaces in an id")
}
