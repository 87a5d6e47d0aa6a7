package payload_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/alertbridge/payload"
)

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return data
}

func TestDecodeFixtures(t *testing.T) {
	for _, tc := range []struct {
		file      string
		status    string
		alerts    int
		firing    []string
		truncated uint64
	}{
		{file: "gpu-lost.json", status: "firing", alerts: 1, firing: []string{"5f1c3a9be0d2c471"}},
		{file: "multi.json", status: "firing", alerts: 3, firing: []string{"0c2f9e1d4b7a5c38", "7d3e8a2b1c0f9e46"}},
		{file: "resolved.json", status: "resolved", alerts: 1},
		{file: "truncated.json", status: "firing", alerts: 2, firing: []string{"1e2d3c4b5a697887", "2f3e4d5c6b7a8998"}, truncated: 38},
	} {
		t.Run(tc.file, func(t *testing.T) {
			m, err := payload.Decode(strings.NewReader(string(readFixture(t, tc.file))))
			require.NoError(t, err)
			require.Equal(t, payload.Version, m.Version)
			require.Equal(t, tc.status, m.Status)
			require.Len(t, m.Alerts, tc.alerts)
			require.Equal(t, tc.firing, m.Firing())
			require.Equal(t, tc.truncated, m.TruncatedAlerts)
			require.NotEmpty(t, m.GroupKey)
			require.NotEmpty(t, m.CommonLabels["alertname"])
		})
	}
}

func TestFiringAndAnnotated(t *testing.T) {
	m, err := payload.DecodeBytes([]byte(`{"version":"4","receiver":"r","status":"firing","alerts":[
		{"status":"firing","fingerprint":"b"},
		{"status":"resolved","fingerprint":"c","annotations":{"kubemedic_skip_auto_close":"false"}},
		{"status":"firing","fingerprint":"a","annotations":{"x":"yes"}},
		{"status":"firing","fingerprint":"b"}]}`))
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, m.Firing(), "sorted and unique")
	require.True(t, m.Annotated("x"))
	require.False(t, m.Annotated("kubemedic_skip_auto_close"), `"false" is not set`)
	require.False(t, m.Annotated("y"))
}

func TestDecodeErrors(t *testing.T) {
	const ok = `{"version":"4","receiver":"gpu-oncall","status":"firing","alerts":[{"status":"firing","fingerprint":"5f1c3a9be0d2c471"}]}`
	for _, tc := range []struct {
		desc  string
		body  string
		field string
		msg   string
	}{
		{desc: "empty body", body: "", msg: "empty body"},
		{desc: "only whitespace", body: " \n", msg: "empty body"},
		{desc: "malformed JSON", body: `{"version":"4",`, msg: "malformed JSON"},
		{desc: "syntax error", body: `{"version":"4" "receiver":"r"}`, msg: "malformed JSON at byte 16"},
		{desc: "not an object", body: `[1,2]`, msg: "want payload.Message, got JSON array"},
		{desc: "unknown version 3", body: strings.Replace(ok, `"4"`, `"3"`, 1), field: "version", msg: `unsupported version "3" (want "4")`},
		{desc: "missing version", body: strings.Replace(ok, `"version":"4",`, ``, 1), field: "version", msg: `missing (want "4")`},
		{desc: "version as a number", body: strings.Replace(ok, `"4"`, `4`, 1), field: "version", msg: "want string, got JSON number"},
		{desc: "null", body: `null`, field: "version", msg: "missing"},
		{desc: "missing receiver", body: strings.Replace(ok, `"receiver":"gpu-oncall",`, ``, 1), field: "receiver", msg: "missing"},
		{desc: "bad group status", body: strings.Replace(ok, `"status":"firing","alerts"`, `"status":"pending","alerts"`, 1), field: "status", msg: `"pending" is neither firing nor resolved`},
		{desc: "no alerts", body: `{"version":"4","receiver":"r","status":"firing","alerts":[]}`, field: "alerts", msg: "empty"},
		{desc: "missing fingerprint", body: strings.Replace(ok, `,"fingerprint":"5f1c3a9be0d2c471"`, ``, 1), field: "alerts[0].fingerprint", msg: "missing"},
		{desc: "bad alert status", body: strings.Replace(ok, `{"status":"firing","fingerprint"`, `{"status":"suppressed","fingerprint"`, 1), field: "alerts[0].status", msg: `"suppressed" is neither firing nor resolved`},
		{desc: "bad time", body: strings.Replace(ok, `"fingerprint"`, `"startsAt":"yesterday","fingerprint"`, 1), msg: "malformed JSON"},
		{desc: "labels of the wrong type", body: strings.Replace(ok, `"fingerprint"`, `"labels":["a"],"fingerprint"`, 1), field: "alerts.labels", msg: "want template.KV, got JSON array"},
		{desc: "trailing data", body: ok + ` {"version":"4"}`, msg: "data after the payload object"},
		{desc: "trailing garbage", body: ok + "x", msg: "data after the payload object"},
		{desc: "trailing brace", body: ok + "}", msg: "data after the payload object"},
		{desc: "trailing bracket", body: ok + "]", msg: "data after the payload object"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			m, err := payload.DecodeBytes([]byte(tc.body))
			require.Nil(t, m)
			var pe *payload.Error
			require.ErrorAs(t, err, &pe)
			require.Equal(t, tc.field, pe.Field)
			require.Contains(t, pe.Msg, tc.msg)
			require.True(t, strings.HasPrefix(err.Error(), "payload: "), err.Error())
		})
	}
	t.Run("trailing whitespace is fine", func(t *testing.T) {
		_, err := payload.DecodeBytes([]byte(ok + "\n\t "))
		require.NoError(t, err)
	})
	t.Run("read error", func(t *testing.T) {
		boom := errors.New("connection reset")
		_, err := payload.Decode(iotest.ErrReader(boom))
		require.ErrorIs(t, err, boom)
		require.ErrorContains(t, err, "payload: read: connection reset")
	})
}
