package testsupport

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSyncBufferConcurrentWrites(t *testing.T) {
	var b SyncBuffer
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Go(func() { fmt.Fprintf(&b, "%d\n", i) })
	}
	wg.Wait()
	if got := len(b.String()); got != 20 {
		t.Fatalf("10 writes of 2 bytes gave %d bytes: %q", got, b.String())
	}
}

func TestTail(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"a\nb\nc", 2, "b\nc"},
		{"a\nb", 5, "a\nb"},
		{"", 1, ""},
	} {
		if got := Tail(tc.in, tc.n); got != tc.want {
			t.Errorf("Tail(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

func TestEventuallyReturnsOnceTrue(t *testing.T) {
	calls := 0
	Eventually(t, "the third call", time.Second, time.Millisecond, func() bool { calls++; return calls == 3 }, nil)
	if calls != 3 {
		t.Fatalf("cond called %d times, want 3", calls)
	}
}

// recorder is a testing.TB that records Fatal instead of stopping.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper()           {}
func (r *recorder) Fatal(args ...any) { r.failed = fmt.Sprint(args...) }

func TestEventuallyFailsWithDescription(t *testing.T) {
	r := &recorder{TB: t}
	Eventually(r, "never", 20*time.Millisecond, time.Millisecond, func() bool { return false }, func() string { return "last: 42" })
	if r.failed == "" {
		t.Fatal("Eventually did not fail for a condition that never held")
	}
	for _, want := range []string{"timed out after 20ms waiting for never", "last: 42"} {
		if !strings.Contains(r.failed, want) {
			t.Errorf("failure %q does not say %q", r.failed, want)
		}
	}
}

func TestUntar(t *testing.T) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, f := range []struct{ name, body string }{{"op/manifest.json", "{}"}, {"op/xid.log", "Xid 46"}} {
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.body)), Typeflag: tar.TypeReg}))
		_, err := tw.Write([]byte(f.body))
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	require.NoError(t, gz.Close())
	names, files := Untar(t, buf.Bytes())
	require.Equal(t, []string{"op/manifest.json", "op/xid.log"}, names)
	require.Equal(t, "Xid 46", string(files["xid.log"]))
}
