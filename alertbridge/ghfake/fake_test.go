package ghfake_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/kubemedic/kubemedic/alertbridge/ghclient"
	"github.com/kubemedic/kubemedic/alertbridge/ghfake"
)

const repo = "acme/gpu-alerts"

type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a answer) json(t *testing.T, v any) {
	t.Helper()
	require.NoError(t, json.Unmarshal(a.body, v), string(a.body))
}

func call(t *testing.T, method, url, body string, header ...string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return answer{status: resp.StatusCode, header: resp.Header, body: b}
}

func newFake(t *testing.T) (*ghfake.Fake, *testingclock.FakeClock) {
	t.Helper()
	f := ghfake.New()
	t.Cleanup(f.Close)
	clk := testingclock.NewFakeClock(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC))
	f.SetClock(clk)
	f.AddRepo(repo)
	return f, clk
}

func TestListPaginatesWithLinkHeader(t *testing.T) {
	f, _ := newFake(t)
	for range 75 {
		f.AddIssue(repo, "t", "", "kubemedic")
	}
	f.AddIssue(repo, "unlabelled", "")

	a := call(t, http.MethodGet, f.URL()+"repos/"+repo+"/issues?labels=kubemedic&per_page=30&page=2&direction=asc", "")
	require.Equal(t, http.StatusOK, a.status)
	var page []map[string]any
	a.json(t, &page)
	require.Len(t, page, 30)
	require.EqualValues(t, 31, page[0]["number"])
	link := a.header.Get("Link")
	require.Contains(t, link, `page=3&per_page=30>; rel="next"`)
	require.Contains(t, link, `page=3&per_page=30>; rel="last"`)
	require.Contains(t, link, `page=1&per_page=30>; rel="prev"`)
	require.Contains(t, link, `labels=kubemedic`)
	require.Equal(t, "5000", a.header.Get("X-RateLimit-Limit"))
	require.NotEmpty(t, a.header.Get("X-GitHub-Request-Id"))

	a = call(t, http.MethodGet, f.URL()+"repos/"+repo+"/issues?labels=kubemedic&per_page=30&page=3", "")
	a.json(t, &page)
	require.Len(t, page, 15)
	require.NotContains(t, a.header.Get("Link"), `rel="next"`)
}

func TestIssueShapeAsGoGitHubDecodes(t *testing.T) {
	f, _ := newFake(t)
	a := call(t, http.MethodPost, f.URL()+"repos/"+repo+"/issues",
		`{"title":"GPU lost on node-7","body":"b","labels":["kubemedic","sev/2"],"assignees":["oncall"]}`)
	require.Equal(t, http.StatusCreated, a.status, string(a.body))
	var is map[string]any
	a.json(t, &is)
	require.EqualValues(t, 1, is["number"])
	require.True(t, strings.HasPrefix(is["node_id"].(string), "I_kwDO"))
	require.Equal(t, strings.TrimSuffix(f.URL(), "/")+"/"+repo+"/issues/1", is["html_url"])
	require.Equal(t, "open", is["state"])
	require.Nil(t, is["state_reason"])
	require.Nil(t, is["closed_at"])
	require.Equal(t, "2026-11-21T10:00:00Z", is["created_at"])
	require.NotContains(t, is, "pull_request")
	require.Equal(t, "kubemedic", is["labels"].([]any)[0].(map[string]any)["name"])
	require.Equal(t, "oncall", is["assignees"].([]any)[0].(map[string]any)["login"])
	require.Equal(t, []string{"kubemedic", "sev/2"}, f.Labels(repo), "labels are created on first use")
}

