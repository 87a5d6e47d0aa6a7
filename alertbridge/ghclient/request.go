package ghclient

import (
	"bytes"
	"encoding/json"

	"github.com/google/go-github/v60/github"
)

// The request bodies are built in one place so that the dry run logs exactly
// what the real client sends.

// createRequest is the body of POST /repos/{o}/{r}/issues.
func createRequest(in NewIssue) *github.IssueRequest {
	req := &github.IssueRequest{Title: github.String(in.Title), Body: github.String(in.Body)}
	if len(in.Labels) > 0 {
		labels := append([]string(nil), in.Labels...)
		req.Labels = &labels
	}
	if len(in.Assignees) > 0 {
		assignees := append([]string(nil), in.Assignees...)
		req.Assignees = &assignees
	}
	return req
}

// editRequest is the body of PATCH /repos/{o}/{r}/issues/{n}: body, state,
// state_reason, title and labels, each only when the Edit sets it.
// Assignees belong to people once the issue exists and are never sent.
func editRequest(e Edit) *github.IssueRequest {
	req := &github.IssueRequest{Body: e.Body, Title: e.Title}
	if e.Labels != nil {
		// An empty list is sent as [] (remove every label), never omitted.
		labels := append([]string{}, (*e.Labels)...)
		req.Labels = &labels
	}
	if e.State != nil {
		req.State = github.String(string(*e.State))
	}
	if e.StateReason != nil {
		req.StateReason = github.String(string(*e.StateReason))
	}
	return req
}

// commentRequest is the body of POST /repos/{o}/{r}/issues/{n}/comments.
func commentRequest(body string) *github.IssueComment {
	return &github.IssueComment{Body: github.String(body)}
}

// encodeBody encodes v the way go-github's NewRequest does, without the
// trailing newline.
func encodeBody(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
