package notify

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/slack-go/slack"
	"k8s.io/utils/clock"
)

// Defaults for SlackOptions.
const (
	DefaultMaxAttempts    = 4
	DefaultRequestTimeout = 30 * time.Second
	DefaultMaxRetryAfter  = 2 * time.Minute
	DefaultCacheTTL       = time.Hour
	DefaultCacheSize      = 1024

	backoffBase = time.Second
	backoffMax  = 30 * time.Second
)

// SlackOptions configures NewSlack. The zero value talks to slack.com with
// the defaults above.
type SlackOptions struct {
	// APIURL is the Web API base URL, e.g. notifytest's URL() in tests.
	// Default: https://slack.com/api/.
	APIURL string
	// HTTPClient sends the requests. Default: a client with a
	// RequestTimeout timeout.
	HTTPClient *http.Client
	// MaxAttempts bounds the tries of each Slack API call (a Post makes up
	// to three: users.lookupByEmail, conversations.open, chat.postMessage,
	// more when it falls back to a channel). Default DefaultMaxAttempts.
	MaxAttempts int
	// Clock times the waits between attempts and the cache's TTL.
	// Default: the real clock.
	Clock clock.Clock
	// Logger gets retries and fallbacks at V(1). Default: discard.
	Logger logr.Logger
	// RequestTimeout bounds one HTTP request. Default DefaultRequestTimeout.
	RequestTimeout time.Duration
	// MaxRetryAfter is the longest Retry-After that a call waits for; a
	// longer one is returned as the (non-permanent) rate-limit error at
	// once. Default DefaultMaxRetryAfter.
	MaxRetryAfter time.Duration
	// CacheTTL and CacheSize bound the email→user and user→DM channel
	// caches. Defaults DefaultCacheTTL and DefaultCacheSize.
	CacheTTL  time.Duration
	CacheSize int
}

// Slack is the Notifier on Slack's Web API. It needs a bot token with the
// chat:write, im:write, users:read and users:read.email scopes.
//
// Safe for concurrent use. mu guards users and dms only; it is never held
// across a Slack call, so two Posts may look up the same email at once
// (both get the same answer).
type Slack struct {
	api            *slack.Client
	token          string // only to scrub it from errors; never logged
	maxAttempts    int
	requestTimeout time.Duration
	maxRetryAfter  time.Duration
	clock          clock.Clock
	log            logr.Logger

	mu    sync.Mutex
	users *ttlCache // email → user ID
	dms   *ttlCache // user ID → DM channel ID
}

var _ Notifier = (*Slack)(nil)

// NewSlack returns a Slack notifier that authenticates with token.
func NewSlack(token string, opts SlackOptions) *Slack {
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = DefaultRequestTimeout
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: opts.RequestTimeout}
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = DefaultMaxAttempts
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = logr.Discard()
	}
	if opts.MaxRetryAfter <= 0 {
		opts.MaxRetryAfter = DefaultMaxRetryAfter
	}
	if opts.CacheTTL <= 0 {
		opts.CacheTTL = DefaultCacheTTL
	}
	if opts.CacheSize <= 0 {
		opts.CacheSize = DefaultCacheSize
	}
	clientOpts := []slack.Option{slack.OptionHTTPClient(opts.HTTPClient)}
	if opts.APIURL != "" {
		u := opts.APIURL
		if !strings.HasSuffix(u, "/") {
			u += "/"
		}
		clientOpts = append(clientOpts, slack.OptionAPIURL(u))
	}
	return &Slack{
		api:            slack.New(token, clientOpts...),
		token:          token,
		maxAttempts:    opts.MaxAttempts,
		requestTimeout: opts.RequestTimeout,
		maxRetryAfter:  opts.MaxRetryAfter,
		clock:          opts.Clock,
		log:            opts.Logger,
		users:          newTTLCache(opts.CacheSize, opts.CacheTTL),
		dms:            newTTLCache(opts.CacheSize, opts.CacheTTL),
	}
}

// Post sends msg.
//
// With thread == nil it starts a new conversation with to: a UserID gets a
// direct message (conversations.open, then chat.postMessage), an Email is
// first resolved with users.lookupByEmail, a Channel is posted to directly.
// When Slack says the person cannot be found (users_not_found,
// user_not_found, user_disabled, cannot_dm_bot) Post tries the next field
// that is set, in the order UserID, Email, Channel; the returned Thread
// says which one was used (Recipient) and why earlier ones were not
// (Fallback). With thread != nil it replies in that thread (to is only used
// in errors) and returns the same thread.
//
// Each Slack call is retried as classify decides, at most MaxAttempts
// times and never past ctx. A chat.postMessage retried after a 5xx or a
// lost response may post the message twice: Slack offers no idempotency
// key, and a duplicate notice is better than none. Errors name the Slack
// method and the recipient, never the token; see IsPermanent.
func (s *Slack) Post(ctx context.Context, to Recipient, thread *Thread, msg Message) (Thread, error) {
	t, err := s.post(ctx, to, thread, msg)
	return t, s.redact(err)
}