func TestErrors(t *testing.T) {
	for _, tc := range []struct {
		desc          string
		token         string
		method, path  string
		body          string
		auth          string
		wantStatus    int
		wantInMessage string
	}{
		{desc: "unknown repo is 404", method: "GET", path: "repos/acme/nope/issues", wantStatus: 404, wantInMessage: "Not Found"},
		{desc: "unknown issue is 404", method: "GET", path: "repos/" + repo + "/issues/99", wantStatus: 404, wantInMessage: "Not Found"},
		{desc: "unknown route is 404", method: "DELETE", path: "repos/" + repo + "/issues", wantStatus: 404},
		{desc: "missing token is 401", token: "s3cret", method: "GET", path: "repos/" + repo + "/issues", wantStatus: 401, wantInMessage: "Bad credentials"},
		{desc: "wrong token is 401", token: "s3cret", auth: "token nope", method: "GET", path: "repos/" + repo + "/issues", wantStatus: 401, wantInMessage: "Bad credentials"},
		{desc: "token scheme accepted", token: "s3cret", auth: "token s3cret", method: "GET", path: "repos/" + repo + "/issues", wantStatus: 200},
		{desc: "bearer scheme accepted", token: "s3cret", auth: "Bearer s3cret", method: "GET", path: "repos/" + repo + "/issues", wantStatus: 200},
		{desc: "empty title is 422", method: "POST", path: "repos/" + repo + "/issues", body: `{"title":""}`, wantStatus: 422, wantInMessage: "missing_field"},
		{desc: "bad JSON is 400", method: "POST", path: "repos/" + repo + "/issues", body: `{`, wantStatus: 400, wantInMessage: "Problems parsing JSON"},
		{desc: "bad state_reason is 422", method: "PATCH", path: "repos/" + repo + "/issues/1", body: `{"state":"closed","state_reason":"fixed"}`, wantStatus: 422, wantInMessage: "state_reason"},
		{desc: "bad state is 422", method: "PATCH", path: "repos/" + repo + "/issues/1", body: `{"state":"done"}`, wantStatus: 422, wantInMessage: `"field":"state"`},
		{desc: "the list filter all is no state for an edit: 422", method: "PATCH", path: "repos/" + repo + "/issues/1", body: `{"state":"all"}`, wantStatus: 422, wantInMessage: `"field":"state"`},
		{desc: "a state in another case is 422", method: "PATCH", path: "repos/" + repo + "/issues/1", body: `{"state":"CLOSED"}`, wantStatus: 422, wantInMessage: `"field":"state"`},
		{desc: "bad list state is 422", method: "GET", path: "repos/" + repo + "/issues?state=done", wantStatus: 422, wantInMessage: `"field":"state"`},
		{desc: "empty comment is 422", method: "POST", path: "repos/" + repo + "/issues/1/comments", body: `{"body":""}`, wantStatus: 422, wantInMessage: "missing_field"},
		{desc: "duplicate label is 422", method: "POST", path: "repos/" + repo + "/labels", body: `{"name":"existing"}`, wantStatus: 422, wantInMessage: "already_exists"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			f, _ := newFake(t)
			f.AddIssue(repo, "first", "", "existing")
			f.SetToken(tc.token)
			var hdr []string
			if tc.auth != "" {
				hdr = []string{"Authorization", tc.auth}
			}
			a := call(t, tc.method, f.URL()+tc.path, tc.body, hdr...)
			require.Equal(t, tc.wantStatus, a.status, string(a.body))
			require.Contains(t, string(a.body), tc.wantInMessage)
			calls := f.Calls()
			require.Len(t, calls, 1)
			require.Equal(t, tc.wantStatus, calls[0].Status)
		})
	}
}

func TestCloseAndReopenSemantics(t *testing.T) {
	f, clk := newFake(t)
	n := f.AddIssue(repo, "t", "b", "kubemedic")
	url := f.URL() + "repos/" + repo + "/issues/1"

	clk.Step(time.Minute)
	a := call(t, http.MethodPatch, url, `{"state":"closed"}`)
	require.Equal(t, http.StatusOK, a.status, string(a.body))
	is, _ := f.Issue(repo, n)
	require.Equal(t, ghclient.StateClosed, is.State)
	require.Equal(t, ghclient.ReasonCompleted, is.StateReason, "closing defaults the reason")
	require.Equal(t, clk.Now(), is.ClosedAt)

	a = call(t, http.MethodPatch, url, `{"state":"open"}`)
	require.Equal(t, http.StatusOK, a.status)
	var got map[string]any
	a.json(t, &got)
	require.Equal(t, "reopened", got["state_reason"])
	require.Nil(t, got["closed_at"])

	a = call(t, http.MethodPatch, url, `{"state":"closed","state_reason":"not_planned"}`)
	require.Equal(t, http.StatusOK, a.status)
	is, _ = f.Issue(repo, n)
	require.Equal(t, ghclient.ReasonNotPlanned, is.StateReason)

	f.ReopenIssue(repo, n)
	f.CloseIssue(repo, n, "")
	f.SetTitle(repo, n, "renamed by a human")
	f.AddLabel(repo, n, "triaged")
	is, _ = f.Issue(repo, n)
	require.Equal(t, ghclient.ReasonCompleted, is.StateReason)
	require.Equal(t, "renamed by a human", is.Title)
	require.Equal(t, []string{"kubemedic", "triaged"}, is.Labels)
	require.Len(t, f.Calls(), 3, "human actions are not recorded as calls")
}

