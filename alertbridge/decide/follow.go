package decide

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kubemedic/kubemedic/alertbridge/marker"
)

// Shown is an issue's title and labels as GitHub last answered them.
type Shown struct {
	Title  string
	Labels []string
}

// Owned is what the bridge recorded in the marker about the title
// and labels it gave the issue (marker.State's TitleDigest and Labels).
type Owned struct {
	// TitleDigest is marker.TitleDigest of the title the bridge last set;
	// "" when unknown.
	TitleDigest string
	// Labels are the labels the bridge last rendered; nil when unknown.
	Labels []string
}

// Rendered is the title and labels the group renders to now.
type Rendered struct {
	Title  string
	Labels []string
}

// Follow is how an issue's title and labels follow its group.
type Follow struct {
	// Title is the new title, "" to leave it as it is.
	Title string
	// Labels is the whole new label set (Shown's labels, less
	// Remove, plus Add), nil when it does not change.
	Labels []string
	// Add and Remove are the labels Labels adds to and removes from the
	// issue, for logs.
	Add, Remove []string
	// Record is what the marker records from now on.
	Record Owned
	// Why says why a rendered change is not applied, for logs; "" when
	// everything rendered is applied.
	Why string
}

// Changes reports whether the title or labels change.
func (f Follow) Changes() bool { return f.Title != "" || f.Labels != nil }

// FollowRendered decides how an issue's title and labels follow what its
// group renders now, without undoing what people did:
//
//   - The title changes to the rendered one only while the issue still has
//     the title the bridge set last (its digest is the one recorded): a
//     title a person changed stays theirs for good, and so does one of an
//     issue with no record (filed before titles followed), unless it is
//     the rendered title, which is then recorded as the bridge's.
//   - Labels the group renders now and did not before are added; labels it
//     rendered before and no longer does are removed, when the issue has
//     them. Every other label is left alone: the ones people added, and
//     the ones still rendered that a person removed (never put back). An
//     issue with no record of rendered labels changes none, and records
//     what is rendered now. GitHub label names are case-insensitive, and
//     so is every comparison here.
//
// It is pure: shown must be as fresh as the caller can have it (the answer
// to its last write), since Labels replaces the whole label set.
func FollowRendered(shown Shown, owned Owned, next Rendered) Follow {
	f := Follow{Record: Owned{TitleDigest: owned.TitleDigest, Labels: slices.Clone(next.Labels)}}
	switch {
	case next.Title == "" || next.Title == shown.Title:
		if next.Title != "" {
			f.Record.TitleDigest = marker.TitleDigest(next.Title)
		}
	case owned.TitleDigest == "":
		f.Why = "title not changed: the issue has no record of the title the bridge set"
	case marker.TitleDigest(shown.Title) != owned.TitleDigest:
		f.Why = "title not changed: a person changed it"
	default:
		f.Title = next.Title
		f.Record.TitleDigest = marker.TitleDigest(next.Title)
	}
	if owned.Labels == nil {
		return f
	}
	for _, l := range next.Labels {
		if !containsFold(owned.Labels, l) && !containsFold(shown.Labels, l) {
			f.Add = append(f.Add, l)
		}
	}
	for _, l := range owned.Labels {
		if !containsFold(next.Labels, l) && containsFold(shown.Labels, l) {
			f.Remove = append(f.Remove, l)
		}
	}
	if len(f.Add) == 0 && len(f.Remove) == 0 {
		return f
	}
	f.Labels = []string{}
	for _, l := range shown.Labels {
		if !containsFold(f.Remove, l) {
			f.Labels = append(f.Labels, l)
		}
	}
	f.Labels = append(f.Labels, f.Add...)
	return f
}

// Relabelled says in words how the rendered labels of the form
// "name:value" changed value, e.g. "Incident now quarantined (was
// repairing)." for incident:repairing → incident:quarantined; "" when none
// did, or when before is unknown (nil). It goes into the transition's
// comment, so that the timeline says when the incident changed phase.
func Relabelled(before, after []string) string {
	if before == nil {
		return ""
	}
	var out []string
	for _, a := range after {
		name, value, ok := strings.Cut(a, ":")
		if !ok || name == "" || containsFold(before, a) {
			continue
		}
		for _, b := range before {
			bname, bvalue, ok := strings.Cut(b, ":")
			if ok && strings.EqualFold(bname, name) && !containsFold(after, b) {
				out = append(out, fmt.Sprintf("%s now %s (was %s).", capitalize(name), value, bvalue))
				break
			}
		}
	}
	return strings.Join(out, " ")
}

func containsFold(list []string, s string) bool {
	return slices.ContainsFunc(list, func(l string) bool { return strings.EqualFold(l, s) })
}
