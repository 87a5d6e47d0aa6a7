package bridge

import (
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func requestWith(authorization string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/webhook", nil)
	if authorization != "" {
		r.Header.Set("Authorization", authorization)
	}
	return r
}

func basicHeader(user, pass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}

func writeSecret(t *testing.T, path, value string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(value), 0o600))
}

func TestAuthenticatorBearer(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	writeSecret(t, tokenFile, "  tok-123\n") // surrounding space is trimmed
	au := newAuthenticator(Auth{BearerTokenFile: tokenFile})

	tests := []struct {
		desc string
		auth string
		want error
	}{
		{desc: "right token", auth: "Bearer tok-123", want: nil},
		{desc: "scheme in any case", auth: "BEARER tok-123", want: nil},
		{desc: "no header", auth: "", want: errUnauthorized},
		{desc: "scheme only", auth: "Bearer ", want: errUnauthorized},
		{desc: "wrong token", auth: "Bearer tok-124", want: errUnauthorized},
		{desc: "prefix of the token", auth: "Bearer tok-12", want: errUnauthorized},
		{desc: "token with a suffix", auth: "Bearer tok-1234", want: errUnauthorized},
		{desc: "token with the file's whitespace", auth: "Bearer   tok-123", want: errUnauthorized},
		{desc: "other scheme", auth: "Token tok-123", want: errUnauthorized},
		{desc: "basic auth carrying the token", auth: basicHeader("x", "tok-123"), want: errUnauthorized},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			err := au.check(requestWith(tc.auth))
			if tc.want == nil {
				assert.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, tc.want)
		})
	}
}

func TestAuthenticatorBasic(t *testing.T) {
	dir := t.TempDir()
	user, pass := filepath.Join(dir, "user"), filepath.Join(dir, "pass")
	writeSecret(t, user, "alertmanager\n")
	writeSecret(t, pass, "s3cret")
	au := newAuthenticator(Auth{BasicUsernameFile: user, BasicPasswordFile: pass})

	tests := []struct {
		desc string
		auth string
		want error
	}{
		{desc: "right user and password", auth: basicHeader("alertmanager", "s3cret"), want: nil},
		{desc: "wrong password", auth: basicHeader("alertmanager", "s3cre"), want: errUnauthorized},
		{desc: "wrong user", auth: basicHeader("alertmanage", "s3cret"), want: errUnauthorized},
		{desc: "both wrong", auth: basicHeader("a", "b"), want: errUnauthorized},
		{desc: "user and password swapped", auth: basicHeader("s3cret", "alertmanager"), want: errUnauthorized},
		{desc: "empty password", auth: basicHeader("alertmanager", ""), want: errUnauthorized},
		{desc: "no header", auth: "", want: errUnauthorized},
		{desc: "not base64", auth: "Basic %%%", want: errUnauthorized},
		{desc: "bearer instead", auth: "Bearer s3cret", want: errUnauthorized},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			err := au.check(requestWith(tc.auth))
			if tc.want == nil {
				assert.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, tc.want)
		})
	}
}

func TestAuthenticatorInsecureAcceptsAnyone(t *testing.T) {
	au := newAuthenticator(Auth{Insecure: true})
	assert.NoError(t, au.check(requestWith("")))
	assert.NoError(t, au.check(requestWith("Bearer whatever")))
}

func TestAuthenticatorRotation(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	writeSecret(t, tokenFile, "first-token")
	au := newAuthenticator(Auth{BearerTokenFile: tokenFile})
	require.NoError(t, au.check(requestWith("Bearer first-token")))

	t.Run("rewritten in place, other length", func(t *testing.T) {
		writeSecret(t, tokenFile, "second-token-longer")
		assert.ErrorIs(t, au.check(requestWith("Bearer first-token")), errUnauthorized)
		assert.NoError(t, au.check(requestWith("Bearer second-token-longer")))
	})
	t.Run("rewritten in place, same length, new mtime", func(t *testing.T) {
		writeSecret(t, tokenFile, "third-token-long-xx")
		future := time.Now().Add(time.Hour)
		require.NoError(t, os.Chtimes(tokenFile, future, future))
		assert.ErrorIs(t, au.check(requestWith("Bearer second-token-longer")), errUnauthorized)
		assert.NoError(t, au.check(requestWith("Bearer third-token-long-xx")))
	})
	t.Run("swapped like a Kubernetes Secret volume (symlink)", func(t *testing.T) {
		link := filepath.Join(dir, "token-link")
		v1, v2 := filepath.Join(dir, "v1"), filepath.Join(dir, "v2")
		writeSecret(t, v1, "link-token-1")
		writeSecret(t, v2, "link-token-two")
		require.NoError(t, os.Symlink(v1, link))
		au := newAuthenticator(Auth{BearerTokenFile: link})
		require.NoError(t, au.check(requestWith("Bearer link-token-1")))
		tmp := filepath.Join(dir, "token-link.tmp")
		require.NoError(t, os.Symlink(v2, tmp))
		require.NoError(t, os.Rename(tmp, link))
		assert.ErrorIs(t, au.check(requestWith("Bearer link-token-1")), errUnauthorized)
		assert.NoError(t, au.check(requestWith("Bearer link-token-two")))
	})
	t.Run("basic password rotated", func(t *testing.T) {
		user, pass := filepath.Join(dir, "user"), filepath.Join(dir, "pass")
		writeSecret(t, user, "am")
		writeSecret(t, pass, "pw-1")
		au := newAuthenticator(Auth{BasicUsernameFile: user, BasicPasswordFile: pass})
		require.NoError(t, au.check(requestWith(basicHeader("am", "pw-1"))))
		writeSecret(t, pass, "pw-two")
		assert.ErrorIs(t, au.check(requestWith(basicHeader("am", "pw-1"))), errUnauthorized)
		assert.NoError(t, au.check(requestWith(basicHeader("am", "pw-two"))))
	})
}

