package ghclient

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/go-github/v60/github"
)

// EndpointTransition names the GraphQL request of Transition in metrics.
const EndpointTransition = "graphql.transition"

// Transition applies an edit (body, state, state reason) and then posts a
// comment on one issue in a single request: GitHub's GraphQL API runs the
// mutations of one document in order. A transition that closes or reopens an
// issue and says why costs one call instead of two.
//
// The comment comes first, as with two REST calls: if the process dies after
// it and before the edit, the edit's marker does not yet say the transition
// was applied, and the bridge's replay finds the comment by its transition
// mark instead of posting it again. A retry after an answer that shows the
// comment was made leaves the comment out; so does one after an answer that
// may have been lost (a 5xx, a timeout) once the comment is found among the
// issue's comments. The edit and the close or reopen are idempotent and are
// sent again.
//
// nodeID is the issue's GraphQL node ID (Issue.NodeID). GitHub Enterprise
// serves GraphQL at /api/graphql beside /api/v3/.
func (c *client) Transition(ctx context.Context, repo string, number int, nodeID string, e Edit, comment string) (Issue, error) {
	if _, _, err := splitRepo(EndpointTransition, repo); err != nil {
		return Issue{}, err
	}
	if nodeID == "" {
		return Issue{}, &PermanentError{Endpoint: EndpointTransition, Repo: repo, Reason: "no_node_id",
			Err: fmt.Errorf("issue #%d has no node ID", number)}
	}
	if e.Title != nil || e.Labels != nil {
		// Not sent here: labels go by name through REST only (EditIssue).
		return Issue{}, &PermanentError{Endpoint: EndpointTransition, Repo: repo, Reason: "bad_request",
			Err: fmt.Errorf("transition of issue #%d: a title or labels are edited with EditIssue", number)}
	}
	if comment != "" && e.Body == nil && e.State == nil {
		// Without an edit there is nothing to send once the comment
		// turns out to be made, and no issue to answer with.
		return Issue{}, &PermanentError{Endpoint: EndpointTransition, Repo: repo, Reason: "bad_request",
			Err: fmt.Errorf("transition of issue #%d: a comment alone is CreateComment", number)}
	}
	endpoint := c.graphqlURL()
	var out graphqlResponse
	// After an answer that may have been lost, the comment is looked for
	// by its body before the mutations are sent again; found, it is left
	// out, and the edit, idempotent, is sent again all the same.
	verify := func(ctx context.Context, since time.Time) (bool, error) {
		if comment == "" || out.Data.Comment != nil {
			return false, nil
		}
		made, err := c.commentMade(ctx, repo, number, comment, since)
		if err != nil {
			return false, err
		}
		if made {
			c.log.Info("The transition's comment was made; sending the rest of the transition without it",
				"repo", repo, "issue", number)
			comment = ""
		}
		return false, nil
	}
	err := c.doWrite(ctx, EndpointTransition, repo, verify, func(ctx context.Context, gh *github.Client) (*github.Response, error) {
		if out.Data.Comment != nil {
			comment = "" // made by an earlier attempt
		}
		query, vars := transitionDocument(nodeID, e, comment)
		req, err := gh.NewRequest(http.MethodPost, endpoint, map[string]any{"query": query, "variables": vars})
		if err != nil {
			return nil, err
		}
		commented := out.Data.Comment
		out = graphqlResponse{}
		resp, err := gh.Do(ctx, req, &out)
		if out.Data.Comment == nil {
			out.Data.Comment = commented
		}
		if err != nil {
			return resp, err
		}
		return graphqlErrors(resp, out)
	})
	if err != nil {
		return Issue{}, fmt.Errorf("transition of issue #%d: %w", number, err)
	}
	is, ok := out.issue()
	if !ok {
		return Issue{}, &PermanentError{Endpoint: EndpointTransition, Repo: repo, Reason: "bad_response",
			Err: fmt.Errorf("transition of issue #%d: the answer holds no issue", number)}
	}
	return is.toIssue(repo, nodeID), nil
}

// graphqlURL is the GraphQL endpoint beside the REST root.
func (c *client) graphqlURL() string {
	u := *c.baseURL
	if strings.HasSuffix(u.Path, "/api/v3/") {
		u.Path = strings.TrimSuffix(u.Path, "/v3/") + "/graphql"
		return u.String()
	}
	return u.ResolveReference(&url.URL{Path: "graphql"}).String()
}

const issueFields = `number state stateReason createdAt updatedAt closedAt title body url ` +
	`labels(first: 100) { nodes { name } } assignees(first: 100) { nodes { login } }`