func (s *Slack) post(ctx context.Context, to Recipient, thread *Thread, msg Message) (Thread, error) {
	if strings.TrimSpace(msg.Text) == "" {
		return Thread{}, fmt.Errorf("notify %s: %w: empty fallback text", to, ErrInvalidMessage)
	}
	if thread != nil {
		if thread.Channel == "" || thread.TS == "" {
			return Thread{}, fmt.Errorf("reply to %s: %w: thread needs a channel and a timestamp", to, ErrInvalidMessage)
		}
		s.log.V(1).Info("Posting Slack reply", "channel", thread.Channel, "thread", thread.TS)
		if _, _, err := s.postMessage(ctx, thread.Channel, thread.TS, msg); err != nil {
			return Thread{}, fmt.Errorf("reply in thread %s/%s: %w", thread.Channel, thread.TS, err)
		}
		return *thread, nil
	}

	cands := to.candidates()
	var skipped []string
	for i, c := range cands {
		s.log.V(1).Info("Posting Slack message", "recipient", c.String(), "source", to.Source)
		channel, ts, err := s.postTo(ctx, c, msg)
		if err == nil {
			return Thread{Channel: channel, TS: ts, Recipient: c.String(), Fallback: strings.Join(skipped, "; ")}, nil
		}
		if i == len(cands)-1 || !isUnreachable(err) || ctx.Err() != nil {
			if len(skipped) > 0 {
				return Thread{}, fmt.Errorf("notify %s (after %s): %w", c, strings.Join(skipped, "; "), err)
			}
			return Thread{}, fmt.Errorf("notify %s: %w", c, err)
		}
		s.log.V(1).Info("Falling back to the next recipient", "unreachable", c.String(), "reason", slackErrorCode(err), "next", cands[i+1].String())
		skipped = append(skipped, fmt.Sprintf("%s: %s", c, slackErrorCode(err)))
	}
	return Thread{}, fmt.Errorf("notify %s: %w", to, ErrNoRecipient)
}

// postTo starts a conversation with one candidate and returns the channel
// ID and timestamp of the message.
func (s *Slack) postTo(ctx context.Context, c candidate, msg Message) (string, string, error) {
	switch c.kind {
	case byChannel:
		return s.postMessage(ctx, c.value, "", msg)
	case byEmail:
		userID, err := s.lookupEmail(ctx, c.value)
		if err != nil {
			return "", "", err
		}
		return s.postDM(ctx, userID, msg)
	default:
		return s.postDM(ctx, c.value, msg)
	}
}

func (s *Slack) postDM(ctx context.Context, userID string, msg Message) (string, string, error) {
	channel, err := s.openDM(ctx, userID)
	if err != nil {
		return "", "", err
	}
	ch, ts, err := s.postMessage(ctx, channel, "", msg)
	if err != nil && IsPermanent(err) {
		// The cached DM channel may be the reason; look it up afresh next time.
		s.mu.Lock()
		s.dms.delete(userID)
		s.mu.Unlock()
	}
	return ch, ts, err
}

// UserIDByEmail is the Slack user ID of an email (users.lookupByEmail,
// cached as for Post): to check that the person who pressed a button is
// the owner a notice was addressed to by email.
func (s *Slack) UserIDByEmail(ctx context.Context, email string) (string, error) {
	id, err := s.lookupEmail(ctx, email)
	return id, s.redact(err)
}

func (s *Slack) lookupEmail(ctx context.Context, email string) (string, error) {
	key := strings.ToLower(email)
	s.mu.Lock()
	id, ok := s.users.get(key, s.clock.Now())
	s.mu.Unlock()
	if ok {
		return id, nil
	}
	var user *slack.User
	err := s.call(ctx, "users.lookupByEmail", func(ctx context.Context) error {
		var err error
		user, err = s.api.GetUserByEmailContext(ctx, email)
		return err
	})
	if err != nil {
		return "", err
	}
	if user == nil || user.ID == "" {
		return "", fmt.Errorf("slack users.lookupByEmail: answer without a user ID")
	}
	if user.Deleted {
		// A deactivated account cannot be messaged: treat it like an unknown one.
		return "", fmt.Errorf("slack users.lookupByEmail: user %s is deactivated: %w", user.ID, slack.SlackErrorResponse{Err: "user_disabled"})
	}
	s.mu.Lock()
	s.users.put(key, user.ID, s.clock.Now())
	s.mu.Unlock()
	return user.ID, nil
}

