package bridge_test

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/alertbridge/bridge"
	"github.com/kubemedic/kubemedic/alertbridge/config"
	"github.com/kubemedic/kubemedic/alertbridge/journal"
	"github.com/kubemedic/kubemedic/alertbridge/payload"
	"github.com/kubemedic/kubemedic/alertbridge/render"
)

func TestWebhookRefusals(t *testing.T) {
	e := newEnv(t, baseConfig, func(o *bridge.Options) { o.MaxBodyBytes = 64 << 10 })
	body := gpuLost("gpu-5", false)
	tests := []struct {
		desc string
		auth string
		body []byte
		want int
	}{
		{desc: "no credentials", body: body, want: http.StatusUnauthorized},
		{desc: "wrong token", auth: "Bearer nope", body: body, want: http.StatusUnauthorized},
		{desc: "token with a suffix", auth: "Bearer " + webhookToken + "x", body: body, want: http.StatusUnauthorized},
		{desc: "basic auth instead of the bearer token", auth: "Basic " + base64.StdEncoding.EncodeToString([]byte("u:"+webhookToken)), body: body, want: http.StatusUnauthorized},
		{desc: "oversized body", auth: "Bearer " + webhookToken, body: bytes.Repeat([]byte(" "), 65<<10), want: http.StatusRequestEntityTooLarge},
		{desc: "malformed JSON", auth: "Bearer " + webhookToken, body: []byte(`{"version":"4",`), want: http.StatusBadRequest},
		{desc: "unknown version", auth: "Bearer " + webhookToken, body: bytes.Replace(body, []byte(`"version":"4"`), []byte(`"version":"3"`), 1), want: http.StatusBadRequest},
		{desc: "bearer scheme is case-insensitive", auth: "bearer " + webhookToken, body: body, want: http.StatusOK},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			assert.Equal(t, tc.want, e.postWith(tc.body, tc.auth))
		})
	}
	e.settle()
	assert.Len(t, e.fake.Issues(repo), 1, "only the authenticated, valid webhook filed an issue")
	assert.Equal(t, 4.0, e.metric("kubemedic_alertbridge_webhooks_total", map[string]string{"code": "401"}))
	resp, err := http.Get(e.url + "/webhook")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)

	logs := e.logs.String()
	assert.NotContains(t, logs, webhookToken, "the webhook token is never logged")
	assert.NotContains(t, logs, githubToken, "the GitHub token is never logged")
	assert.Contains(t, logs, "bad or missing credentials")
}

func TestJournalUnwritableAnswers503(t *testing.T) {
	e := newEnv(t, baseConfig, nil)
	require.NoError(t, os.RemoveAll(filepath.Join(e.dir, "journal")))
	require.NoError(t, os.WriteFile(filepath.Join(e.dir, "journal"), []byte("not a directory"), 0o600))
	assert.Equal(t, http.StatusServiceUnavailable, e.post(gpuLost("gpu-6", false)))
	assert.Empty(t, e.fake.Issues(repo))
}

func TestAuthIsRequiredAtStart(t *testing.T) {
	cfg, err := config.Parse("x.yaml", []byte(baseConfig))
	require.NoError(t, err)
	j, err := journal.Open(t.TempDir(), nil)
	require.NoError(t, err)
	defer j.Close()
	_, err = bridge.New(bridge.Options{Config: cfg, Journal: j, GitHub: nil})
	require.Error(t, err)

	for _, a := range []bridge.Auth{
		{},
		{BasicUsernameFile: "/nonexistent/user"},
		{BearerTokenFile: "/nonexistent/token"},
		{BearerTokenFile: "/x", Insecure: true},
	} {
		err := a.Validate()
		require.Error(t, err, "%+v", a)
		assert.True(t, strings.HasPrefix(err.Error(), "webhook auth:"), err.Error())
	}
	empty := filepath.Join(t.TempDir(), "empty")
	require.NoError(t, os.WriteFile(empty, nil, 0o600))
	assert.ErrorContains(t, bridge.Auth{BearerTokenFile: empty}.Validate(), "is empty")
	assert.NoError(t, bridge.Auth{Insecure: true}.Validate())
}

func TestBasicAuth(t *testing.T) {
	dir := t.TempDir()
	user, pass := filepath.Join(dir, "user"), filepath.Join(dir, "pass")
	require.NoError(t, os.WriteFile(user, []byte("alertmanager"), 0o600))
	require.NoError(t, os.WriteFile(pass, []byte("s3cret-pass"), 0o600))
	e := newEnv(t, baseConfig, func(o *bridge.Options) {
		o.Auth = bridge.Auth{BasicUsernameFile: user, BasicPasswordFile: pass}
	})
	basic := func(u, p string) string { return "Basic " + base64.StdEncoding.EncodeToString([]byte(u+":"+p)) }
	assert.Equal(t, http.StatusUnauthorized, e.postWith(gpuLost("a", false), basic("alertmanager", "wrong")))
	assert.Equal(t, http.StatusUnauthorized, e.postWith(gpuLost("a", false), basic("other", "s3cret-pass")))
	assert.Equal(t, http.StatusOK, e.postWith(gpuLost("a", false), basic("alertmanager", "s3cret-pass")))

	// A rotated password takes effect without a restart.
	require.NoError(t, os.WriteFile(pass, []byte("rotated-pass-2"), 0o600))
	assert.Equal(t, http.StatusUnauthorized, e.postWith(gpuLost("a", false), basic("alertmanager", "s3cret-pass")))
	assert.Equal(t, http.StatusOK, e.postWith(gpuLost("a", false), basic("alertmanager", "rotated-pass-2")))
}

func mustOpenJournal(t *testing.T, e *env) *journal.Journal {
	t.Helper()
	j, err := journal.Open(filepath.Join(e.dir, "journal"), nil)
	require.NoError(t, err)
	return j
}

func keyHashOf(t *testing.T, e *env, body []byte) string {
	t.Helper()
	m, err := payload.DecodeBytes(body)
	require.NoError(t, err)
	_, h, err := render.Key(e.cfg, m)
	require.NoError(t, err)
	return h
}
