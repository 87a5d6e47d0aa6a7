package evict

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"

	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// maxRefusalBody bounds how much of a 429 answer to an eviction is read to
// look for the disruption budget cause. The API server's answer is a few
// hundred bytes.
const maxRefusalBody = 64 << 10

// NewEvictor returns an Evictor with its own uncached client for the API
// server of cfg, made with EvictionConfig. scheme must know core/v1 and
// policy/v1 (client-go's scheme does).
func NewEvictor(cfg *rest.Config, scheme *runtime.Scheme) (*Evictor, error) {
	c, err := client.New(EvictionConfig(cfg), client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("create eviction client: %w", err)
	}
	return &Evictor{Client: c}, nil
}

// EvictionConfig returns a copy of cfg whose transport removes the
// Retry-After header from the eviction API's disruption budget refusals.
//
// The API server refuses an eviction with 429 and Retry-After: 10 while a
// budget's status.observedGeneration is behind its generation (just after
// the budget was created or changed, or always when no disruption controller
// runs), and client-go then sleeps and retries the same eviction up to ten
// times, by itself, inside the one call: about 100 s during which the
// reconcile that called Evict is stuck, and a context deadline ends it with
// an error that has lost the 429. Without the header client-go returns the
// refusal at once, and the drain's next pass evicts again. Other answers,
// the API server's own throttling (429 without a budget cause) included,
// are passed on untouched.
func EvictionConfig(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &budgetRefusalTransport{next: rt} })
	return cfg
}

// budgetRefusalTransport drops Retry-After from 429 answers to POSTs of the
// eviction subresource whose body names the DisruptionBudget cause.
type budgetRefusalTransport struct {
	next http.RoundTripper
}

func (t *budgetRefusalTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusTooManyRequests || req.Method != http.MethodPost ||
		!strings.HasSuffix(req.URL.Path, "/eviction") || resp.Header.Get("Retry-After") == "" {
		return resp, err
	}
	body, readErr := io.ReadAll(io.LimitReader(resp.Body, maxRefusalBody))
	unread := resp.Body
	// Whatever was not read still follows what was.
	resp.Body = readCloser{Reader: io.MultiReader(bytes.NewReader(body), unread), Closer: unread}
	if readErr == nil && bytes.Contains(body, []byte(policyv1.DisruptionBudgetCause)) {
		resp.Header.Del("Retry-After")
	}
	return resp, nil
}

type readCloser struct {
	io.Reader
	io.Closer
}
