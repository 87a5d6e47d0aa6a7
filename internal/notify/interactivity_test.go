package notify_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubemedic/kubemedic/internal/notify"
)

// sign is Slack's v0 signature, written out here independently of
// notifytest so that both are checked against the documented formula.
func sign(secret string, at time.Time, body string) http.Header {
	ts := strconv.FormatInt(at.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(mac, "v0:%s:%s", ts, body)
	h := http.Header{}
	h.Set("X-Slack-Request-Timestamp", ts)
	h.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
	return h
}

func TestVerifier(t *testing.T) {
	const secret = "8f742231b10e8888abcd99yyyzzz85a5"
	body := "payload=%7B%22type%22%3A%22block_actions%22%7D"
	now := time.Now()
	for _, tc := range []struct {
		desc   string
		header http.Header
		body   string
		want   error
	}{
		{desc: "signed as Slack signs", header: sign(secret, now, body), body: body},
		{desc: "4 minutes old is within the window", header: sign(secret, now.Add(-4*time.Minute), body), body: body},
		{desc: "wrong secret", header: sign("another-secret", now, body), body: body, want: notify.ErrForged},
		{desc: "body changed after signing", header: sign(secret, now, body), body: body + "x", want: notify.ErrForged},
		{desc: "no headers", header: http.Header{}, body: body, want: notify.ErrForged},
		{desc: "not v0", header: func() http.Header { h := sign(secret, now, body); h.Set("X-Slack-Signature", "v1=00"); return h }(), body: body, want: notify.ErrForged},
		{desc: "6 minutes old", header: sign(secret, now.Add(-6*time.Minute), body), body: body, want: notify.ErrStale},
		{desc: "6 minutes ahead", header: sign(secret, now.Add(6*time.Minute), body), body: body, want: notify.ErrStale},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			v := notify.NewVerifier(secret, 0, nil)
			err := v.Verify(tc.header, []byte(tc.body))
			if tc.want == nil {
				require.NoError(t, err)
				require.ErrorIs(t, v.Verify(tc.header, []byte(tc.body)), notify.ErrReplayed, "the same request again is a replay")
				return
			}
			require.ErrorIs(t, err, tc.want)
			require.Zero(t, v.Remembered(), "a refused request is not remembered")
		})
	}
}

// TestVerifierReplayWithRecasedSignature: slack-go reads the signature's
// hex in any case, so a replay with the case of its letters changed is
// the same signature, and refused.
func TestVerifierReplayWithRecasedSignature(t *testing.T) {
	const secret = "s3cr3t"
	body := "payload=%7B%7D"
	h := sign(secret, time.Now(), body)
	v := notify.NewVerifier(secret, 0, nil)
	require.NoError(t, v.Verify(h, []byte(body)))
	upper := h.Clone()
	upper.Set("X-Slack-Signature", "v0="+strings.ToUpper(strings.TrimPrefix(h.Get("X-Slack-Signature"), "v0=")))
	require.NotEqual(t, h.Get("X-Slack-Signature"), upper.Get("X-Slack-Signature"))
	require.ErrorIs(t, v.Verify(upper, []byte(body)), notify.ErrReplayed)
	require.Equal(t, 1, v.Remembered())
}

func TestVerifierMemoryIsBounded(t *testing.T) {
	const secret = "s3cr3t"
	now := time.Now()
	clk := clocktesting.NewFakeClock(now)
	v := notify.NewVerifier(secret, 2, clk)
	require.NoError(t, v.Verify(sign(secret, now, "a"), []byte("a")))
	require.NoError(t, v.Verify(sign(secret, now, "b"), []byte("b")))
	require.ErrorIs(t, v.Verify(sign(secret, now, "c"), []byte("c")), notify.ErrBusy, "full of live signatures: refused, not forgotten")
	require.ErrorIs(t, v.Verify(sign(secret, now, "a"), []byte("a")), notify.ErrReplayed)
	clk.Step(notify.SignatureWindow + 2*time.Second)
	// The fake clock moved past the window; slack-go's own check uses the
	// real time, so the request is signed at the real now.
	require.NoError(t, v.Verify(sign(secret, time.Now(), "c"), []byte("c")), "expired signatures make room")
	require.Equal(t, 1, v.Remembered())
}

func TestRespondEphemeral(t *testing.T) {
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf := make([]byte, 1024)
		n, _ := r.Body.Read(buf)
		got = string(buf[:n])
		if r.URL.Path == "/gone" {
			http.Error(w, "expired_url", http.StatusNotFound)
		}
	}))
	defer srv.Close()
	require.NoError(t, notify.RespondEphemeral(t.Context(), nil, srv.URL+"/ok", "only the owner can"))
	require.JSONEq(t, `{"text":"only the owner can","response_type":"ephemeral","replace_original":false,"delete_original":false}`, got)
	err := notify.RespondEphemeral(t.Context(), nil, srv.URL+"/gone", "x")
	require.Error(t, err)
	require.NotContains(t, err.Error(), srv.URL+"/gone", "the response_url is a secret")
}
