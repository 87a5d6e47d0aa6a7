package decide

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// ttlPattern is kube-janitor's TTL syntax: a whole number and one unit of
// s, m, h, d (24h) or w (7d), or "forever".
var ttlPattern = regexp.MustCompile(`^([0-9]{1,9})(s|m|h|d|w)$`)

// ttlUnits are the units of ttlPattern.
var ttlUnits = map[string]time.Duration{"s": time.Second, "m": time.Minute, "h": time.Hour, "d": 24 * time.Hour, "w": 7 * 24 * time.Hour}

// Forever is the janitor/ttl value that never expires, as in kube-janitor.
const Forever = "forever"

// ParseTTL parses a janitor/ttl value. ok is false for "forever". A TTL
// longer than a time.Duration holds (about 292 years: 15250w, 106751d,
// 2562047h, 153722867m) is an error, never a wrapped value: wrapped, it
// could be negative, and the pod its owner meant to keep would count as
// long expired.
func ParseTTL(s string) (d time.Duration, ok bool, err error) {
	if s == Forever {
		return 0, false, nil
	}
	m := ttlPattern.FindStringSubmatch(s)
	if m == nil {
		return 0, false, fmt.Errorf("%q is not a TTL like 30m, 24h, 7d, 2w or forever", s)
	}
	// At most 9 digits: the number fits an int64, but its product with
	// the unit need not fit a Duration.
	n, _ := strconv.ParseInt(m[1], 10, 64)
	unit := ttlUnits[m[2]]
	if most := int64(math.MaxInt64 / unit); n > most {
		return 0, false, fmt.Errorf("%q is longer than a duration holds (at most %d%s, about 292 years); use forever to keep it", s, most, m[2])
	}
	return time.Duration(n) * unit, true, nil
}

