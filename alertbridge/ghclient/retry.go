package ghclient

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/google/go-github/v60/github"
)

// PermanentError is a GitHub call that can never succeed as it is: retrying
// it would only repeat the failure. Status is the HTTP status, 0 when the
// request was refused before it was sent.
type PermanentError struct {
	Endpoint string
	Repo     string
	Status   int
	Reason   string
	Err      error
}

func (e *PermanentError) Error() string {
	return fmt.Sprintf("github %s %s: permanent failure (status %d, %s): %v", e.Endpoint, e.Repo, e.Status, e.Reason, e.Err)
}

func (e *PermanentError) Unwrap() error { return e.Err }

// IsPermanent reports whether err is, or wraps, a *PermanentError.
func IsPermanent(err error) bool {
	var pe *PermanentError
	return errors.As(err, &pe)
}

type endpointKey struct{}

// attemptFunc makes one go-github call.
type attemptFunc func(ctx context.Context, gh *github.Client) (*github.Response, error)

// verifyFunc says whether a write whose answer was lost took effect after
// all, from what GitHub holds since since (the write's first attempt, less
// lostAnswerSkew). done ends the call as a success: the write is not sent
// again. It may also change what the next attempt sends (a transition
// leaves out a comment already made).
type verifyFunc func(ctx context.Context, since time.Time) (done bool, err error)

// lostAnswerSkew is how far before a write's first attempt the check for
// it looks: GitHub's clock and this machine's may differ.
const lostAnswerSkew = 5 * time.Minute

// do runs call until it succeeds, fails permanently or ctx ends, waiting
// between attempts as Classify decides. It is for reads and idempotent
// writes, which are simply sent again.
func (c *client) do(ctx context.Context, endpoint, repo string, call attemptFunc) error {
	return c.doWrite(ctx, endpoint, repo, nil, call)
}

// doWrite is do for a write that must not happen twice: after a failure
// whose answer may have been lost (Decision.Ambiguous: a 5xx, a 408, a
// timeout or a network error once the request was sent), and before the
// write is sent again, verify (when not nil) checks whether it took effect.
// This is the only retry loop.
func (c *client) doWrite(ctx context.Context, endpoint, repo string, verify verifyFunc, call attemptFunc) error {
	ctx = context.WithValue(ctx, endpointKey{}, endpoint)
	var first time.Time
	for attempt := 1; ; attempt++ {
		if err := c.waitRateLimit(ctx, endpoint, repo); err != nil {
			return fmt.Errorf("github %s %s: %w", endpoint, repo, err)
		}
		if attempt == 1 {
			first = c.clock.Now()
		}
		actx, cancel := context.WithTimeout(ctx, c.timeout)
		resp, err := call(actx, c.github())
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("github %s %s: %w", endpoint, repo, ctx.Err())
		}
		var hr *http.Response
		if resp != nil {
			hr = resp.Response
		}
		now := c.clock.Now()
		d := Classify(hr, err, attempt, now)
		if hr == nil {
			hr = responseOf(err)
		}
		status := 0
		if hr != nil {
			status = hr.StatusCode
		}
		switch {
		case d.Permanent:
			return &PermanentError{Endpoint: endpoint, Repo: repo, Status: status, Reason: d.Reason, Err: err}
		case !d.Retry:
			return fmt.Errorf("github %s %s: %w", endpoint, repo, err)
		}

		wait := d.After
		if d.Jitter {
			wait = jitter(min(wait, c.maxBackoff))
		}
		level := slog.LevelWarn
		if d.Reason == ReasonRateLimited || d.Reason == ReasonSecondaryRateLimited || d.Reason == ReasonTooManyRequests {
			level = slog.LevelInfo
			c.holdUntil(now.Add(wait))
		}
		c.log.Log(ctx, level, "Retrying GitHub request", "endpoint", endpoint, "repo", repo,
			"status", statusLabel(status), "reason", d.Reason, "wait", wait, "attempt", attempt, "err", err.Error())
		if err := c.sleep(ctx, wait); err != nil {
			return fmt.Errorf("github %s %s: waiting to retry after %s: %w", endpoint, repo, d.Reason, err)
		}
		if !d.Ambiguous || verify == nil {
			continue
		}
		c.log.Warn("GitHub answer lost; checking whether the write happened", "endpoint", endpoint, "repo", repo,
			"status", statusLabel(status), "reason", d.Reason, "attempt", attempt)
		done, err := verify(ctx, first.Add(-lostAnswerSkew))
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("github %s %s: %w", endpoint, repo, ctx.Err())
			}
			return fmt.Errorf("github %s %s: checking whether a write whose answer was lost happened: %w", endpoint, repo, err)
		}
		if done {
			c.log.Info("GitHub had carried out the write; not sending it again", "endpoint", endpoint, "repo", repo, "attempt", attempt)
			return nil
		}
	}
}

// jitter returns a wait between d/2 and d ("equal jitter").
func jitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	half := d / 2
	return half + rand.N(d-half+1)
}

// holdUntil keeps every call of this client from being sent before t.
func (c *client) holdUntil(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.notBefore) {
		c.notBefore = t
	}
}

// waitRateLimit waits out a rate limit another call ran into.
func (c *client) waitRateLimit(ctx context.Context, endpoint, repo string) error {
	c.mu.Lock()
	until := c.notBefore
	c.mu.Unlock()
	wait := until.Sub(c.clock.Now())
	if wait <= 0 {
		return ctx.Err()
	}
	c.log.Info("Waiting for GitHub rate limit", "endpoint", endpoint, "repo", repo, "wait", wait)
	return c.sleep(ctx, wait)
}

func (c *client) sleep(ctx context.Context, d time.Duration) error {
	if c.sleepFn != nil {
		return c.sleepFn(ctx, d)
	}
	t := c.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		return nil
	}
}

func statusLabel(status int) string {
	if status == 0 {
		return "error"
	}
	return strconv.Itoa(status)
}
