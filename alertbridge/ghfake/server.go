package ghfake

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/kubemedic/kubemedic/alertbridge/ghclient"
)

// response is what a handler decided to answer; body is JSON-encoded.
type response struct {
	status int
	header http.Header
	body   any
}

func jsonResponse(status int, body any) *response {
	return &response{status: status, header: http.Header{}, body: body}
}

func errorResponse(status int, message, doc string) *response {
	return jsonResponse(status, map[string]any{"message": message, "documentation_url": doc})
}

func validationFailed(resource, code, field, doc string) *response {
	return jsonResponse(http.StatusUnprocessableEntity, map[string]any{
		"message":           "Validation Failed",
		"errors":            []map[string]string{{"resource": resource, "code": code, "field": field}},
		"documentation_url": doc,
	})
}

// validationFailedMessage is a 422 whose error carries GitHub's message, as
// for a field over its length limit.
func validationFailedMessage(resource, code, field, message, doc string) *response {
	return jsonResponse(http.StatusUnprocessableEntity, map[string]any{
		"message":           "Validation Failed",
		"errors":            []map[string]string{{"resource": resource, "code": code, "field": field, "message": message}},
		"documentation_url": doc,
	})
}

func notFound() *response { return errorResponse(http.StatusNotFound, "Not Found", docNotFound) }

// GitHub's limits on what a write carries, in characters (runes, as
// GitHub counts them, not bytes).
const (
	// MaxBodyChars bounds an issue's or a comment's body.
	MaxBodyChars = 65536
	// MaxTitleChars bounds an issue's title.
	MaxTitleChars = 256
)

// Reasons Rejected counts refused writes under.
const (
	// RejectBodyTooLong is an issue or comment body over MaxBodyChars.
	RejectBodyTooLong = "body_too_long"
	// RejectTitleTooLong is a title over MaxTitleChars.
	RejectTitleTooLong = "title_too_long"
	// RejectValidation is any other write GitHub refuses as invalid (422
	// or GraphQL UNPROCESSABLE): a missing title or body, a bad state.
	RejectValidation = "validation_failed"
)

func tooLong(s string, limit int) bool {
	return len(s) > limit && utf8.RuneCountInString(s) > limit
}

// bodyTooLong is GitHub's REST answer to an issue body over the limit.
func bodyTooLong(doc string) *response {
	return validationFailedMessage("Issue", "custom", "body",
		fmt.Sprintf("body is too long (maximum is %d characters)", MaxBodyChars), doc)
}

// commentTooLong is GitHub's REST answer to a comment over the limit: it
// words it unlike the issue's (field "data", capitalised).
func commentTooLong() *response {
	return validationFailedMessage("IssueComment", "unprocessable", "data",
		fmt.Sprintf("Body is too long (maximum is %d characters)", MaxBodyChars), docCreateComment)
}

func titleTooLong(doc string) *response {
	return validationFailedMessage("Issue", "custom", "title",
		fmt.Sprintf("title is too long (maximum is %d characters)", MaxTitleChars), doc)
}

// reject counts a refused write under reason and returns its answer; f.mu
// is held.
func (f *Fake) reject(reason string, resp *response) *response {
	if f.rejected == nil {
		f.rejected = map[string]int{}
	}
	f.rejected[reason]++
	return resp
}