func TestListFilters(t *testing.T) {
	f, clk := newFake(t)
	f.AddIssue(repo, "open both", "", "a", "b")
	clk.Step(time.Hour)
	closed := f.AddIssue(repo, "closed both", "", "a", "b")
	f.CloseIssue(repo, closed, ghclient.ReasonCompleted)
	f.AddIssue(repo, "only a", "", "a")
	f.AddPullRequest(repo, "a pull request", "a", "b")

	titles := func(query string) []string {
		var page []map[string]any
		call(t, http.MethodGet, f.URL()+"repos/"+repo+"/issues?"+query, "").json(t, &page)
		var out []string
		for _, is := range page {
			out = append(out, is["title"].(string))
		}
		return out
	}
	require.Equal(t, []string{"a pull request", "open both"}, titles("labels=a,b"), "open by default, newest first, pull requests included")
	require.Equal(t, []string{"open both", "closed both", "a pull request"}, titles("labels=a,B&state=all&direction=asc"))
	require.Equal(t, []string{"closed both"}, titles("labels=a&state=closed"))
	require.Equal(t, []string{"a pull request", "only a", "closed both"}, titles("state=all&since=2026-11-21T11:00:00Z"))
}

func TestCommentsSinceAndPagination(t *testing.T) {
	f, clk := newFake(t)
	n := f.AddIssue(repo, "t", "")
	f.AddComment(repo, n, "alice", "early")
	clk.Step(time.Hour)
	for range 3 {
		f.AddComment(repo, n, "bob", "late")
	}
	var page []map[string]any
	a := call(t, http.MethodGet, f.URL()+"repos/"+repo+"/issues/1/comments?since=2026-11-21T10:30:00Z&per_page=2", "")
	a.json(t, &page)
	require.Len(t, page, 2)
	require.Equal(t, "late", page[0]["body"])
	require.Contains(t, a.header.Get("Link"), `rel="next"`)

	a = call(t, http.MethodPost, f.URL()+"repos/"+repo+"/issues/1/comments", `{"body":"from the bridge"}`)
	require.Equal(t, http.StatusCreated, a.status)
	require.Equal(t, []string{"early", "late", "late", "late", "from the bridge"}, f.Comments(repo, n))
}

func TestEnterprisePrefixSearchAndFaults(t *testing.T) {
	f, clk := newFake(t)
	a := call(t, http.MethodGet, f.EnterpriseURL()+"repos/"+repo+"/issues", "")
	require.Equal(t, http.StatusOK, a.status)
	a = call(t, http.MethodGet, f.URL()+"search/issues?q=label:kubemedic", "")
	require.Equal(t, http.StatusOK, a.status)
	require.Contains(t, string(a.body), `"total_count":0`)

	f.FailWrites(1, http.StatusBadGateway, nil)
	a = call(t, http.MethodPost, f.URL()+"repos/"+repo+"/issues", `{"title":"x"}`)
	require.Equal(t, http.StatusBadGateway, a.status)
	a = call(t, http.MethodPost, f.URL()+"repos/"+repo+"/issues", `{"title":"x"}`)
	require.Equal(t, http.StatusCreated, a.status)

	f.SetRateLimit(5000, 0, clk.Now().Add(time.Minute))
	a = call(t, http.MethodGet, f.URL()+"repos/"+repo+"/issues", "")
	require.Equal(t, http.StatusForbidden, a.status)
	require.Equal(t, "0", a.header.Get("X-RateLimit-Remaining"))
	clk.Step(time.Minute)
	a = call(t, http.MethodGet, f.URL()+"repos/"+repo+"/issues", "")
	require.Equal(t, http.StatusOK, a.status)
	require.Equal(t, "4999", a.header.Get("X-RateLimit-Remaining"))

	calls := f.Calls()
	require.Equal(t, "/api/v3/repos/"+repo+"/issues", calls[0].RawPath)
	require.Equal(t, "/repos/"+repo+"/issues", calls[0].Path)
	require.Equal(t, 1, f.CallCount(http.MethodGet, "/search/"))
	require.Equal(t, 2, f.CallCount(http.MethodPost, "/repos/*/*/issues"))
	require.Equal(t, 0, f.CallCount(http.MethodPost, "/repos/*/*/issues/*"))
	f.ResetCalls()
	require.Empty(t, f.Calls())
}

