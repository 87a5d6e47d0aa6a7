package ghclient

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
)

// Auth selects GitHub credentials: exactly one of TokenFile, or the three
// GitHub App fields.
type Auth struct {
	// TokenFile holds a personal access or installation token, re-read when
	// its modification time or size changes (Kubernetes rotates mounted
	// Secrets in place).
	TokenFile string
	// AppID, InstallationID and AppPrivateKeyFile identify a GitHub App
	// installation; its short-lived tokens are minted and renewed by
	// ghinstallation.
	AppID             int64
	InstallationID    int64
	AppPrivateKeyFile string
}

// AuthError is credentials that could not be read or minted locally. It
// names the file, never its contents.
type AuthError struct {
	Source string
	Err    error
}

func (e *AuthError) Error() string {
	return "github credentials from " + e.Source + ": " + e.Err.Error()
}

func (e *AuthError) Unwrap() error { return e.Err }

// NewHTTPClient returns an HTTP client that authenticates every request as
// a says. baseURL is the same REST root as Options.BaseURL ("" for
// github.com); a GitHub App mints its tokens there. The token file is read
// once here so that a missing or empty file fails at start.
func NewHTTPClient(a Auth, baseURL string) (*http.Client, error) {
	hasToken := a.TokenFile != ""
	hasApp := a.AppID != 0 || a.InstallationID != 0 || a.AppPrivateKeyFile != ""
	base := http.DefaultTransport.(*http.Transport).Clone()
	switch {
	case hasToken && hasApp:
		return nil, errors.New("github auth: set either a token file or a GitHub App (app ID, installation ID, private key file), not both")
	case !hasToken && !hasApp:
		return nil, errors.New("github auth: no credentials: set a token file or a GitHub App (app ID, installation ID, private key file)")
	case hasToken:
		t := &tokenFileTransport{path: a.TokenFile, next: base}
		if _, err := t.current(); err != nil {
			return nil, fmt.Errorf("github auth: %w", err)
		}
		return &http.Client{Transport: t}, nil
	}

	var missing []string
	if a.AppID <= 0 {
		missing = append(missing, "app ID")
	}
	if a.InstallationID <= 0 {
		missing = append(missing, "installation ID")
	}
	if a.AppPrivateKeyFile == "" {
		missing = append(missing, "private key file")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("github auth: GitHub App needs %s", strings.Join(missing, ", "))
	}
	apiBase, _, err := apiURLs(baseURL)
	if err != nil {
		return nil, fmt.Errorf("github auth: %w", err)
	}
	if _, err := os.Stat(a.AppPrivateKeyFile); err != nil {
		return nil, fmt.Errorf("github auth: GitHub App %d private key: %w", a.AppID, err)
	}
	itr, err := ghinstallation.NewKeyFromFile(base, a.AppID, a.InstallationID, a.AppPrivateKeyFile)
	if err != nil {
		// Parse errors are not repeated: the only safe thing to say about a
		// key that does not parse is that it does not.
		return nil, fmt.Errorf("github auth: GitHub App %d private key %s: not a readable PEM-encoded RSA private key",
			a.AppID, a.AppPrivateKeyFile)
	}
	itr.BaseURL = strings.TrimSuffix(apiBase.String(), "/")
	return &http.Client{Transport: &appTransport{itr: itr, source: fmt.Sprintf("GitHub App %d installation %d", a.AppID, a.InstallationID)}}, nil
}

// tokenFileTransport sets "Authorization: Bearer <token>" from a file.
type tokenFileTransport struct {
	path string
	next http.RoundTripper

	// mu guards the cached token and the file state it was read at.
	mu      sync.Mutex
	token   string
	modTime time.Time
	size    int64
}

// current returns the token, re-reading the file when it changed.
func (t *tokenFileTransport) current() (string, error) {
	source := "token file " + t.path
	fi, err := os.Stat(t.path)
	if err != nil {
		return "", &AuthError{Source: source, Err: err}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.token != "" && fi.ModTime().Equal(t.modTime) && fi.Size() == t.size {
		return t.token, nil
	}
	b, err := os.ReadFile(t.path)
	if err != nil {
		return "", &AuthError{Source: source, Err: err}
	}
	tok := strings.TrimSpace(string(b))
	switch {
	case tok == "":
		return "", &AuthError{Source: source, Err: errors.New("file is empty")}
	case strings.ContainsAny(tok, " \t\r\n"):
		return "", &AuthError{Source: source, Err: errors.New("file holds more than one word")}
	}
	t.token, t.modTime, t.size = tok, fi.ModTime(), fi.Size()
	return tok, nil
}

func (t *tokenFileTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	tok, err := t.current()
	if err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, err
	}
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Bearer "+tok)
	return t.next.RoundTrip(r)
}

// appTransport turns ghinstallation's token failures into *AuthError, so
// that they are told apart from network errors.
type appTransport struct {
	itr    *ghinstallation.Transport
	source string
}

func (t *appTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if _, err := t.itr.Token(req.Context()); err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, &AuthError{Source: t.source, Err: err}
	}
	return t.itr.RoundTrip(req)
}
