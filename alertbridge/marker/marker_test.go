package marker

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRoundTrip(t *testing.T) {
	st := State{Firing: []string{"a1", "b2"}, Applied: "00000001763719200000000000", LastComment: "abc"}
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

func TestRollupStateFitsInABody(t *testing.T) {
	// 300 members must fit GitHub's 65,536-character body with room for the table.
	var st State
	for i := range 300 {
		st.Members = append(st.Members, Member{
			Key: fmt.Sprintf("%032x", i*7919), Title: fmt.Sprintf("[critical] KubemedicGPULost on gpu-node-%04d", i),
			Firing: 1, Since: time.Date(2026, 11, 21, 10, 0, i, 0, time.UTC),
		})
	}
	body, err := Append("", RollupKey, st)
	require.NoError(t, err)
	t.Logf("marker for 300 members: %d bytes", len(body))
	assert.Less(t, len(body), 25000)
	_, got, _, err := Parse(body)
	require.NoError(t, err)
	assert.Len(t, got.Members, 300)
	assert.Equal(t, st.Members[299].Title, got.Members[299].Title)
}

func TestTransition(t *testing.T) {
	c := "**Resolved**" + Transition("0042")
	assert.True(t, HasTransition(c, "0042"))
	assert.False(t, HasTransition(c, "004"))
	assert.False(t, HasTransition("**Resolved**", "0042"))
}