func TestBodyAndTitleLimits(t *testing.T) {
	jsonBody := func(kv ...string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		b, _ := json.Marshal(m)
		return string(b)
	}
	// GitHub counts characters, not bytes: 65,536 three-byte runes fit.
	atLimit := strings.Repeat("€", ghfake.MaxBodyChars)
	over := strings.Repeat("a", ghfake.MaxBodyChars+1)
	for _, tc := range []struct {
		desc         string
		method, path string
		body         string
		wantStatus   int
		wantError    map[string]any
		wantRejected map[string]int
	}{
		{desc: "an issue body of 65,536 characters in more bytes is filed", method: "POST", path: "repos/" + repo + "/issues",
			body: jsonBody("title", "t", "body", atLimit), wantStatus: 201},
		{desc: "an issue body of 65,537 characters is 422", method: "POST", path: "repos/" + repo + "/issues",
			body: jsonBody("title", "t", "body", over), wantStatus: 422,
			wantError:    map[string]any{"resource": "Issue", "code": "custom", "field": "body", "message": "body is too long (maximum is 65536 characters)"},
			wantRejected: map[string]int{ghfake.RejectBodyTooLong: 1}},
		{desc: "an edit's body over the limit is 422", method: "PATCH", path: "repos/" + repo + "/issues/1",
			body: jsonBody("body", over), wantStatus: 422,
			wantError:    map[string]any{"resource": "Issue", "field": "body", "message": "body is too long (maximum is 65536 characters)"},
			wantRejected: map[string]int{ghfake.RejectBodyTooLong: 1}},
		{desc: "a comment over the limit is 422 in the comment's words", method: "POST", path: "repos/" + repo + "/issues/1/comments",
			body: jsonBody("body", over), wantStatus: 422,
			wantError:    map[string]any{"resource": "IssueComment", "code": "unprocessable", "field": "data", "message": "Body is too long (maximum is 65536 characters)"},
			wantRejected: map[string]int{ghfake.RejectBodyTooLong: 1}},
		{desc: "a comment at the limit is posted", method: "POST", path: "repos/" + repo + "/issues/1/comments",
			body: jsonBody("body", atLimit), wantStatus: 201},
		{desc: "a title of 257 characters is 422", method: "POST", path: "repos/" + repo + "/issues",
			body: jsonBody("title", strings.Repeat("t", ghfake.MaxTitleChars+1)), wantStatus: 422,
			wantError:    map[string]any{"resource": "Issue", "code": "custom", "field": "title", "message": "title is too long (maximum is 256 characters)"},
			wantRejected: map[string]int{ghfake.RejectTitleTooLong: 1}},
		{desc: "a retitle over the limit is 422", method: "PATCH", path: "repos/" + repo + "/issues/1",
			body: jsonBody("title", strings.Repeat("é", ghfake.MaxTitleChars+1)), wantStatus: 422,
			wantRejected: map[string]int{ghfake.RejectTitleTooLong: 1}},
		{desc: "a title of 256 characters is filed", method: "POST", path: "repos/" + repo + "/issues",
			body: jsonBody("title", strings.Repeat("é", ghfake.MaxTitleChars)), wantStatus: 201},
		{desc: "other validation failures are counted too", method: "POST", path: "repos/" + repo + "/issues",
			body: jsonBody("title", " "), wantStatus: 422, wantRejected: map[string]int{ghfake.RejectValidation: 1}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			f, _ := newFake(t)
			n := f.AddIssue(repo, "first", "before")
			a := call(t, tc.method, f.URL()+tc.path, tc.body)
			require.Equal(t, tc.wantStatus, a.status, string(a.body))
			require.Equal(t, tc.wantRejected, nilIfEmpty(f.Rejected()))
			if tc.wantError == nil {
				return
			}
			var got struct {
				Message string           `json:"message"`
				Errors  []map[string]any `json:"errors"`
				Doc     string           `json:"documentation_url"`
			}
			a.json(t, &got)
			require.Equal(t, "Validation Failed", got.Message)
			require.Len(t, got.Errors, 1)
			for k, v := range tc.wantError {
				require.Equal(t, v, got.Errors[0][k], k)
			}
			require.NotEmpty(t, got.Doc)
			is, _ := f.Issue(repo, n)
			require.Equal(t, "before", is.Body, "nothing of a refused write is applied")
			require.Empty(t, is.Comments)
			require.Len(t, f.Issues(repo), 1)
		})
	}
}