// A credential file that cannot be read is the server's fault: check must
// return an error that is not errUnauthorized (the handler answers 500), and
// the error must never carry the secret.
func TestAuthenticatorUnreadableFiles(t *testing.T) {
	type setup struct {
		auth    Auth
		breakIt func(t *testing.T)
		req     *http.Request
	}
	tests := []struct {
		desc string
		make func(t *testing.T, dir string) setup
	}{
		{desc: "bearer file removed", make: func(t *testing.T, dir string) setup {
			f := filepath.Join(dir, "token")
			writeSecret(t, f, "tok-secret-value")
			return setup{auth: Auth{BearerTokenFile: f}, req: requestWith("Bearer tok-secret-value"),
				breakIt: func(t *testing.T) { require.NoError(t, os.Remove(f)) }}
		}},
		{desc: "bearer file emptied", make: func(t *testing.T, dir string) setup {
			f := filepath.Join(dir, "token")
			writeSecret(t, f, "tok-secret-value")
			return setup{auth: Auth{BearerTokenFile: f}, req: requestWith("Bearer tok-secret-value"),
				breakIt: func(t *testing.T) { writeSecret(t, f, "\n") }}
		}},
		{desc: "bearer path becomes a directory", make: func(t *testing.T, dir string) setup {
			f := filepath.Join(dir, "token")
			writeSecret(t, f, "tok-secret-value")
			return setup{auth: Auth{BearerTokenFile: f}, req: requestWith("Bearer tok-secret-value"),
				breakIt: func(t *testing.T) {
					require.NoError(t, os.Remove(f))
					require.NoError(t, os.Mkdir(f, 0o700))
				}}
		}},
		{desc: "basic user file removed", make: func(t *testing.T, dir string) setup {
			u, p := filepath.Join(dir, "user"), filepath.Join(dir, "pass")
			writeSecret(t, u, "am")
			writeSecret(t, p, "pw-secret-value")
			return setup{auth: Auth{BasicUsernameFile: u, BasicPasswordFile: p}, req: requestWith(basicHeader("am", "pw-secret-value")),
				breakIt: func(t *testing.T) { require.NoError(t, os.Remove(u)) }}
		}},
		{desc: "basic password file removed", make: func(t *testing.T, dir string) setup {
			u, p := filepath.Join(dir, "user"), filepath.Join(dir, "pass")
			writeSecret(t, u, "am")
			writeSecret(t, p, "pw-secret-value")
			return setup{auth: Auth{BasicUsernameFile: u, BasicPasswordFile: p}, req: requestWith(basicHeader("am", "pw-secret-value")),
				breakIt: func(t *testing.T) { require.NoError(t, os.Remove(p)) }}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			s := tc.make(t, t.TempDir())
			au := newAuthenticator(s.auth)
			require.NoError(t, au.check(s.req), "works before the file breaks")
			s.breakIt(t)
			err := au.check(s.req)
			require.Error(t, err)
			assert.False(t, errors.Is(err, errUnauthorized), "an unreadable file is not the caller's fault: %v", err)
			assert.NotContains(t, err.Error(), "secret-value", "errors name the file, never its content")
		})
	}
}

func TestBearerTokenParsing(t *testing.T) {
	tests := []struct {
		desc, header, want string
		ok                 bool
	}{
		{desc: "canonical", header: "Bearer abc", want: "abc", ok: true},
		{desc: "lower case", header: "bearer abc", want: "abc", ok: true},
		{desc: "mixed case", header: "bEaReR abc", want: "abc", ok: true},
		{desc: "empty token", header: "Bearer ", ok: false},
		{desc: "no space", header: "Bearerabc", ok: false},
		{desc: "short", header: "Bear", ok: false},
		{desc: "non-ASCII look-alike", header: "Bearer\u00a0abc", ok: false},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			got, ok := bearerToken(requestWith(tc.header))
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.want, got)
		})
	}
}