func (s *Slack) openDM(ctx context.Context, userID string) (string, error) {
	s.mu.Lock()
	ch, ok := s.dms.get(userID, s.clock.Now())
	s.mu.Unlock()
	if ok {
		return ch, nil
	}
	var channel *slack.Channel
	err := s.call(ctx, "conversations.open", func(ctx context.Context) error {
		var err error
		channel, _, _, err = s.api.OpenConversationContext(ctx, &slack.OpenConversationParameters{Users: []string{userID}})
		return err
	})
	if err != nil {
		return "", err
	}
	if channel == nil || channel.ID == "" {
		return "", fmt.Errorf("slack conversations.open: answer without a channel ID")
	}
	s.mu.Lock()
	s.dms.put(userID, channel.ID, s.clock.Now())
	s.mu.Unlock()
	return channel.ID, nil
}

// postMessage calls chat.postMessage and returns the channel ID and the
// message's timestamp.
func (s *Slack) postMessage(ctx context.Context, channel, threadTS string, msg Message) (string, string, error) {
	opts := []slack.MsgOption{
		slack.MsgOptionText(msg.Text, false),
		slack.MsgOptionDisableLinkUnfurl(),
		slack.MsgOptionDisableMediaUnfurl(),
	}
	if len(msg.Blocks) > 0 {
		opts = append(opts, slack.MsgOptionBlocks(msg.Blocks...))
	}
	if threadTS != "" {
		opts = append(opts, slack.MsgOptionTS(threadTS))
	}
	var respChannel, ts string
	err := s.call(ctx, "chat.postMessage", func(ctx context.Context) error {
		var err error
		respChannel, ts, err = s.api.PostMessageContext(ctx, channel, opts...)
		return err
	})
	if err != nil {
		return "", "", err
	}
	if respChannel == "" {
		respChannel = channel
	}
	return respChannel, ts, nil
}

// call runs one Slack API call, retrying as classify says, at most
// maxAttempts times, and never past ctx.
func (s *Slack) call(ctx context.Context, method string, fn func(context.Context) error) error {
	backoff := backoffBase
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, s.requestTimeout)
		err := fn(actx)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("slack %s: %w (stopped: %w)", method, err, context.Cause(ctx))
		}
		class, wait := classify(err)
		if class == classPermanent {
			return fmt.Errorf("slack %s: %w", method, err)
		}
		if attempt >= s.maxAttempts {
			return fmt.Errorf("slack %s: giving up after %d attempts: %w", method, attempt, err)
		}
		if wait > s.maxRetryAfter {
			return fmt.Errorf("slack %s: asked to wait %s, longer than the %s this client waits: %w", method, wait, s.maxRetryAfter, err)
		}
		if wait == 0 {
			wait = backoff
			backoff = min(2*backoff, backoffMax)
		}
		s.log.V(1).Info("Retrying Slack call", "method", method, "attempt", attempt, "class", class.String(), "wait", wait, "reason", s.scrub(err.Error()))
		if serr := s.sleep(ctx, wait); serr != nil {
			return fmt.Errorf("slack %s: stopped while waiting %s to retry: %w (last error: %w)", method, wait, serr, err)
		}
	}
}

// sleep waits d on the injected clock, or until ctx ends.
func (s *Slack) sleep(ctx context.Context, d time.Duration) error {
	t := s.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C():
		return nil
	}
}

// slackErrorCode is Slack's error code in err, or err's text.
func slackErrorCode(err error) string {
	var se slack.SlackErrorResponse
	if errors.As(err, &se) {
		return se.Err
	}
	return err.Error()
}

// redactedError replaces an error whose text contained the token. It does
// not unwrap, so the original text cannot leak through errors.As; it keeps
// the original's classification instead.
type redactedError struct {
	msg         string
	class       errorClass
	wait        time.Duration
	unreachable bool
}

func (e *redactedError) Error() string { return e.msg }

const redacted = "[REDACTED]"

func (s *Slack) scrub(text string) string {
	if s.token == "" {
		return text
	}
	return strings.ReplaceAll(text, s.token, redacted)
}

// redact returns err, or an error with the same text and classification but
// without the token when err's text contains it.
func (s *Slack) redact(err error) error {
	if err == nil || s.token == "" || !strings.Contains(err.Error(), s.token) {
		return err
	}
	class, wait := classify(err)
	return &redactedError{msg: s.scrub(err.Error()), class: class, wait: wait, unreachable: isUnreachable(err)}
}