func TestGraphQLBodyLimit(t *testing.T) {
	f, _ := newFake(t)
	n := f.AddIssue(repo, "t", "before")
	is, _ := f.Issue(repo, n)
	over := strings.Repeat("a", ghfake.MaxBodyChars+1)
	for _, tc := range []struct {
		desc, query string
		vars        map[string]any
	}{
		{desc: "updateIssue", query: `mutation($id: ID!, $body: String!) { edit: updateIssue(input: {id: $id, body: $body}) { issue { number } } }`,
			vars: map[string]any{"id": is.NodeID, "body": over}},
		{desc: "addComment", query: `mutation($id: ID!, $comment: String!) { comment: addComment(input: {subjectId: $id, body: $comment}) { clientMutationId } }`,
			vars: map[string]any{"id": is.NodeID, "comment": over}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			before := f.Rejected()[ghfake.RejectBodyTooLong]
			body, _ := json.Marshal(map[string]any{"query": tc.query, "variables": tc.vars})
			a := call(t, http.MethodPost, f.URL()+"graphql", string(body))
			require.Equal(t, http.StatusOK, a.status, "GraphQL errors come in a 200")
			var got struct {
				Data   any `json:"data"`
				Errors []struct {
					Type    string   `json:"type"`
					Path    []string `json:"path"`
					Message string   `json:"message"`
				} `json:"errors"`
			}
			a.json(t, &got)
			require.Nil(t, got.Data)
			require.Len(t, got.Errors, 1)
			require.Equal(t, "UNPROCESSABLE", got.Errors[0].Type)
			require.Equal(t, "Body is too long (maximum is 65536 characters)", got.Errors[0].Message)
			require.Equal(t, before+1, f.Rejected()[ghfake.RejectBodyTooLong])
			is, _ := f.Issue(repo, n)
			require.Equal(t, "before", is.Body)
			require.Empty(t, is.Comments)
		})
	}
}

func nilIfEmpty(m map[string]int) map[string]int {
	if len(m) == 0 {
		return nil
	}
	return m
}

func TestLostAnswersApplyTheWrite(t *testing.T) {
	graphql := func(f *ghfake.Fake, n int) string {
		is, _ := f.Issue(repo, n)
		b, _ := json.Marshal(map[string]any{
			"query":     `mutation($id: ID!, $comment: String!, $body: String!) { comment: addComment(input: {subjectId: $id, body: $comment}) { clientMutationId } edit: updateIssue(input: {id: $id, body: $body}) { issue { number } } }`,
			"variables": map[string]any{"id": is.NodeID, "comment": "c", "body": "after"},
		})
		return string(b)
	}
	for _, tc := range []struct {
		ep           ghfake.Endpoint
		method, path string
		body         func(f *ghfake.Fake, n int) string
		applied      func(t *testing.T, f *ghfake.Fake, n int)
	}{
		{ep: ghfake.EndpointCreateIssue, method: "POST", path: "repos/" + repo + "/issues",
			body:    func(*ghfake.Fake, int) string { return `{"title":"new","body":"b"}` },
			applied: func(t *testing.T, f *ghfake.Fake, _ int) { require.Len(t, f.Issues(repo), 2) }},
		{ep: ghfake.EndpointEditIssue, method: "PATCH", path: "repos/" + repo + "/issues/1",
			body: func(*ghfake.Fake, int) string { return `{"body":"after","state":"closed"}` },
			applied: func(t *testing.T, f *ghfake.Fake, n int) {
				is, _ := f.Issue(repo, n)
				require.Equal(t, "after", is.Body)
				require.Equal(t, ghclient.StateClosed, is.State)
			}},
		{ep: ghfake.EndpointCreateComment, method: "POST", path: "repos/" + repo + "/issues/1/comments",
			body:    func(*ghfake.Fake, int) string { return `{"body":"c"}` },
			applied: func(t *testing.T, f *ghfake.Fake, n int) { require.Equal(t, []string{"c"}, f.Comments(repo, n)) }},
		{ep: ghfake.EndpointTransition, method: "POST", path: "graphql", body: graphql,
			applied: func(t *testing.T, f *ghfake.Fake, n int) {
				is, _ := f.Issue(repo, n)
				require.Equal(t, "after", is.Body)
				require.Equal(t, []string{"c"}, f.Comments(repo, n))
			}},
	} {
		t.Run(string(tc.ep)+"/502", func(t *testing.T) {
			f, _ := newFake(t)
			n := f.AddIssue(repo, "first", "before")
			f.LoseAnswers(tc.ep, 1, ghfake.LossBadGateway)
			a := call(t, tc.method, f.URL()+tc.path, tc.body(f, n))
			require.Equal(t, http.StatusBadGateway, a.status)
			require.Contains(t, string(a.body), "<title>502 Bad Gateway</title>", "a proxy's page, no JSON")
			require.Equal(t, "text/html", a.header.Get("Content-Type"))
			tc.applied(t, f, n)
			calls := f.Calls()
			require.Len(t, calls, 1)
			require.True(t, calls[0].Lost)
			require.Equal(t, http.StatusBadGateway, calls[0].Status)
			require.Zero(t, f.PendingFaults(tc.ep))
		})
		t.Run(string(tc.ep)+"/timeout", func(t *testing.T) {
			f, _ := newFake(t)
			n := f.AddIssue(repo, "first", "before")
			f.LoseAnswers(tc.ep, 1, ghfake.LossTimeout)
			req, err := http.NewRequest(tc.method, f.URL()+tc.path, strings.NewReader(tc.body(f, n)))
			require.NoError(t, err)
			_, err = (&http.Client{Timeout: 100 * time.Millisecond}).Do(req)
			require.Error(t, err, "no answer before the client gives up")
			tc.applied(t, f, n)
			calls := f.Calls()
			require.Len(t, calls, 1)
			require.True(t, calls[0].Lost)
			require.Zero(t, calls[0].Status, "no answer was sent")
		})
	}
}

