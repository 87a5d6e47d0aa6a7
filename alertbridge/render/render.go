package render

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/kubemedic/kubemedic/alertbridge/config"
	"github.com/kubemedic/kubemedic/alertbridge/payload"
)

// GitHub's limits, with room for the marker the bridge appends to bodies.
const (
	MaxTitleLength = 256 // characters
	// GitHubBodyLimit is the most characters GitHub takes in an issue or
	// comment body; longer ones get 422 "body is too long (maximum is
	// 65536 characters)".
	GitHubBodyLimit = 65536
	// MaxBodyLength bounds every body the bridge renders, in bytes (so at
	// most as many characters): with the marker (at most marker.MaxLength)
	// it stays within GitHubBodyLimit, by construction.
	MaxBodyLength  = 60000
	MaxLabelLength = config.MaxLabelLength
)

// SkipAutoCloseAnnotation on any alert of a group keeps its issue open when
// the group resolves.
const SkipAutoCloseAnnotation = "kubemedic_skip_auto_close"

// truncatedNote ends a title or body that was cut to fit.
const truncatedNote = "… [truncated]"

// Issue is the issue for one alert group.
type Issue struct {
	Repo config.Repo
	// Key is the dedupe key: groups with the same key share an issue.
	Key string
	// KeyHash is the first 32 hex digits of sha256(Key).
	KeyHash string
	// Title is one line of at most MaxTitleLength characters, never empty.
	Title string
	// Body is markdown of at most MaxBodyLength bytes, without any marker.
	Body string
	// Labels: the identity label, the route's labels and the rendered label
	// templates; trimmed, non-empty, at most MaxLabelLength characters,
	// unique and sorted.
	Labels []string
	// Assignees are the users of every matching assignee rule, sorted.
	Assignees []string
	// SkipAutoClose is set when an alert carries SkipAutoCloseAnnotation.
	SkipAutoClose bool
}

// Key returns the dedupe key of the group and its hash: the config's
// dedupeKey template, trimmed, or by default the receiver and the sorted
// group labels, e.g. gpu-oncall/{alertname="KubemedicGPULost",node="gpu-7"}.
// A key that renders empty is an error.
func Key(cfg *config.Config, msg *payload.Message) (key, hash string, err error) {
	if cfg == nil || msg == nil {
		return "", "", errors.New("render key: nil config or message")
	}
	if t := cfg.Templates.DedupeKey; t != nil {
		key, err = t.Execute(msg)
		if err != nil {
			return "", "", fmt.Errorf("render dedupe key: %w", err)
		}
		key = strings.TrimSpace(key)
		if key == "" {
			return "", "", fmt.Errorf("render dedupe key: %s rendered empty for receiver %q, group %s", t.Field(), msg.Receiver, config.LabelSet(msg.GroupLabels))
		}
	} else {
		key = msg.Receiver + "/" + config.LabelSet(msg.GroupLabels)
	}
	return key, Hash(key), nil
}

// Hash is the first 32 hex digits of sha256(key).
func Hash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])[:32]
}

// Render renders the issue of the group msg. A template that fails on this
// group is an error: the templates ran on a sample group at load, so this
// is a template that depends on data this group lacks.
func Render(cfg *config.Config, msg *payload.Message) (*Issue, error) {
	key, hash, err := Key(cfg, msg)
	if err != nil {
		return nil, err
	}
	wrap := func(err error) error { return fmt.Errorf("render issue %s: %w", key, err) }
	route := cfg.RouteFor(msg.CommonLabels)
	iss := &Issue{
		Repo:          route.Repo,
		Key:           key,
		KeyHash:       hash,
		Assignees:     cfg.AssigneesFor(msg.CommonLabels),
		SkipAutoClose: msg.Annotated(SkipAutoCloseAnnotation),
	}

	if iss.Title, err = title(cfg, msg); err != nil {
		return nil, wrap(err)
	}
	if iss.Title == "" {
		iss.Title = fitTitle("Alertmanager alert group " + key)
	}

	bodyT := cfg.Templates.Body
	if bodyT == nil {
		bodyT = defaultBody
	}
	body, err := bodyT.Execute(msg)
	if err != nil {
		return nil, wrap(err)
	}
	iss.Body = fitBody(strings.TrimSpace(body) + "\n")

	labels := append([]string{cfg.IdentityLabel}, route.Labels...)
	labelTs := cfg.Templates.Labels
	if len(labelTs) == 0 {
		labelTs = defaultLabels
	}
	for _, t := range labelTs {
		l, err := t.Execute(msg)
		if err != nil {
			return nil, wrap(err)
		}
		labels = append(labels, l)
	}
	iss.Labels = cleanLabels(labels)
	return iss, nil
}

// LinkPrevious puts the link to a key's previous issue before the body of
// the new issue filed when the group fired again after the reopen window.
func LinkPrevious(body string, previous int) string {
	return fmt.Sprintf("Fired again after the reopen window; previous occurrence: #%d.\n\n%s", previous, body)
}

// title renders the config's title, falling back to the default when it
// renders empty; "" when both do.
func title(cfg *config.Config, msg *payload.Message) (string, error) {
	if t := cfg.Templates.Title; t != nil {
		s, err := t.Execute(msg)
		if err != nil {
			return "", err
		}
		if s = fitTitle(s); s != "" {
			return s, nil
		}
	}
	s, err := defaultTitle.Execute(msg)
	if err != nil {
		return "", err
	}
	return fitTitle(s), nil
}

// fitTitle makes s one line of single spaces within MaxTitleLength.
func fitTitle(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= MaxTitleLength {
		return s
	}
	r := []rune(s)
	return strings.TrimSpace(string(r[:MaxTitleLength-utf8.RuneCountInString(truncatedNote)])) + truncatedNote
}

// fitBody cuts s to MaxBodyLength bytes at a character boundary, with a
// visible note.
func fitBody(s string) string { return fitBodyTo(s, MaxBodyLength) }

// FitBodyTo cuts s to limit bytes the same way: a body GitHub refused as
// too long is sent again cut shorter.
func FitBodyTo(s string, limit int) string { return fitBodyTo(s, limit) }

func fitBodyTo(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	note := fmt.Sprintf("\n\n%s the rendered body was %d bytes; GitHub issues hold about 65,000 characters.\n", truncatedNote, len(s))
	cut := max(limit-len(note), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + note
}

// cleanLabels trims labels, drops empty ones, cuts each to MaxLabelLength
// characters and returns them unique and sorted. GitHub label names are
// case-insensitive, so of Storage and storage only the first is kept.
func cleanLabels(labels []string) []string {
	seen := map[string]bool{}
	out := []string{}
	for _, l := range labels {
		l = strings.Join(strings.Fields(l), " ")
		if utf8.RuneCountInString(l) > MaxLabelLength {
			l = strings.TrimSpace(string([]rune(l)[:MaxLabelLength]))
		}
		if l == "" || seen[strings.ToLower(l)] {
			continue
		}
		seen[strings.ToLower(l)] = true
		out = append(out, l)
	}
	sort.Strings(out)
	return out
}
