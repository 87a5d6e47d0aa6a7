package bridge

import (
	"context"
	"log/slog"

	"github.com/kubemedic/kubemedic/alertbridge/ghclient"
	"github.com/kubemedic/kubemedic/alertbridge/marker"
	"github.com/kubemedic/kubemedic/alertbridge/render"
)

// maxRefits bounds how often one write is sent again shorter.
const maxRefits = 3

// refitting is the GitHub client as the bridge uses it: every body it
// renders fits GitHub's limit by construction (render.MaxBodyLength and
// marker.MaxLength), and should GitHub still refuse one as too long, the
// write is sent again with the visible text cut to half (then a quarter,
// then an eighth), the hidden marks kept, never dropped for its size. A
// write that still fails for good is counted by reason in
// kubemedic_alertbridge_github_rejected_total.
//
// ListIssues and ListComments, reads, pass through.
type refitting struct {
	ghclient.Client
	log      *slog.Logger
	rejected func(reason string)
}

var _ ghclient.Client = (*refitting)(nil)

// shorter cuts the visible text of a bridge body or comment to half its
// length, keeping its hidden marks.
func shorter(body string) string {
	text, trailer := marker.SplitTrailer(body)
	return render.FitBodyTo(text, len(text)/2) + trailer
}

// send runs write with bodies cut shorter while GitHub refuses them as too
// long, and counts a write that fails for good.
func (r *refitting) send(endpoint, repo string, bodies []*string, write func() error) error {
	err := write()
	for i := 0; i < maxRefits && ghclient.BodyTooLong(err); i++ {
		sizes := make([]int, 0, len(bodies))
		for _, b := range bodies {
			if b != nil {
				sizes = append(sizes, len(*b))
				*b = shorter(*b)
			}
		}
		r.log.Warn("GitHub refused a body as too long; sending it again with its text cut to half", "endpoint", endpoint,
			"repo", repo, "bytes", sizes, "try", i+1, "err", err)
		err = write()
	}
	if reason := ghclient.RejectReason(err); reason != "" {
		r.rejected(reason)
	}
	return err
}

func (r *refitting) CreateIssue(ctx context.Context, repo string, in ghclient.NewIssue) (is ghclient.Issue, err error) {
	err = r.send(ghclient.EndpointCreateIssue, repo, []*string{&in.Body}, func() (err error) {
		is, err = r.Client.CreateIssue(ctx, repo, in)
		return err
	})
	return is, err
}

func (r *refitting) EditIssue(ctx context.Context, repo string, number int, e ghclient.Edit) (is ghclient.Issue, err error) {
	if e.Body != nil {
		body := *e.Body
		e.Body = &body // the caller's string is not cut
	}
	err = r.send(ghclient.EndpointEditIssue, repo, []*string{e.Body}, func() (err error) {
		is, err = r.Client.EditIssue(ctx, repo, number, e)
		return err
	})
	return is, err
}

func (r *refitting) CreateComment(ctx context.Context, repo string, number int, body string) error {
	return r.send(ghclient.EndpointCreateComment, repo, []*string{&body}, func() error {
		return r.Client.CreateComment(ctx, repo, number, body)
	})
}

func (r *refitting) Transition(ctx context.Context, repo string, number int, nodeID string, e ghclient.Edit, comment string) (is ghclient.Issue, err error) {
	if e.Body != nil {
		body := *e.Body
		e.Body = &body
	}
	// GitHub does not say which of the two is too long: both are cut.
	err = r.send(ghclient.EndpointTransition, repo, []*string{e.Body, &comment}, func() (err error) {
		is, err = r.Client.Transition(ctx, repo, number, nodeID, e, comment)
		return err
	})
	return is, err
}
