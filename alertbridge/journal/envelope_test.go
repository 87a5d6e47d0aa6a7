package journal

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden entry files in testdata/")

// TestEnvelopeGolden pins the on-disk format: a journal written by one
// version of the bridge must be read by the next.
func TestEnvelopeGolden(t *testing.T) {
	webhook, err := os.ReadFile("testdata/webhook.json")
	require.NoError(t, err)
	received := time.Date(2026, 3, 4, 10, 15, 30, 123456789, time.UTC)
	cases := []struct {
		desc   string
		golden string
		entry  Entry
	}{
		{
			desc:   "Alertmanager webhook stored as JSON",
			golden: "testdata/golden/01772619330123456789.json",
			entry:  Entry{ID: "01772619330123456789", Key: "sha256:5a8c1e3f", Received: received, Payload: webhook},
		},
		{
			desc:   "non-JSON payload stored as base64",
			golden: "testdata/golden/01772619330123456790.json",
			entry:  Entry{ID: "01772619330123456790", Key: "sha256:00", Received: received, Payload: []byte("not json\x00\xff")},
		},
	}
	for _, c := range cases {
		t.Run(c.desc, func(t *testing.T) {
			got, err := encode(c.entry)
			require.NoError(t, err)
			if *update {
				require.NoError(t, os.MkdirAll(filepath.Dir(c.golden), 0o755))
				require.NoError(t, os.WriteFile(c.golden, got, 0o644))
			}
			want, err := os.ReadFile(c.golden)
			require.NoError(t, err)
			require.Equal(t, string(want), string(got), "encoding changed; old journals must still decode")

			e, err := decode(want)
			require.NoError(t, err)
			require.Equal(t, c.entry, e)
		})
	}
}

func TestDecodeRejects(t *testing.T) {
	good, err := encode(Entry{ID: "00000000000000000001", Key: "k", Received: time.Unix(1, 0).UTC(), Payload: []byte(`{"a":1}`)})
	require.NoError(t, err)
	cases := []struct {
		desc string
		data []byte
		want string
	}{
		{desc: "empty", data: nil, want: "empty file"},
		{desc: "truncated", data: good[:len(good)-5], want: "malformed envelope"},
		{desc: "trailing data", data: append(bytes.Clone(good), `{}`...), want: "data after the envelope"},
		{desc: "unknown field", data: bytes.Replace(good, []byte(`"key"`), []byte(`"kex"`), 1), want: "unknown field"},
		{desc: "changed key", data: bytes.Replace(good, []byte(`"key":"k"`), []byte(`"key":"j"`), 1), want: "checksum mismatch"},
		{desc: "changed payload", data: bytes.Replace(good, []byte(`{"a":1}`), []byte(`{"a":2}`), 1), want: "checksum mismatch"},
		{desc: "missing received", data: bytes.Replace(good, []byte(`"received":"1970-01-01T00:00:01Z"`), []byte(`"received":"0001-01-01T00:00:00Z"`), 1), want: "missing received"},
		{desc: "both payload forms", data: bytes.Replace(good, []byte(`"payload":`), []byte(`"payloadBase64":"AA==","payload":`), 1), want: "both payload"},
		{desc: "whitespace without payload", data: []byte(`{"id":"1","key":"k","received":"1970-01-01T00:00:01Z","crc32c":0,"payloadSuffix":"\n"}`), want: "without payload"},
	}
	for _, c := range cases {
		t.Run(c.desc, func(t *testing.T) {
			_, err := decode(c.data)
			require.ErrorContains(t, err, c.want)
		})
	}
}

// FuzzEnvelope checks that every payload and key round-trips byte for byte
// and that decode never panics on what encode did not write.
func FuzzEnvelope(f *testing.F) {
	webhook, err := os.ReadFile("testdata/webhook.json")
	require.NoError(f, err)
	for _, seed := range [][]byte{webhook, nil, []byte(`null`), []byte(" {}\n"), []byte(`[1,"<&>"]`), []byte("{\"a\":\"\\u2028\"}"), {0xff, '{'}} {
		f.Add("sha256:00", seed)
	}
	f.Add("\xff", []byte(`{}`))
	f.Fuzz(func(t *testing.T, key string, payload []byte) {
		e := Entry{ID: "00000000000000000042", Key: key, Received: time.Unix(0, 42).UTC(), Payload: payload}
		data, err := encode(e)
		if !utf8.ValidString(key) {
			require.ErrorContains(t, err, "not valid UTF-8", "encoding/json would mangle the key")
			return
		}
		require.NoError(t, err)
		got, err := decode(data)
		require.NoError(t, err)
		require.Equal(t, e.ID, got.ID)
		require.Equal(t, key, got.Key)
		require.True(t, bytes.Equal(payload, got.Payload), "payload %q came back as %q", payload, got.Payload)

		_, _ = decode(payload) // Must not panic.
	})
}