// expiresLayouts are the forms of janitor/expires that kube-janitor accepts,
// most precise first. A time without a zone is UTC, as in kube-janitor.
var expiresLayouts = []string{time.RFC3339, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"}

// ParseTime parses an absolute time as janitor/expires and
// kubemedic.io/reclaim-snooze-until take it: RFC 3339, a UTC date and time
// to the minute or second, or a UTC date (its midnight).
func ParseTime(s string) (time.Time, error) {
	for _, l := range expiresLayouts {
		if t, err := time.Parse(l, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time like 2026-12-01T18:00:00Z, 2026-12-01T18:00 or 2026-12-01", s)
}

// ExpirySource is one object whose kube-janitor annotations bound a pod's
// life: the pod itself, its controllers, its namespace.
type ExpirySource struct {
	// Object names it for messages, e.g. "pod", "Deployment trainer",
	// "namespace team-a".
	Object string
	// Created is the object's creationTimestamp; a TTL counts from it.
	Created time.Time
	// TTL and Expires are the raw annotation values; empty when unset.
	TTL, Expires string
}

// Expiry is the earliest expiry among the sources, with the object and the
// annotation it came from. Values that do not parse are returned as
// problems (for a Warning Event that names the value) and ignored: a bad
// value never expires a pod.
func Expiry(srcs []ExpirySource) (at time.Time, from string, problems []string) {
	consider := func(t time.Time, what string) {
		if at.IsZero() || t.Before(at) {
			at, from = t, what
		}
	}
	for _, s := range srcs {
		if s.TTL != "" {
			d, ok, err := ParseTTL(s.TTL)
			switch {
			case err != nil:
				problems = append(problems, fmt.Sprintf("%s annotation %s: %v", s.Object, v1alpha1.AnnotationJanitorTTL, err))
			case ok:
				consider(s.Created.Add(d), fmt.Sprintf("%s=%s on %s", v1alpha1.AnnotationJanitorTTL, s.TTL, s.Object))
			}
		}
		if s.Expires != "" {
			t, err := ParseTime(s.Expires)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s annotation %s: %v", s.Object, v1alpha1.AnnotationJanitorExpires, err))
				continue
			}
			consider(t, fmt.Sprintf("%s=%s on %s", v1alpha1.AnnotationJanitorExpires, s.Expires, s.Object))
		}
	}
	return at, from, problems
}

// Notice is the janitor's state for one pod, kept in the pod's
// kubemedic.io/reclaim-notice annotation. Its life: claimed (ClaimedAt set,
// Deadline zero) → noticed (Deadline set) → snooze confirmed → reclaimed
// (ReclaimedAt set) or removed when cancelled.
type Notice struct {
	// Rule and Evidence are what the owner was told.
	Rule     Rule   `json:"rule"`
	Evidence string `json:"evidence,omitempty"`
	// ClaimedAt and Claimer: a janitor wrote its claim, with an optimistic
	// lock, before sending; only the writer of the claim sends.
	ClaimedAt time.Time `json:"claimedAt,omitzero"`
	Claimer   string    `json:"claimer,omitempty"`
	// NoticedAt and Deadline: when the notice was sent (or recorded without
	// a message when the policy does not require one) and when the pod is
	// reclaimed if the rule still holds.
	NoticedAt time.Time `json:"noticedAt,omitzero"`
	Deadline  time.Time `json:"deadline,omitzero"`
	// Sent is false when the notice was recorded without a Slack message
	// (requireNotice: false and Slack unavailable).
	Sent bool `json:"sent,omitempty"`
	// Channel and TS are the Slack thread of the notice.
	Channel   string `json:"channel,omitempty"`
	TS        string `json:"ts,omitempty"`
	Recipient string `json:"recipient,omitempty"`
	// SnoozeAcked is the snooze value already confirmed in the thread.
	SnoozeAcked string `json:"snoozeAcked,omitempty"`
	// DryRun marks a notice sent under dryRun.notify.
	DryRun bool `json:"dryRun,omitempty"`
	// ReclaimedAt is when the janitor acted (or, in dry run, would have).
	ReclaimedAt time.Time `json:"reclaimedAt,omitzero"`
	// ReclaimRequestedAt and ReclaimRequestedBy: the owner pressed
	// "Reclaim now" (a Slack user ID); the next cycle acts without waiting
	// for the deadline or the rule, through the usual recheck.
	ReclaimRequestedAt time.Time `json:"reclaimRequestedAt,omitzero"`
	ReclaimRequestedBy string    `json:"reclaimRequestedBy,omitempty"`
	// SnoozedBy is the Slack user ID who pressed a "Keep" button for the
	// snooze in SnoozeAcked.
	SnoozedBy string `json:"snoozedBy,omitempty"`
}

// Noticed reports whether the notice was delivered (or recorded), as
// opposed to only claimed.
func (n *Notice) Noticed() bool { return n != nil && !n.Deadline.IsZero() }

// ParseNotice reads the annotation; "" is no notice.
func ParseNotice(s string) (*Notice, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	// Unknown fields are allowed: a newer janitor's notice read by an
	// older one during a rollout must not be reset (a second notice).
	var n Notice
	if err := json.Unmarshal([]byte(s), &n); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", v1alpha1.AnnotationReclaimNotice, err)
	}
	if !knownRule(n.Rule) {
		return nil, fmt.Errorf("annotation %s: rule %q is not one of %s", v1alpha1.AnnotationReclaimNotice, n.Rule, strings.Join(ruleNames(), ", "))
	}
	if n.ClaimedAt.IsZero() && n.Deadline.IsZero() {
		return nil, fmt.Errorf("annotation %s: neither claimedAt nor deadline is set", v1alpha1.AnnotationReclaimNotice)
	}
	return &n, nil
}

// Encode writes the annotation value.
func (n *Notice) Encode() string {
	b, err := json.Marshal(n)
	if err != nil {
		panic(fmt.Sprintf("encode notice: %v", err)) // plain struct: cannot fail
	}
	return string(b)
}
