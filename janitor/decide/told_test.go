package decide_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/janitor/decide"
)

func TestTell(t *testing.T) {
	const (
		invalid = "ReclaimInvalidAnnotation"
		owner   = "ReclaimUnsupportedOwner"
	)
	ttl3days := `pod annotation janitor/ttl: "3 days" is not a TTL`
	ttl4days := `pod annotation janitor/ttl: "4 days" is not a TTL`
	h3, h4, hOwner := decide.TaleHash(ttl3days), decide.TaleHash(ttl4days), decide.TaleHash("Idle PyTorchJob train")
	for _, tc := range []struct {
		desc       string
		record     string
		tales      []decide.Tale
		wantNews   []decide.Tale
		wantRecord string
	}{
		{desc: "nothing to tell, no record: no write", record: "", tales: nil, wantRecord: ""},
		{desc: "first tale is told and recorded", record: "",
			tales:    []decide.Tale{{invalid, ttl3days}},
			wantNews: []decide.Tale{{invalid, ttl3days}}, wantRecord: invalid + ":" + h3},
		{desc: "the same tale after a restart is not told again, and the record is not rewritten", record: invalid + ":" + h3,
			tales: []decide.Tale{{invalid, ttl3days}}, wantRecord: invalid + ":" + h3},
		{desc: "a different invalid value is told again and replaces the entry", record: invalid + ":" + h3,
			tales:    []decide.Tale{{invalid, ttl4days}},
			wantNews: []decide.Tale{{invalid, ttl4days}}, wantRecord: invalid + ":" + h4},
		{desc: "a reason no longer told keeps its entry: no write when a problem goes away", record: invalid + ":" + h3,
			tales: nil, wantRecord: invalid + ":" + h3},
		{desc: "a second reason is added, sorted, the first kept", record: invalid + ":" + h3,
			tales:    []decide.Tale{{invalid, ttl3days}, {owner, "Idle PyTorchJob train"}},
			wantNews: []decide.Tale{{owner, "Idle PyTorchJob train"}}, wantRecord: invalid + ":" + h3 + "," + owner + ":" + hOwner},
		{desc: "an unsorted record written by hand is read", record: owner + ":" + hOwner + ", " + invalid + ":" + h3,
			tales: []decide.Tale{{invalid, ttl3days}, {owner, "Idle PyTorchJob train"}}, wantRecord: owner + ":" + hOwner + ", " + invalid + ":" + h3},
		{desc: "garbage in the record is dropped when it is rewritten", record: "junk,x:zzzzzzzz,:12345678," + owner + ":" + hOwner,
			tales:    []decide.Tale{{invalid, ttl3days}},
			wantNews: []decide.Tale{{invalid, ttl3days}}, wantRecord: invalid + ":" + h3 + "," + owner + ":" + hOwner},
		{desc: "an entry with a hash of the wrong length is not a match", record: invalid + ":" + h3[:6],
			tales:    []decide.Tale{{invalid, ttl3days}},
			wantNews: []decide.Tale{{invalid, ttl3days}}, wantRecord: invalid + ":" + h3},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			news, next := decide.Tell(tc.record, tc.tales)
			require.Equal(t, tc.wantNews, news)
			require.Equal(t, tc.wantRecord, next)
			if len(news) > 0 {
				again, same := decide.Tell(next, tc.tales)
				require.Empty(t, again, "what was recorded is not told again")
				require.Equal(t, next, same)
			}
		})
	}
	require.Len(t, h3, 8)
	require.NotEqual(t, h3, h4)
}