func (f *Fake) serveHTTP(w http.ResponseWriter, r *http.Request) {
	body := readBody(r)
	r.Body = io.NopCloser(bytes.NewReader(body))
	apiPath := r.URL.Path
	prefix := ""
	if apiPath == enterprisePrefix || strings.HasPrefix(apiPath, enterprisePrefix+"/") {
		prefix = enterprisePrefix
		apiPath = strings.TrimPrefix(apiPath, enterprisePrefix)
	}

	// The fault function runs without the lock: it may call the Fake.
	f.mu.Lock()
	faultFn := f.fault
	f.mu.Unlock()
	var ft *Fault
	if faultFn != nil {
		ft = faultFn(r)
	}

	f.mu.Lock()
	if ft == nil {
		ft = f.takeEndpointFault(r.Method, apiPath)
	}
	var resp *response
	if ft != nil && !ft.Apply {
		resp = faultResponse(ft)
	}
	now := f.clock.Now()
	consume := resp == nil
	rateHeader, limited := f.rateHeaders(now, consume && !strings.HasPrefix(apiPath, "/app/"))
	if resp == nil {
		resp = f.handle(r, apiPath, prefix, body, now, limited)
	}
	lost := ft != nil && ft.Apply
	held := lost && ft.Hold
	if lost {
		// Carried out; the client is answered the fault instead.
		resp = faultResponse(ft)
	}
	for k, v := range rateHeader {
		if _, ok := resp.header[k]; !ok {
			resp.header[k] = v
		}
	}
	status := resp.status
	if held {
		status = 0
	}
	f.calls = append(f.calls, Call{
		Method: r.Method, Path: apiPath, RawPath: r.URL.Path, Query: r.URL.RawQuery,
		Header: r.Header.Clone(), Body: body, Status: status, Time: now, Lost: lost,
	})
	requestID := fmt.Sprintf("FAKE:%06X:%04X", len(f.calls), f.nextID)
	f.mu.Unlock()
	if held {
		f.hold(r)
	}

	h := w.Header()
	for k, v := range resp.header {
		h[k] = v
	}
	h.Set("X-GitHub-Request-Id", requestID)
	h.Set("X-GitHub-Media-Type", "github.v3; format=json")
	var out []byte
	switch b := resp.body.(type) {
	case nil:
	case []byte:
		out = b
	default:
		out, _ = json.Marshal(b)
	}
	if h.Get("Content-Type") == "" && len(out) > 0 {
		h.Set("Content-Type", "application/json; charset=utf-8")
	}
	w.WriteHeader(resp.status)
	_, _ = w.Write(out)
}

func faultResponse(ft *Fault) *response {
	resp := &response{status: ft.Status, header: ft.Header.Clone()}
	if resp.header == nil {
		resp.header = http.Header{}
	}
	if ft.Body != "" {
		resp.body = []byte(ft.Body)
	} else {
		resp.body = map[string]string{"message": http.StatusText(ft.Status)}
	}
	return resp
}

// rateHeaders returns the X-RateLimit-* headers, refilling the budget when
// its reset has passed. When consume is set the request is counted, and
// limited reports that the budget was already spent.
func (f *Fake) rateHeaders(now time.Time, consume bool) (http.Header, bool) {
	if f.rate.reset.IsZero() {
		f.rate.reset = now.Add(time.Hour)
	} else if !now.Before(f.rate.reset) {
		f.rate.remaining = f.rate.limit
		f.rate.reset = now.Add(time.Hour)
	}
	limited := false
	if consume {
		if f.rate.remaining <= 0 {
			limited = true
		} else {
			f.rate.remaining--
		}
	}
	h := http.Header{}
	h.Set("X-RateLimit-Limit", strconv.Itoa(f.rate.limit))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(f.rate.remaining))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(f.rate.reset.Unix(), 10))
	h.Set("X-RateLimit-Used", strconv.Itoa(f.rate.limit-f.rate.remaining))
	h.Set("X-RateLimit-Resource", "core")
	return h, limited
}

// handle answers one request; f.mu is held.
func (f *Fake) handle(r *http.Request, apiPath, prefix string, body []byte, now time.Time, limited bool) *response {
	parts := strings.Split(strings.Trim(apiPath, "/"), "/")
	if len(parts) == 4 && parts[0] == "app" && parts[1] == "installations" && parts[3] == "access_tokens" && r.Method == http.MethodPost {
		return f.accessToken(r, now)
	}
	if f.token != "" && !authorized(r.Header.Get("Authorization"), f.token) {
		return errorResponse(http.StatusUnauthorized, "Bad credentials", docBadCredentials)
	}
	if limited {
		return errorResponse(http.StatusForbidden, "API rate limit exceeded for installation ID 1.", docPrimaryRateLimit)
	}
	if len(parts) == 2 && parts[0] == "search" && parts[1] == "issues" && r.Method == http.MethodGet {
		return jsonResponse(http.StatusOK, map[string]any{"total_count": 0, "incomplete_results": false, "items": []any{}})
	}
	if apiPath == "/graphql" || apiPath == "/api/graphql" {
		return f.graphql(r, prefix, body, now)
	}
	if len(parts) < 4 || parts[0] != "repos" {
		return notFound()
	}
	rp, ok := f.repos[parts[1]+"/"+parts[2]]
	if !ok {
		return notFound()
	}
	u := urls{api: "http://" + r.Host + prefix, html: "http://" + r.Host}
	rest := parts[3:]
	switch {
	case len(rest) == 1 && rest[0] == "issues":
		switch r.Method {
		case http.MethodGet:
			return f.listIssues(r, rp, u, now)
		case http.MethodPost:
			return f.createIssue(rp, u, body, now)
		}
	case len(rest) == 2 && rest[0] == "issues":
		iss := issueByNumber(rp, rest[1])
		if iss == nil {
			return notFound()
		}
		switch r.Method {
		case http.MethodGet:
			return jsonResponse(http.StatusOK, issueJSON(rp, iss, u))
		case http.MethodPatch:
			return f.editIssue(rp, iss, u, body, now)
		}
	case len(rest) == 3 && rest[0] == "issues" && rest[2] == "comments":
		iss := issueByNumber(rp, rest[1])
		if iss == nil {
			return notFound()
		}
		switch r.Method {
		case http.MethodGet:
			return listComments(r, rp, iss, u)
		case http.MethodPost:
			return f.createComment(rp, iss, u, body)
		}
	case len(rest) == 1 && rest[0] == "labels":
		switch r.Method {
		case http.MethodGet:
			return listLabels(r, rp, u)
		case http.MethodPost:
			return f.createLabel(rp, u, body)
		}
	}
	return notFound()
}