// transitionDocument builds the mutation: comment, edit the body, then close
// or reopen; only the parts the transition needs, and only the
// variables they use (GraphQL refuses unused ones).
func transitionDocument(nodeID string, e Edit, comment string) (string, map[string]any) {
	vars := map[string]any{"id": nodeID}
	decls := []string{"$id: ID!"}
	var fields []string
	if comment != "" {
		vars["comment"] = comment
		decls = append(decls, "$comment: String!")
		fields = append(fields, "comment: addComment(input: {subjectId: $id, body: $comment}) { clientMutationId }")
	}
	if e.Body != nil {
		vars["body"] = *e.Body
		decls = append(decls, "$body: String!")
		fields = append(fields, "edit: updateIssue(input: {id: $id, body: $body}) { issue { "+issueFields+" } }")
	}
	if e.State != nil {
		switch *e.State {
		case StateClosed:
			reason := "COMPLETED"
			if e.StateReason != nil && *e.StateReason == ReasonNotPlanned {
				reason = "NOT_PLANNED"
			}
			fields = append(fields, "state: closeIssue(input: {issueId: $id, stateReason: "+reason+"}) { issue { "+issueFields+" } }")
		case StateOpen:
			fields = append(fields, "state: reopenIssue(input: {issueId: $id}) { issue { "+issueFields+" } }")
		}
	}
	return "mutation KubemedicTransition(" + strings.Join(decls, ", ") + ") {\n  " + strings.Join(fields, "\n  ") + "\n}", vars
}

type graphqlIssue struct {
	Number      int        `json:"number"`
	State       string     `json:"state"`
	StateReason *string    `json:"stateReason"`
	CreatedAt   time.Time  `json:"createdAt"`
	UpdatedAt   time.Time  `json:"updatedAt"`
	ClosedAt    *time.Time `json:"closedAt"`
	Title       string     `json:"title"`
	Body        string     `json:"body"`
	URL         string     `json:"url"`
	Labels      struct {
		Nodes []struct {
			Name string `json:"name"`
		} `json:"nodes"`
	} `json:"labels"`
	Assignees struct {
		Nodes []struct {
			Login string `json:"login"`
		} `json:"nodes"`
	} `json:"assignees"`
}

type issuePayload struct {
	Issue *graphqlIssue `json:"issue"`
}

type graphqlResponse struct {
	Data struct {
		Comment *struct{}     `json:"comment"`
		Edit    *issuePayload `json:"edit"`
		State   *issuePayload `json:"state"`
	} `json:"data"`
	Errors []struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"errors"`
}

// issue is the issue as the last mutation left it.
func (r graphqlResponse) issue() (*graphqlIssue, bool) {
	for _, p := range []*issuePayload{r.Data.State, r.Data.Edit} {
		if p != nil && p.Issue != nil {
			return p.Issue, true
		}
	}
	return nil, false
}

func (g *graphqlIssue) toIssue(repo, nodeID string) Issue {
	is := Issue{
		Repo: repo, Number: g.Number, NodeID: nodeID, Title: g.Title, Body: g.Body, State: IssueState(strings.ToLower(g.State)),
		HTMLURL: g.URL, CreatedAt: g.CreatedAt, UpdatedAt: g.UpdatedAt,
	}
	if g.StateReason != nil {
		is.StateReason = StateReason(strings.ToLower(*g.StateReason))
	}
	if g.ClosedAt != nil {
		is.ClosedAt = *g.ClosedAt
	}
	for _, l := range g.Labels.Nodes {
		is.Labels = append(is.Labels, l.Name)
	}
	for _, a := range g.Assignees.Nodes {
		is.Assignees = append(is.Assignees, a.Login)
	}
	return is
}

// graphqlErrors turns errors GitHub reports inside a 200 answer into the
// HTTP answer they stand for, so the one Classify decides on them too:
// NOT_FOUND → 404 and FORBIDDEN → 403 (permanent), RATE_LIMITED → 403 with
// the rate-limit headers of the answer, anything else → 502 (retried).
func graphqlErrors(resp *github.Response, out graphqlResponse) (*github.Response, error) {
	if len(out.Errors) == 0 {
		return resp, nil
	}
	status := http.StatusBadGateway
	switch out.Errors[0].Type {
	case "NOT_FOUND":
		status = http.StatusNotFound
	case "FORBIDDEN":
		status = http.StatusForbidden
	case "RATE_LIMITED":
		status = http.StatusForbidden
	case "UNPROCESSABLE":
		status = http.StatusUnprocessableEntity
	}
	var msgs []string
	for _, e := range out.Errors {
		msgs = append(msgs, fmt.Sprintf("%s: %s", e.Type, e.Message))
	}
	hr := &http.Response{StatusCode: status, Status: http.StatusText(status), Header: http.Header{}, Request: resp.Request}
	if resp.Response != nil {
		hr.Header = resp.Header.Clone()
	}
	// RATE_LIMITED is the primary limit whatever the headers say; any
	// other error must not read as one.
	if out.Errors[0].Type == "RATE_LIMITED" {
		hr.Header.Set("X-RateLimit-Remaining", "0")
	} else {
		hr.Header.Del("X-RateLimit-Remaining")
	}
	r := &github.Response{Response: hr}
	return r, &github.ErrorResponse{Response: hr, Message: "GraphQL: " + strings.Join(msgs, "; ")}
}
