package bridge

import (
	"bytes"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"
)

// Auth says how webhooks authenticate: a bearer token or a basic-auth user
// and password, each read from a file, or nothing when Insecure is set.
type Auth struct {
	BearerTokenFile   string
	BasicUsernameFile string
	BasicPasswordFile string
	// Insecure accepts webhooks without credentials (--insecure-no-auth).
	Insecure bool
}

// Validate refuses a configuration without credentials unless Insecure is set,
// and a configuration whose files cannot be read. Errors name the file, never
// its content.
func (a Auth) Validate() error {
	basic := a.BasicUsernameFile != "" || a.BasicPasswordFile != ""
	switch {
	case a.Insecure && (a.BearerTokenFile != "" || basic):
		return errors.New("webhook auth: --insecure-no-auth together with credential files; choose one")
	case a.Insecure:
		return nil
	case a.BearerTokenFile != "" && basic:
		return errors.New("webhook auth: both a bearer token file and basic-auth files are set; choose one")
	case a.BearerTokenFile == "" && !basic:
		return errors.New("webhook auth: no credentials: set --auth-bearer-token-file or --auth-basic-username-file and --auth-basic-password-file (or --insecure-no-auth to accept anyone)")
	case basic && (a.BasicUsernameFile == "" || a.BasicPasswordFile == ""):
		return errors.New("webhook auth: basic auth needs both --auth-basic-username-file and --auth-basic-password-file")
	}
	for _, f := range []string{a.BearerTokenFile, a.BasicUsernameFile, a.BasicPasswordFile} {
		if f == "" {
			continue
		}
		if _, err := readSecret(f); err != nil {
			return fmt.Errorf("webhook auth: %w", err)
		}
	}
	return nil
}

// readSecret reads a credential file. Its errors name the file only.
func readSecret(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("read %s: %v", path, pe.Err)
		}
		return nil, fmt.Errorf("read %s: failed", path)
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil, fmt.Errorf("%s is empty", path)
	}
	return data, nil
}

// secretFile caches a credential file and re-reads it when it changes, so a
// rotated Kubernetes Secret takes effect without a restart.
type secretFile struct {
	path string

	mu      sync.Mutex
	modTime time.Time
	size    int64
	value   []byte
}

func (s *secretFile) get() ([]byte, error) {
	fi, err := os.Stat(s.path)
	if err != nil {
		return nil, fmt.Errorf("stat %s: %w", s.path, errors.Unwrap(err))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.value != nil && fi.ModTime().Equal(s.modTime) && fi.Size() == s.size {
		return s.value, nil
	}
	v, err := readSecret(s.path)
	if err != nil {
		return nil, err
	}
	s.value, s.modTime, s.size = v, fi.ModTime(), fi.Size()
	return v, nil
}

// authenticator checks one request.
type authenticator struct {
	insecure bool
	bearer   *secretFile
	user     *secretFile
	password *secretFile
}

func newAuthenticator(a Auth) *authenticator {
	au := &authenticator{insecure: a.Insecure}
	if a.BearerTokenFile != "" {
		au.bearer = &secretFile{path: a.BearerTokenFile}
	}
	if a.BasicUsernameFile != "" {
		au.user = &secretFile{path: a.BasicUsernameFile}
		au.password = &secretFile{path: a.BasicPasswordFile}
	}
	return au
}

// errUnauthorized is a request without valid credentials.
var errUnauthorized = errors.New("unauthorized")

// check returns nil for an authenticated request, errUnauthorized for bad or
// missing credentials, and another error when the credential files cannot be
// read (the server answers 500 then: it is our fault, not the caller's).
func (au *authenticator) check(r *http.Request) error {
	if au.insecure {
		return nil
	}
	if au.bearer != nil {
		want, err := au.bearer.get()
		if err != nil {
			return err
		}
		got, ok := bearerToken(r)
		if !ok || subtle.ConstantTimeCompare([]byte(got), want) != 1 {
			return errUnauthorized
		}
		return nil
	}
	wantUser, err := au.user.get()
	if err != nil {
		return err
	}
	wantPass, err := au.password.get()
	if err != nil {
		return err
	}
	user, pass, ok := r.BasicAuth()
	// Compare both, always, so timing does not tell which one was wrong.
	u := subtle.ConstantTimeCompare([]byte(user), wantUser)
	p := subtle.ConstantTimeCompare([]byte(pass), wantPass)
	if !ok || u&p != 1 {
		return errUnauthorized
	}
	return nil
}

func bearerToken(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	const prefix = "bearer "
	if len(h) <= len(prefix) || !equalFoldASCII(h[:len(prefix)], prefix) {
		return "", false
	}
	return h[len(prefix):], true
}

func equalFoldASCII(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		ca, cb := a[i], b[i]
		if 'A' <= ca && ca <= 'Z' {
			ca += 'a' - 'A'
		}
		if ca != cb {
			return false
		}
	}
	return true
}