func authorized(header, token string) bool {
	return header == "token "+token || header == "Bearer "+token
}

// accessToken hands a GitHub App an installation token. It checks only that
// a JWT-shaped bearer credential was sent.
func (f *Fake) accessToken(r *http.Request, now time.Time) *response {
	jwt, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || strings.Count(jwt, ".") != 2 {
		return errorResponse(http.StatusUnauthorized, "A JSON web token could not be decoded", docBadCredentials)
	}
	tok := f.token
	if tok == "" {
		tok = "ghs_fakeinstallationtoken"
	}
	return jsonResponse(http.StatusCreated, map[string]any{
		"token":                tok,
		"expires_at":           now.Add(time.Hour).UTC().Format(time.RFC3339),
		"permissions":          map[string]string{"issues": "write", "metadata": "read"},
		"repository_selection": "all",
	})
}

func issueByNumber(rp *repo, s string) *issue {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > len(rp.issues) {
		return nil
	}
	return rp.issues[n-1]
}

// urls are the bases for the url fields: api with the Enterprise prefix when
// the request used it, html never.
type urls struct{ api, html string }

func timeOrNil(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format(time.RFC3339)
}

func stringOrNil(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func userJSON(login string) map[string]any {
	return map[string]any{"login": login, "id": len(login), "node_id": "U_" + login, "type": "User", "site_admin": false}
}

func labelJSON(rp *repo, l *label, u urls) map[string]any {
	return map[string]any{
		"id": l.id, "node_id": nodeID("LA_kwDO", l.id), "name": l.name, "color": l.color,
		"description": stringOrNil(l.description), "default": false,
		"url": u.api + "/repos/" + rp.fullName + "/labels/" + url.PathEscape(l.name),
	}
}

func issueJSON(rp *repo, iss *issue, u urls) map[string]any {
	apiURL := fmt.Sprintf("%s/repos/%s/issues/%d", u.api, rp.fullName, iss.number)
	labels := []any{}
	for _, name := range iss.labels {
		if l := rp.label(name); l != nil {
			labels = append(labels, labelJSON(rp, l, u))
		}
	}
	assignees := []any{}
	for _, a := range iss.assignees {
		assignees = append(assignees, userJSON(a))
	}
	var assignee any
	if len(iss.assignees) > 0 {
		assignee = userJSON(iss.assignees[0])
	}
	kind := "issues"
	if iss.pullRequest {
		kind = "pull"
	}
	m := map[string]any{
		"id": iss.id, "node_id": nodeID("I_kwDO", iss.id), "number": iss.number,
		"url": apiURL, "repository_url": u.api + "/repos/" + rp.fullName,
		"labels_url": apiURL + "/labels{/name}", "comments_url": apiURL + "/comments",
		"events_url": apiURL + "/events",
		"html_url":   fmt.Sprintf("%s/%s/%s/%d", u.html, rp.fullName, kind, iss.number),
		"title":      iss.title, "body": stringOrNil(iss.body), "user": userJSON(iss.user),
		"labels": labels, "assignee": assignee, "assignees": assignees,
		"state": iss.state, "state_reason": stringOrNil(string(iss.stateReason)),
		"locked": false, "milestone": nil, "comments": len(iss.comments),
		"created_at": timeOrNil(iss.createdAt), "updated_at": timeOrNil(iss.updatedAt),
		"closed_at": timeOrNil(iss.closedAt), "author_association": "NONE",
	}
	if iss.pullRequest {
		m["pull_request"] = map[string]any{
			"url":      fmt.Sprintf("%s/repos/%s/pulls/%d", u.api, rp.fullName, iss.number),
			"html_url": m["html_url"],
		}
	}
	return m
}

func commentJSON(rp *repo, iss *issue, c *comment, u urls) map[string]any {
	return map[string]any{
		"id": c.id, "node_id": nodeID("IC_kwDO", c.id),
		"url":       fmt.Sprintf("%s/repos/%s/issues/comments/%d", u.api, rp.fullName, c.id),
		"html_url":  fmt.Sprintf("%s/%s/issues/%d#issuecomment-%d", u.html, rp.fullName, iss.number, c.id),
		"issue_url": fmt.Sprintf("%s/repos/%s/issues/%d", u.api, rp.fullName, iss.number),
		"body":      c.body, "user": userJSON(c.user),
		"created_at": timeOrNil(c.createdAt), "updated_at": timeOrNil(c.updatedAt),
		"author_association": "NONE",
	}
}

// page reads per_page (default 30, at most 100) and page (default 1).
func page(q url.Values) (perPage, pageNum int) {
	perPage, pageNum = 30, 1
	if v, err := strconv.Atoi(q.Get("per_page")); err == nil && v > 0 {
		perPage = min(v, 100)
	}
	if v, err := strconv.Atoi(q.Get("page")); err == nil && v > 0 {
		pageNum = v
	}
	return perPage, pageNum
}

// paginate cuts one page out of n items and sets the Link header the way
// GitHub does: next and last unless on the last page, first and prev unless
// on the first.
func paginate(r *http.Request, resp *response, n int) (lo, hi int) {
	perPage, pageNum := page(r.URL.Query())
	last := max(1, (n+perPage-1)/perPage)
	link := func(p int, rel string) string {
		q := r.URL.Query()
		q.Set("page", strconv.Itoa(p))
		return fmt.Sprintf(`<http://%s%s?%s>; rel="%s"`, r.Host, r.URL.Path, q.Encode(), rel)
	}
	var links []string
	if pageNum > 1 {
		links = append(links, link(pageNum-1, "prev"))
	}
	if pageNum < last {
		links = append(links, link(pageNum+1, "next"), link(last, "last"))
	}
	if pageNum > 1 {
		links = append(links, link(1, "first"))
	}
	if len(links) > 0 {
		resp.header.Set("Link", strings.Join(links, ", "))
	}
	lo = min(n, (pageNum-1)*perPage)
	hi = min(n, lo+perPage)
	return lo, hi
}

func parseSince(q url.Values) (time.Time, bool) {
	s := q.Get("since")
	if s == "" {
		return time.Time{}, true
	}
	t, err := time.Parse(time.RFC3339, s)
	return t, err == nil
}

func (f *Fake) listIssues(r *http.Request, rp *repo, u urls, _ time.Time) *response {
	q := r.URL.Query()
	state := ghclient.IssueState(q.Get("state"))
	if state == "" {
		state = ghclient.StateOpen
	}
	if !state.Valid() && state != ghclient.StateAll {
		return validationFailed("Issue", "invalid", "state", docListIssues)
	}
	since, ok := parseSince(q)
	if !ok {
		return validationFailed("Issue", "invalid", "since", docListIssues)
	}
	var want []string
	for _, l := range strings.Split(q.Get("labels"), ",") {
		if l = strings.TrimSpace(l); l != "" {
			want = append(want, l)
		}
	}
	var match []*issue
	for _, iss := range rp.issues {
		if state != ghclient.StateAll && iss.state != state {
			continue
		}
		if iss.updatedAt.Before(since) {
			continue
		}
		if !slices.ContainsFunc(want, func(l string) bool { return !containsFold(iss.labels, l) }) {
			match = append(match, iss)
		}
	}
	cmp := func(a, b *issue) int { return a.createdAt.Compare(b.createdAt) }
	switch q.Get("sort") {
	case "updated":
		cmp = func(a, b *issue) int { return a.updatedAt.Compare(b.updatedAt) }
	case "comments":
		cmp = func(a, b *issue) int { return len(a.comments) - len(b.comments) }
	}
	desc := q.Get("direction") != "asc"
	slices.SortStableFunc(match, func(a, b *issue) int {
		c := cmp(a, b)
		if c == 0 {
			c = a.number - b.number
		}
		if desc {
			return -c
		}
		return c
	})
	resp := jsonResponse(http.StatusOK, nil)
	lo, hi := paginate(r, resp, len(match))
	out := []any{}
	for _, iss := range match[lo:hi] {
		out = append(out, issueJSON(rp, iss, u))
	}
	resp.body = out
	return resp
}

type issueCreate struct {
	Title     *string  `json:"title"`
	Body      *string  `json:"body"`
	Labels    []string `json:"labels"`
	Assignees []string `json:"assignees"`
	Assignee  *string  `json:"assignee"`
}

func problemsParsingJSON() *response {
	return errorResponse(http.StatusBadRequest, "Problems parsing JSON", "https://docs.github.com/rest")
}

func (f *Fake) createIssue(rp *repo, u urls, body []byte, now time.Time) *response {
	var in issueCreate
	if err := json.Unmarshal(body, &in); err != nil {
		return problemsParsingJSON()
	}
	if in.Title == nil || strings.TrimSpace(*in.Title) == "" {
		return f.reject(RejectValidation, validationFailed("Issue", "missing_field", "title", docCreateIssue))
	}
	if tooLong(*in.Title, MaxTitleChars) {
		return f.reject(RejectTitleTooLong, titleTooLong(docCreateIssue))
	}
	if in.Body != nil && tooLong(*in.Body, MaxBodyChars) {
		return f.reject(RejectBodyTooLong, bodyTooLong(docCreateIssue))
	}
	now = now.UTC().Truncate(time.Second)
	iss := &issue{
		id: f.newID(), number: rp.nextNumber, title: *in.Title, state: ghclient.StateOpen,
		labels: f.ensureLabels(rp, in.Labels), assignees: slices.Clone(in.Assignees),
		user: "kubemedic[bot]", createdAt: now, updatedAt: now,
	}
	if in.Body != nil {
		iss.body = *in.Body
	}
	if in.Assignee != nil && *in.Assignee != "" && !slices.Contains(iss.assignees, *in.Assignee) {
		iss.assignees = append(iss.assignees, *in.Assignee)
	}
	rp.nextNumber++
	rp.issues = append(rp.issues, iss)
	resp := jsonResponse(http.StatusCreated, issueJSON(rp, iss, u))
	resp.header.Set("Location", fmt.Sprintf("%s/repos/%s/issues/%d", u.api, rp.fullName, iss.number))
	return resp
}

func (f *Fake) editIssue(rp *repo, iss *issue, u urls, body []byte, now time.Time) *response {
	var in map[string]json.RawMessage
	if err := json.Unmarshal(body, &in); err != nil {
		return problemsParsingJSON()
	}
	str := func(key string) (val string, null, present, ok bool) {
		raw, present := in[key]
		if !present {
			return "", false, false, true
		}
		if string(raw) == "null" {
			return "", true, true, true
		}
		err := json.Unmarshal(raw, &val)
		return val, false, true, err == nil
	}
	list := func(key string) ([]string, bool, bool) {
		raw, present := in[key]
		if !present {
			return nil, false, true
		}
		var v []string
		if string(raw) == "null" {
			return nil, true, true
		}
		err := json.Unmarshal(raw, &v)
		return v, true, err == nil
	}
	title, titleNull, hasTitle, ok1 := str("title")
	bodyText, _, hasBody, ok2 := str("body")
	rawState, _, hasState, ok3 := str("state")
	rawReason, reasonNull, hasReason, ok4 := str("state_reason")
	state, reason := ghclient.IssueState(rawState), ghclient.StateReason(rawReason)
	labels, hasLabels, ok5 := list("labels")
	assignees, hasAssignees, ok6 := list("assignees")
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 {
		return problemsParsingJSON()
	}
	if hasTitle && (titleNull || strings.TrimSpace(title) == "") {
		return f.reject(RejectValidation, validationFailed("Issue", "missing_field", "title", docUpdateIssue))
	}
	if hasTitle && tooLong(title, MaxTitleChars) {
		return f.reject(RejectTitleTooLong, titleTooLong(docUpdateIssue))
	}
	if hasBody && tooLong(bodyText, MaxBodyChars) {
		return f.reject(RejectBodyTooLong, bodyTooLong(docUpdateIssue))
	}
	if hasState && !state.Valid() {
		return f.reject(RejectValidation, validationFailed("Issue", "invalid", "state", docUpdateIssue))
	}
	if hasReason && !reasonNull && !reason.Valid() {
		return f.reject(RejectValidation, validationFailed("Issue", "invalid", "state_reason", docUpdateIssue))
	}

	now = now.UTC().Truncate(time.Second)
	if hasTitle {
		iss.title = title
	}
	if hasBody {
		iss.body = bodyText
	}
	if hasLabels {
		iss.labels = f.ensureLabels(rp, labels)
	}
	if hasAssignees {
		iss.assignees = slices.Clone(assignees)
	}
	switch {
	case hasState && state == ghclient.StateClosed && iss.state == ghclient.StateOpen:
		iss.state, iss.closedAt, iss.stateReason = ghclient.StateClosed, now, ghclient.ReasonCompleted
		if hasReason && !reasonNull && reason != ghclient.ReasonReopened {
			iss.stateReason = reason
		}
	case hasState && state == ghclient.StateOpen && iss.state == ghclient.StateClosed:
		iss.state, iss.closedAt, iss.stateReason = ghclient.StateOpen, time.Time{}, ghclient.ReasonReopened
	case hasReason && !reasonNull && iss.state == ghclient.StateClosed && reason != ghclient.ReasonReopened:
		iss.stateReason = reason
	}
	iss.updatedAt = now
	return jsonResponse(http.StatusOK, issueJSON(rp, iss, u))
}

func listComments(r *http.Request, rp *repo, iss *issue, u urls) *response {
	since, ok := parseSince(r.URL.Query())
	if !ok {
		return validationFailed("IssueComment", "invalid", "since", docCreateComment)
	}
	var match []*comment
	for _, c := range iss.comments {
		if !c.updatedAt.Before(since) {
			match = append(match, c)
		}
	}
	resp := jsonResponse(http.StatusOK, nil)
	lo, hi := paginate(r, resp, len(match))
	out := []any{}
	for _, c := range match[lo:hi] {
		out = append(out, commentJSON(rp, iss, c, u))
	}
	resp.body = out
	return resp
}

func (f *Fake) createComment(rp *repo, iss *issue, u urls, body []byte) *response {
	var in struct {
		Body *string `json:"body"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return problemsParsingJSON()
	}
	if in.Body == nil || *in.Body == "" {
		return f.reject(RejectValidation, validationFailed("IssueComment", "missing_field", "body", docCreateComment))
	}
	if tooLong(*in.Body, MaxBodyChars) {
		return f.reject(RejectBodyTooLong, commentTooLong())
	}
	c := f.addComment(iss, "kubemedic[bot]", *in.Body)
	resp := jsonResponse(http.StatusCreated, commentJSON(rp, iss, c, u))
	resp.header.Set("Location", fmt.Sprintf("%s/repos/%s/issues/comments/%d", u.api, rp.fullName, c.id))
	return resp
}

func listLabels(r *http.Request, rp *repo, u urls) *response {
	resp := jsonResponse(http.StatusOK, nil)
	lo, hi := paginate(r, resp, len(rp.labels))
	out := []any{}
	for _, l := range rp.labels[lo:hi] {
		out = append(out, labelJSON(rp, l, u))
	}
	resp.body = out
	return resp
}

func (f *Fake) createLabel(rp *repo, u urls, body []byte) *response {
	var in struct {
		Name        string `json:"name"`
		Color       string `json:"color"`
		Description string `json:"description"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return problemsParsingJSON()
	}
	if in.Name == "" {
		return validationFailed("Label", "missing_field", "name", docCreateLabel)
	}
	if rp.label(in.Name) != nil {
		return validationFailed("Label", "already_exists", "name", docCreateLabel)
	}
	if in.Color == "" {
		in.Color = "ededed"
	}
	l := &label{id: f.newID(), name: in.Name, color: strings.TrimPrefix(in.Color, "#"), description: in.Description}
	rp.labels = append(rp.labels, l)
	return jsonResponse(http.StatusCreated, labelJSON(rp, l, u))
}