func TestEndpointFaultsQueuePerEndpoint(t *testing.T) {
	f, _ := newFake(t)
	n := f.AddIssue(repo, "first", "")
	f.LoseAnswers(ghfake.EndpointCreateComment, 2, ghfake.LossBadGateway)
	f.FailEndpoint(ghfake.EndpointCreateComment, 1, ghfake.Fault{Status: http.StatusServiceUnavailable})
	require.Equal(t, 3, f.PendingFaults(ghfake.EndpointCreateComment))

	// Other requests do not use them.
	require.Equal(t, http.StatusOK, call(t, "GET", f.URL()+"repos/"+repo+"/issues/1/comments", "").status)
	require.Equal(t, http.StatusOK, call(t, "PATCH", f.URL()+"repos/"+repo+"/issues/1", `{"body":"x"}`).status)
	require.Equal(t, http.StatusCreated, call(t, "POST", f.URL()+"repos/"+repo+"/issues", `{"title":"x"}`).status)

	var got []int
	for range 4 {
		got = append(got, call(t, "POST", f.URL()+"repos/"+repo+"/issues/1/comments", `{"body":"c"}`).status)
	}
	require.Equal(t, []int{502, 502, 503, 201}, got)
	require.Equal(t, []string{"c", "c", "c"}, f.Comments(repo, n), "a fault without Apply applies nothing")

	// SetFault's function comes first.
	f.LoseAnswers(ghfake.EndpointCreateComment, 1, ghfake.LossBadGateway)
	f.FailNext(1, http.StatusInternalServerError, nil)
	require.Equal(t, 500, call(t, "POST", f.URL()+"repos/"+repo+"/issues/1/comments", `{"body":"d"}`).status)
	require.Equal(t, 1, f.PendingFaults(ghfake.EndpointCreateComment))
}

func TestEndpointOf(t *testing.T) {
	for _, tc := range []struct {
		method, path string
		want         ghfake.Endpoint
	}{
		{"POST", "/repos/a/b/issues", ghfake.EndpointCreateIssue},
		{"POST", "/api/v3/repos/a/b/issues", ghfake.EndpointCreateIssue},
		{"GET", "/repos/a/b/issues", ""},
		{"PATCH", "/repos/a/b/issues/7", ghfake.EndpointEditIssue},
		{"POST", "/repos/a/b/issues/7/comments", ghfake.EndpointCreateComment},
		{"GET", "/repos/a/b/issues/7/comments", ""},
		{"POST", "/graphql", ghfake.EndpointTransition},
		{"POST", "/api/graphql", ghfake.EndpointTransition},
		{"POST", "/repos/a/b/labels", ""},
	} {
		r, err := http.NewRequest(tc.method, "http://x"+tc.path, nil)
		require.NoError(t, err)
		require.Equal(t, tc.want, ghfake.EndpointOf(r), tc.method+" "+tc.path)
	}
}
