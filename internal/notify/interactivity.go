package notify

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"
	"k8s.io/utils/clock"
)

// Errors of Verifier.Verify. Each is answered 401 and does nothing.
var (
	// ErrForged: no signature, a malformed one, or one that does not
	// match the body under the signing secret.
	ErrForged = errors.New("slack request signature is missing or wrong")
	// ErrStale: a valid signature on a timestamp more than five minutes
	// from now (slack-go's window).
	ErrStale = errors.New("slack request timestamp is more than 5 minutes off")
	// ErrReplayed: a request whose signature was seen before within the
	// window.
	ErrReplayed = errors.New("slack request replayed")
	// ErrBusy: the replay memory is full of requests still inside the
	// window; the request is refused rather than remembered badly.
	ErrBusy = errors.New("too many slack requests in 5 minutes")
)

// SignatureWindow is how far a request's timestamp may be from now:
// slack-go's NewSecretsVerifier refuses beyond it.
const SignatureWindow = 5 * time.Minute

// DefaultReplayMemory bounds the signatures Verifier remembers: presses
// of buttons by people, far fewer than this in five minutes.
const DefaultReplayMemory = 10000

// Verifier checks requests from Slack (interactivity, slash commands) as
// Slack documents: the v0 HMAC-SHA256 of "v0:<timestamp>:<body>" under the
// app's signing secret, a timestamp within SignatureWindow (slack-go's
// SecretsVerifier does both), and, which slack-go leaves to its caller,
// no signature seen before: a request captured on its way can be sent
// again within the window, and is refused.
//
// Safe for concurrent use; mu guards seen.
type Verifier struct {
	secret string
	clock  clock.Clock
	max    int

	mu   sync.Mutex
	seen map[string]time.Time // signature (lower-case hex) → when it may be forgotten
}

// NewVerifier makes a Verifier for the signing secret. max bounds its
// memory (DefaultReplayMemory when 0 or less). The clock decides when a
// signature may be forgotten: it must be the real one in production, as
// slack-go's timestamp check uses the real time.
func NewVerifier(secret string, max int, clk clock.Clock) *Verifier {
	if max <= 0 {
		max = DefaultReplayMemory
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Verifier{secret: secret, clock: clk, max: max, seen: map[string]time.Time{}}
}

// Verify checks one request's headers and raw body. It returns nil, or
// an error that wraps ErrForged, ErrStale, ErrReplayed or ErrBusy. A
// request is remembered only once it passed the signature check, so a
// forged one cannot fill the memory.
func (v *Verifier) Verify(h http.Header, body []byte) error {
	sv, err := slack.NewSecretsVerifier(h, v.secret)
	switch {
	case errors.Is(err, slack.ErrExpiredTimestamp):
		return fmt.Errorf("%w (X-Slack-Request-Timestamp %q)", ErrStale, h.Get("X-Slack-Request-Timestamp"))
	case err != nil:
		return fmt.Errorf("%w: %v", ErrForged, err)
	}
	if _, err := sv.Write(body); err != nil {
		return fmt.Errorf("%w: %v", ErrForged, err)
	}
	if err := sv.Ensure(); err != nil {
		return fmt.Errorf("%w: %v", ErrForged, err)
	}
	ts, _ := strconv.ParseInt(h.Get("X-Slack-Request-Timestamp"), 10, 64) // parsed by the verifier
	// The key is the signature as the verifier read it: slack-go decodes
	// the hex whatever its case, so the header as sent would let a replay
	// in by changing the case of one letter.
	sig := strings.ToLower(h.Get("X-Slack-Signature"))
	now := v.clock.Now()
	v.mu.Lock()
	defer v.mu.Unlock()
	if until, ok := v.seen[sig]; ok && now.Before(until) {
		return ErrReplayed
	}
	if len(v.seen) >= v.max {
		for k, until := range v.seen {
			if !now.Before(until) {
				delete(v.seen, k)
			}
		}
		if len(v.seen) >= v.max {
			return ErrBusy
		}
	}
	// The verifier takes a timestamp up to the window either side of
	// now: the signature is valid until its timestamp plus the window.
	v.seen[sig] = time.Unix(ts, 0).Add(SignatureWindow + time.Second)
	return nil
}

// Remembered is how many signatures the Verifier holds (for tests).
func (v *Verifier) Remembered() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.seen)
}

// RespondEphemeral answers the person who pressed a button, and only them,
// through the interaction's response_url (valid for 30 minutes, 5 uses):
// the original message stays as it was.
func RespondEphemeral(ctx context.Context, c *http.Client, responseURL, text string) error {
	if responseURL == "" {
		return fmt.Errorf("respond to a Slack interaction: %w: no response_url", ErrInvalidMessage)
	}
	if c == nil {
		c = &http.Client{Timeout: DefaultRequestTimeout}
	}
	err := slack.PostWebhookCustomHTTPContext(ctx, responseURL, c, &slack.WebhookMessage{ResponseType: slack.ResponseTypeEphemeral, ReplaceOriginal: false, Text: text})
	if err != nil {
		// The URL carries a one-time secret: keep it out of logs.
		return fmt.Errorf("respond to a Slack interaction: %s", redactURL(err.Error(), responseURL))
	}
	return nil
}

func redactURL(s, u string) string {
	if u == "" {
		return s
	}
	return strings.ReplaceAll(s, u, "[response_url]")
}
