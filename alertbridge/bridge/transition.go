package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/kubemedic/kubemedic/alertbridge/decide"
	"github.com/kubemedic/kubemedic/alertbridge/ghclient"
	"github.com/kubemedic/kubemedic/alertbridge/journal"
	"github.com/kubemedic/kubemedic/alertbridge/marker"
	"github.com/kubemedic/kubemedic/alertbridge/payload"
	"github.com/kubemedic/kubemedic/alertbridge/render"
)

// process applies one journal entry. It returns nil when the entry is
// applied (or needed nothing), ctx's error when shutting down, and another
// error when the entry was dropped (counted in the dropped metric).
func (b *Bridge) process(ctx context.Context, j job) error {
	e, err := b.journal.Load(j.id)
	switch {
	case errors.Is(err, journal.ErrNotFound):
		return nil // already done
	case errors.Is(err, journal.ErrCorrupt):
		// Load moved it to corrupt/ and logged it: an SRE can still read it.
		b.metrics.dropped.WithLabelValues("journal_corrupt").Inc()
		return fmt.Errorf("load journal entry: %w", err)
	case err != nil:
		return &transientError{fmt.Errorf("load journal entry: %w", err)}
	}
	msg, err := payload.DecodeBytes(e.Payload)
	if err != nil {
		b.metrics.dropped.WithLabelValues("payload").Inc()
		return err
	}
	iss, err := render.Render(b.cfg, msg)
	if err != nil {
		b.metrics.dropped.WithLabelValues("render").Inc()
		return fmt.Errorf("render issue: %w", err)
	}
	log := b.log.With("entry", e.ID, "key", j.key, "receiver", msg.Receiver)
	cur := b.get(j.key)
	if cur != nil && !cur.inRollup && cur.state.Applied == e.ID {
		log.Info("Transition already applied", "repo", cur.repo, "issue", cur.number)
		return nil
	}
	now := b.clock.Now()
	ev := event(msg, iss, now)

	inRollup := cur != nil && cur.inRollup && b.inOpenRollup(cur.repo, j.key)
	act := decide.Plan(cur.known(), ev, decide.Policy{
		AutoClose: b.cfg.AutoClose, ReopenWindow: b.cfg.ReopenWindow, IgnoreLabel: b.cfg.IgnoreLabel,
	})
	switch decide.RouteTransition(inRollup, act) {
	case decide.RouteRollup:
		return b.toRollup(ctx, log, cur.repo, j.key, msg, iss, ev)
	case decide.RouteNone:
		log.Debug("No transition", "why", act.Why)
		return nil
	case decide.RouteNewIssue:
		repo := iss.Repo.String()
		if !b.stormAllows(repo, now) {
			log.Warn("Storm guard: adding the group to the roll-up issue instead of a new issue", "repo", repo,
				"limit", b.cfg.StormGuard.MaxNewIssues, "window", b.cfg.StormGuard.Window)
			err := b.toRollup(ctx, log, repo, j.key, msg, iss, ev)
			if err == nil {
				b.metrics.storm.WithLabelValues(repo).Inc()
			}
			return err
		}
		err := b.create(ctx, log, j, e.ID, msg, iss, ev, act)
		if err != nil {
			b.unreserve(repo, now)
		}
		return b.outcome(act.Kind, err)
	default: // decide.RouteIssue
		return b.outcome(act.Kind, b.update(ctx, log, j, e, msg, cur, iss, ev, act))
	}
}

// outcome counts an applied transition or a dropped one.
func (b *Bridge) outcome(kind decide.Kind, err error) error {
	switch {
	case err == nil:
		b.metrics.transitions.WithLabelValues(string(kind)).Inc()
	case ghclient.IsPermanent(err):
		var pe *ghclient.PermanentError
		reason := "github"
		if errors.As(err, &pe) {
			reason = fmt.Sprintf("github_%d", pe.Status)
		}
		b.metrics.dropped.WithLabelValues(reason).Inc()
	}
	return err
}

type journalEntry = journal.Entry

func sortedKeys(m map[string]string) []string {
	return slices.Sorted(maps.Keys(m))
}

// event turns a payload into the decision's view of it.
func event(msg *payload.Message, iss *render.Issue, now time.Time) decide.Event {
	ev := decide.Event{SkipAutoClose: iss.SkipAutoClose, Now: now}
	for _, a := range msg.Alerts {
		ev.Alerts = append(ev.Alerts, decide.Alert{
			Fingerprint: a.Fingerprint, Firing: a.Status == payload.StatusFiring,
			Name: alertName(a.Labels, msg.CommonLabels),
		})
	}
	return ev
}

