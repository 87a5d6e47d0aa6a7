package ghclient_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/utils/clock"

	"github.com/kubemedic/kubemedic/alertbridge/ghclient"
)

// canary is a recognisable secret: it must never appear in an error or a log.
const canary = "ghp_CANARY7fa1b2c3d4e5f60718293a4b5c6d7e8f"

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

func TestNewHTTPClientRejectsBadConfig(t *testing.T) {
	notAKey := writeFile(t, "key.pem", "-----BEGIN RSA PRIVATE KEY-----\n"+canary+"\n-----END RSA PRIVATE KEY-----\n")
	garbageKey := writeFile(t, "garbage.pem", canary)
	for _, tc := range []struct {
		desc    string
		auth    ghclient.Auth
		wantErr string
	}{
		{desc: "no credentials", auth: ghclient.Auth{}, wantErr: "no credentials"},
		{desc: "token and app both set", auth: ghclient.Auth{TokenFile: "/t", AppID: 1}, wantErr: "not both"},
		{desc: "app without installation or key", auth: ghclient.Auth{AppID: 1}, wantErr: "installation ID, private key file"},
		{desc: "missing token file", auth: ghclient.Auth{TokenFile: filepath.Join(t.TempDir(), "absent")}, wantErr: "no such file"},
		{desc: "empty token file", auth: ghclient.Auth{TokenFile: writeFile(t, "token", " \n")}, wantErr: "file is empty"},
		{desc: "token file with two words", auth: ghclient.Auth{TokenFile: writeFile(t, "token", canary+"\n"+canary)}, wantErr: "more than one word"},
		{desc: "missing key file", auth: ghclient.Auth{AppID: 1, InstallationID: 2, AppPrivateKeyFile: "/nonexistent/key.pem"}, wantErr: "no such file"},
		{desc: "PEM that is not a key", auth: ghclient.Auth{AppID: 1, InstallationID: 2, AppPrivateKeyFile: notAKey}, wantErr: "not a readable PEM-encoded RSA private key"},
		{desc: "key file that is not PEM", auth: ghclient.Auth{AppID: 1, InstallationID: 2, AppPrivateKeyFile: garbageKey}, wantErr: "not a readable PEM-encoded RSA private key"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := ghclient.NewHTTPClient(tc.auth, "")
			require.ErrorContains(t, err, tc.wantErr)
			require.NotContains(t, err.Error(), canary)
			require.NotContains(t, err.Error(), canary[:12])
		})
	}
}

func TestTokenNeverLeaks(t *testing.T) {
	tokenFile := writeFile(t, "token", canary+"\n")
	hc, err := ghclient.NewHTTPClient(ghclient.Auth{TokenFile: tokenFile}, "")
	require.NoError(t, err)
	e := newEnv(t, func(o *ghclient.Options) { o.HTTPClient = hc })
	e.fake.SetToken("the-right-token")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e.onWait = func(n int) error {
		switch n {
		case 2:
			// Rotation gone wrong: the file disappears.
			require.NoError(t, os.Remove(tokenFile))
		case 4:
			cancel()
			return ctx.Err()
		}
		return nil
	}
	_, err = e.client.CreateIssue(ctx, repo, ghclient.NewIssue{Title: "t"})
	require.ErrorIs(t, err, context.Canceled)

	calls := e.fake.Calls()
	require.Len(t, calls, 2, "two 401s, then the token file was gone and nothing was sent")
	require.Equal(t, "Bearer "+canary, calls[0].Header.Get("Authorization"), "the token was sent, so leaks were possible")
	logs := e.logs.String()
	require.Contains(t, logs, "reason=unauthorized")
	require.Contains(t, logs, "reason=credentials")
	require.NotContains(t, err.Error(), canary)
	require.NotContains(t, logs, canary)
}

func TestTokenFileIsReReadWhenRotated(t *testing.T) {
	tokenFile := writeFile(t, "token", "expired-token")
	hc, err := ghclient.NewHTTPClient(ghclient.Auth{TokenFile: tokenFile}, "")
	require.NoError(t, err)
	e := newEnv(t, func(o *ghclient.Options) { o.HTTPClient = hc })
	e.fake.SetToken("rotated-token")
	e.onWait = func(int) error {
		// Kubernetes swaps the mounted Secret while the client backs off.
		require.NoError(t, os.WriteFile(tokenFile, []byte("rotated-token\n"), 0o600))
		later := time.Now().Add(time.Minute)
		return os.Chtimes(tokenFile, later, later)
	}
	_, err = e.client.CreateIssue(context.Background(), repo, ghclient.NewIssue{Title: "t"})
	require.NoError(t, err)
	var statuses []int
	for _, c := range e.fake.Calls() {
		statuses = append(statuses, c.Status)
	}
	require.Equal(t, []int{http.StatusUnauthorized, http.StatusCreated}, statuses)
}

func TestEnterpriseBaseURL(t *testing.T) {
	for _, tc := range []struct {
		desc string
		base func(e *env) string
	}{
		{desc: "an /api/v3/ URL is used as it is", base: func(e *env) string { return e.fake.EnterpriseURL() }},
		{desc: "a bare host gets /api/v3/ like go-github does", base: func(e *env) string { return e.fake.URL() }},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			e := newEnv(t)
			c, err := ghclient.New(ghclient.Options{BaseURL: tc.base(e)})
			require.NoError(t, err)
			e.fake.AddIssue(repo, "t", "", "kubemedic")
			got, err := c.ListIssues(context.Background(), repo, ghclient.StateAll, time.Time{}, "kubemedic")
			require.NoError(t, err)
			require.Len(t, got, 1)
			require.Equal(t, "/api/v3/repos/"+repo+"/issues", e.fake.Calls()[0].RawPath)
		})
	}

	_, err := ghclient.New(ghclient.Options{BaseURL: "ftp://ghe.example.com/"})
	require.ErrorContains(t, err, "want http(s)://")
	_, err = ghclient.New(ghclient.Options{BaseURL: "https://user:" + canary + "@ghe.example.com/api/v3/"})
	require.Error(t, err)
	require.NotContains(t, err.Error(), canary)
}

func TestGitHubAppOnEnterprise(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	keyPEM := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
	keyFile := writeFile(t, "app.pem", keyPEM)

	e := newEnv(t)
	// ghinstallation judges token expiry by the wall clock.
	e.fake.SetClock(clock.RealClock{})
	e.fake.SetToken("ghs_installation_token")
	hc, err := ghclient.NewHTTPClient(ghclient.Auth{AppID: 12345, InstallationID: 678, AppPrivateKeyFile: keyFile}, e.fake.EnterpriseURL())
	require.NoError(t, err)
	c, err := ghclient.New(ghclient.Options{BaseURL: e.fake.EnterpriseURL(), HTTPClient: hc})
	require.NoError(t, err)

	_, err = c.CreateIssue(context.Background(), repo, ghclient.NewIssue{Title: "t"})
	require.NoError(t, err)
	calls := e.fake.Calls()
	require.Len(t, calls, 2)
	require.Equal(t, "/api/v3/app/installations/678/access_tokens", calls[0].RawPath)
	require.Equal(t, "/api/v3/repos/"+repo+"/issues", calls[1].RawPath)
	require.Equal(t, "token ghs_installation_token", calls[1].Header.Get("Authorization"))
	keyBody := strings.Split(keyPEM, "\n")[1]
	require.NotContains(t, e.logs.String(), keyBody)
}
