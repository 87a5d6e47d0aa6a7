package ghfake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/kubemedic/kubemedic/alertbridge/ghclient"
)

// The GraphQL endpoint answers the one kind of document the bridge sends: a
// mutation of updateIssue, closeIssue, reopenIssue and addComment fields on
// one issue (by node ID), run in document order like GitHub does. Errors
// come back as GitHub's do: HTTP 200 with an errors list.
var mutationRE = regexp.MustCompile(`(\w+):\s*(updateIssue|closeIssue|reopenIssue|addComment)\(input:\s*\{([^}]*)\}\)`)

func (f *Fake) graphql(r *http.Request, prefix string, body []byte, now time.Time) *response {
	if r.Method != http.MethodPost {
		return notFound()
	}
	var in struct {
		Query     string         `json:"query"`
		Variables map[string]any `json:"variables"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return errorResponse(http.StatusBadRequest, "Problems parsing JSON", "https://docs.github.com/graphql")
	}
	str := func(name string) (string, bool) {
		s, ok := in.Variables[name].(string)
		return s, ok
	}
	id, _ := str("id")
	rp, iss := f.issueByNodeID(id)
	if iss == nil {
		return graphqlError("NOT_FOUND", "Could not resolve to a node with the global id of '"+id+"'")
	}
	u := urls{api: "http://" + r.Host + prefix, html: "http://" + r.Host}
	data := map[string]any{}
	for _, m := range mutationRE.FindAllStringSubmatch(in.Query, -1) {
		alias, field, args := m[1], m[2], m[3]
		var resp *response
		switch field {
		case "updateIssue":
			b, ok := str("body")
			if !ok {
				return f.reject(RejectValidation, graphqlError("UNPROCESSABLE", "updateIssue without $body"))
			}
			if tooLong(b, MaxBodyChars) {
				return f.reject(RejectBodyTooLong, graphqlFieldError("UNPROCESSABLE", graphqlBodyTooLong, alias))
			}
			raw, _ := json.Marshal(map[string]string{"body": b})
			resp = f.editIssue(rp, iss, u, raw, now)
		case "closeIssue":
			reason := ghclient.ReasonCompleted
			if strings.Contains(args, "NOT_PLANNED") {
				reason = ghclient.ReasonNotPlanned
			}
			raw, _ := json.Marshal(map[string]any{"state": ghclient.StateClosed, "state_reason": reason})
			resp = f.editIssue(rp, iss, u, raw, now)
		case "reopenIssue":
			raw, _ := json.Marshal(map[string]any{"state": ghclient.StateOpen})
			resp = f.editIssue(rp, iss, u, raw, now)
		case "addComment":
			c, ok := str("comment")
			if !ok || c == "" {
				return f.reject(RejectValidation, graphqlError("UNPROCESSABLE", "addComment without a body"))
			}
			if tooLong(c, MaxBodyChars) {
				return f.reject(RejectBodyTooLong, graphqlFieldError("UNPROCESSABLE", graphqlBodyTooLong, alias))
			}
			raw, _ := json.Marshal(map[string]string{"body": c})
			if resp := f.createComment(rp, iss, u, raw); resp.status >= 300 {
				return graphqlError("UNPROCESSABLE", field+" failed")
			}
			data[alias] = map[string]any{"clientMutationId": nil}
			continue
		}
		if resp.status >= 300 {
			return graphqlError("UNPROCESSABLE", field+" failed")
		}
		data[alias] = map[string]any{"issue": graphqlIssueJSON(iss)}
	}
	if len(data) == 0 {
		return graphqlError("UNPROCESSABLE", "no supported mutation in the document")
	}
	return jsonResponse(http.StatusOK, map[string]any{"data": data})
}

func graphqlError(typ, msg string) *response {
	return jsonResponse(http.StatusOK, map[string]any{"data": nil, "errors": []any{map[string]any{"type": typ, "message": msg}}})
}

// graphqlBodyTooLong is GitHub's message for a body over the limit in
// updateIssue and addComment.
var graphqlBodyTooLong = fmt.Sprintf("Body is too long (maximum is %d characters)", MaxBodyChars)

// graphqlFieldError is an error of one mutation field, with its path.
func graphqlFieldError(typ, msg, field string) *response {
	return jsonResponse(http.StatusOK, map[string]any{"data": nil, "errors": []any{map[string]any{
		"type": typ, "path": []string{field}, "message": msg,
	}}})
}

func (f *Fake) issueByNodeID(id string) (*repo, *issue) {
	for _, rp := range f.repos {
		for _, iss := range rp.issues {
			if nodeID("I_kwDO", iss.id) == id {
				return rp, iss
			}
		}
	}
	return nil, nil
}

func graphqlIssueJSON(iss *issue) map[string]any {
	labels := []any{}
	for _, l := range iss.labels {
		labels = append(labels, map[string]any{"name": l})
	}
	assignees := []any{}
	for _, a := range iss.assignees {
		assignees = append(assignees, map[string]any{"login": a})
	}
	var reason, closed any
	if iss.stateReason != "" {
		reason = strings.ToUpper(string(iss.stateReason))
	}
	if !iss.closedAt.IsZero() {
		closed = iss.closedAt
	}
	return map[string]any{
		"number": iss.number, "state": strings.ToUpper(string(iss.state)), "stateReason": reason,
		"createdAt": iss.createdAt, "updatedAt": iss.updatedAt, "closedAt": closed,
		"title": iss.title, "body": iss.body, "url": "",
		"labels": map[string]any{"nodes": labels}, "assignees": map[string]any{"nodes": assignees},
	}
}