// alertName is the labels that tell an alert apart from the rest of its group.
func alertName(labels, common map[string]string) string {
	var parts []string
	for _, k := range sortedKeys(labels) {
		if _, same := common[k]; same {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s=%q", k, labels[k]))
	}
	if len(parts) == 0 {
		return labels["alertname"]
	}
	return strings.Join(parts, ",")
}

// create files the group's issue. Its body ends with the operation history
// of the nodes the alerts name (when nodeHistory is on), which later
// rewrites of the body carry over.
func (b *Bridge) create(ctx context.Context, log *slog.Logger, j job, id string, msg *payload.Message, iss *render.Issue, ev decide.Event, act decide.Action) error {
	body := iss.Body
	if act.LinkTo > 0 {
		body = render.LinkPrevious(body, act.LinkTo)
	}
	body = render.AttachHistory(body, b.nodeHistory(ctx, log, msg))
	nodes, _ := render.HistoryNodes(msg)
	body, err := marker.Append(body, iss.KeyHash, marker.State{Firing: ev.Firing(), Applied: id, Nodes: nodes,
		TitleDigest: marker.TitleDigest(iss.Title), Labels: iss.Labels})
	if err != nil {
		return err
	}
	repo := iss.Repo.String()
	log.Info("Filing issue", "repo", repo, "title", iss.Title, "links", act.LinkTo)
	is, err := b.gh.CreateIssue(ctx, repo, ghclient.NewIssue{Title: iss.Title, Body: body, Labels: iss.Labels, Assignees: iss.Assignees,
		Find: b.findFiled(repo, func(key string, st marker.State, _ ghclient.Issue) bool {
			return key == iss.KeyHash && st.Applied == id
		})})
	if err != nil {
		return fmt.Errorf("create issue in %s: %w", repo, err)
	}
	_, t, _, err := trackedFrom(is)
	if err != nil || t == nil {
		return fmt.Errorf("created issue %s#%d has no readable marker: %v", repo, is.Number, err)
	}
	t.wroteAt = b.clock.Now()
	b.put(j.key, t)
	return nil
}

// update edits the issue and comments on it. The body keeps the node
// history section it has; a change of the firing alerts reads the history
// again into the body, and a reopen into the body and the comment.
func (b *Bridge) update(ctx context.Context, log *slog.Logger, j job, e journalEntry, msg *payload.Message, cur *tracked, iss *render.Issue, ev decide.Event, act decide.Action) error {
	st := cur.state
	// The whole firing set: marker.Append compacts it again if it must.
	st.Firing, st.FiringCount, st.FiringDigest, st.Applied = ev.Firing(), 0, "", e.ID
	if nodes, _ := render.HistoryNodes(msg); len(nodes) > 0 {
		// The join to the nodes' diagnostics bundles (diagnostics.go).
		st.Nodes = nodes
	}
	if act.CommentDigest != "" {
		st.LastComment = act.CommentDigest
	}
	// The title and labels follow the group (a node incident's phase): as
	// the cache shows them now, and again below on GitHub's answer.
	owned := decide.Owned{TitleDigest: st.TitleDigest, Labels: st.Labels}
	rendered := decide.Rendered{Title: iss.Title, Labels: iss.Labels}
	follow := decide.FollowRendered(decide.Shown{Title: cur.title, Labels: cur.labels}, owned, rendered)
	if !follow.Changes() {
		// Nothing to apply: the record goes with this write.
		st.TitleDigest, st.Labels = follow.Record.TitleDigest, follow.Record.Labels
	}
	if note := decide.Relabelled(owned.Labels, iss.Labels); note != "" && act.Comment != "" {
		act.Comment += " " + note
	}
	history, fresh := cur.history, ""
	switch {
	case act.State == ghclient.StateOpen:
		if fresh = b.nodeHistory(ctx, log, msg); fresh != "" {
			history = fresh
		}
	case act.Kind == decide.AlertsChanged:
		// A node incident's alerts change as kubemedic acts (a repair
		// starts, fails, the node is quarantined): the body's history
		// follows, so that the handoff lists every attempt.
		if h := b.nodeHistory(ctx, log, msg); h != "" {
			history = h
		}
	}
	comment := ""
	if act.Comment != "" {
		posted := false
		if j.recovered {
			// The comment may have been posted before a crash.
			var err error
			if posted, err = b.commentPosted(ctx, cur, e); err != nil {
				return err
			}
		}
		if !posted {
			comment = act.Comment
			if fresh != "" {
				comment += "\n\n" + fresh
			}
			comment += marker.Transition(e.ID)
		}
	}
	body, err := marker.Append(render.AttachHistory(iss.Body, history), iss.KeyHash, st)
	if err != nil {
		return err
	}
	edit := ghclient.Edit{Body: &body}
	if act.State != "" {
		edit.State = &act.State
		if act.StateReason != "" {
			edit.StateReason = &act.StateReason
		}
	}
	log.Info("Updating issue", "repo", cur.repo, "issue", cur.number, "transition", act.Kind, "state", act.State,
		"comment", comment != "", "why", act.Why)
	var is ghclient.Issue
	if comment != "" && cur.nodeID != "" {
		// One GraphQL request: the edit, then the comment.
		is, err = b.gh.Transition(ctx, cur.repo, cur.number, cur.nodeID, edit, comment)
	} else {
		if comment != "" {
			if err := b.gh.CreateComment(ctx, cur.repo, cur.number, comment); err != nil {
				b.forgetIfGone(j.key, cur, err)
				return fmt.Errorf("comment on %s#%d: %w", cur.repo, cur.number, err)
			}
		}
		is, err = b.gh.EditIssue(ctx, cur.repo, cur.number, edit)
	}
	if err != nil {
		b.forgetIfGone(j.key, cur, err)
		return fmt.Errorf("update %s#%d: %w", cur.repo, cur.number, err)
	}
	if follow.Changes() {
		is = b.follow(ctx, log, cur, is, body, iss.KeyHash, st, owned, rendered)
	}
	_, t, _, err := trackedFrom(is)
	if err != nil || t == nil {
		return fmt.Errorf("edited issue %s#%d has no readable marker: %v", cur.repo, is.Number, err)
	}
	t.wroteAt = b.clock.Now()
	b.put(j.key, t)
	return nil
}

// follow retitles and relabels an issue after a transition's write, from
// the title and labels GitHub answered it with (so that a label a person
// set a moment ago is kept), and records what it set in the marker in the
// same PATCH: title, labels and record change together or not at all. It
// returns the issue as it is now. A failure is logged and leaves the issue
// as the transition left it, the old record included, so that the next
// transition of the group tries again; the transition itself is applied.
func (b *Bridge) follow(ctx context.Context, log *slog.Logger, cur *tracked, is ghclient.Issue, body, keyHash string, st marker.State, owned decide.Owned, rendered decide.Rendered) ghclient.Issue {
	f := decide.FollowRendered(decide.Shown{Title: is.Title, Labels: is.Labels}, owned, rendered)
	st.TitleDigest, st.Labels = f.Record.TitleDigest, f.Record.Labels
	body, err := marker.Append(body, keyHash, st)
	if err != nil {
		log.Error("Not retitling or relabelling issue", "repo", cur.repo, "issue", cur.number, "err", err)
		return is
	}
	edit := ghclient.Edit{Body: &body}
	if f.Title != "" {
		edit.Title = &f.Title
	}
	if f.Labels != nil {
		edit.Labels = &f.Labels
	}
	log.Info("Retitling and relabelling issue", "repo", cur.repo, "issue", cur.number, "title", f.Title,
		"add", f.Add, "remove", f.Remove, "why", f.Why)
	edited, err := b.gh.EditIssue(ctx, cur.repo, cur.number, edit)
	if err != nil {
		log.Warn("Retitling or relabelling issue failed; the next transition tries again", "repo", cur.repo, "issue", cur.number, "err", err)
		return is
	}
	return edited
}

// findFiled is a create's ghclient.NewIssue.Find: after an answer that may
// have been lost, it lists the repository's issues with the identity label
// changed since since (the list API, consistent at once) and picks the one
// whose marker filed matches (for a group: its key and this journal entry,
// so an older issue of the group is never taken for it).
func (b *Bridge) findFiled(repo string, filed func(key string, st marker.State, is ghclient.Issue) bool) func(context.Context, time.Time) (ghclient.Issue, bool, error) {
	return func(ctx context.Context, since time.Time) (ghclient.Issue, bool, error) {
		issues, err := b.gh.ListIssues(ctx, repo, ghclient.StateAll, since, b.cfg.IdentityLabel)
		if err != nil {
			return ghclient.Issue{}, false, fmt.Errorf("list the issues of %s changed since %s: %w", repo, since.UTC().Format(time.RFC3339), err)
		}
		for _, is := range issues {
			key, st, ok, err := marker.Parse(is.Body)
			if ok && err == nil && filed(key, st, is) {
				return is, true, nil
			}
		}
		return ghclient.Issue{}, false, nil
	}
}

// commentPosted looks for the transition mark of entry e among the comments
// made since it was received. Only a recovered entry needs it: within one
// process the client itself looks for a comment whose answer was lost
// before it sends it again.
func (b *Bridge) commentPosted(ctx context.Context, cur *tracked, e journalEntry) (bool, error) {
	comments, err := b.gh.ListComments(ctx, cur.repo, cur.number, e.Received.Add(-time.Minute))
	if err != nil {
		return false, fmt.Errorf("list comments of %s#%d: %w", cur.repo, cur.number, err)
	}
	for _, c := range comments {
		if marker.HasTransition(c.Body, e.ID) {
			return true, nil
		}
	}
	return false, nil
}

// forgetIfGone drops the cache entry of an issue GitHub no longer has (deleted,
// transferred, or its repository gone), so the next firing files a new one.
func (b *Bridge) forgetIfGone(key string, cur *tracked, err error) {
	var pe *ghclient.PermanentError
	if errors.As(err, &pe) && (pe.Status == 404 || pe.Status == 410) {
		b.mu.Lock()
		defer b.mu.Unlock()
		if t := b.byKey[key]; t != nil && t.repo == cur.repo && t.number == cur.number {
			delete(b.byKey, key)
		}
	}
}
