package ghfake

import (
	"net/http"
	"strings"
	"time"
)

// Endpoint names one kind of write the bridge makes, for faults aimed at it
// (FailEndpoint, LoseAnswers).
type Endpoint string

// The writes the bridge makes.
const (
	// EndpointCreateIssue is POST /repos/{owner}/{repo}/issues.
	EndpointCreateIssue Endpoint = "create_issue"
	// EndpointEditIssue is PATCH /repos/{owner}/{repo}/issues/{number}.
	EndpointEditIssue Endpoint = "edit_issue"
	// EndpointCreateComment is POST /repos/{owner}/{repo}/issues/{number}/comments.
	EndpointCreateComment Endpoint = "create_comment"
	// EndpointTransition is POST /graphql (/api/graphql on GitHub
	// Enterprise): a transition's mutations.
	EndpointTransition Endpoint = "graphql_transition"
)

// Loss is how the answer to a write that GitHub carried out is lost.
type Loss int

const (
	// LossBadGateway is a proxy in front of GitHub answering 502 with its
	// own HTML page after GitHub applied the write.
	LossBadGateway Loss = iota + 1
	// LossTimeout is an answer held back until the client gives up: its
	// request times out (set a short ghclient RequestTimeout) or is
	// canceled. The client gets no answer at all.
	LossTimeout
)

// maxHold bounds how long a held answer waits for the client to give up.
const maxHold = time.Minute

const badGatewayPage = "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n" +
	"<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"

// LostAnswer is the Fault of a write that is carried out and whose answer is
// then lost as loss says.
func LostAnswer(loss Loss) Fault {
	switch loss {
	case LossTimeout:
		return Fault{Status: http.StatusGatewayTimeout, Apply: true, Hold: true}
	default:
		return Fault{Status: http.StatusBadGateway, Header: http.Header{"Content-Type": {"text/html"}},
			Body: badGatewayPage, Apply: true}
	}
}

// EndpointOf names the write r makes; "" for any other request.
func EndpointOf(r *http.Request) Endpoint {
	p := r.URL.Path
	if p == enterprisePrefix || strings.HasPrefix(p, enterprisePrefix+"/") {
		p = strings.TrimPrefix(p, enterprisePrefix)
	}
	return endpointOf(r.Method, p)
}

// endpointOf names the write of method on apiPath (prefix removed).
func endpointOf(method, apiPath string) Endpoint {
	if apiPath == "/graphql" || apiPath == "/api/graphql" {
		if method == http.MethodPost {
			return EndpointTransition
		}
		return ""
	}
	parts := strings.Split(strings.Trim(apiPath, "/"), "/")
	if len(parts) < 4 || parts[0] != "repos" || parts[3] != "issues" {
		return ""
	}
	switch {
	case len(parts) == 4 && method == http.MethodPost:
		return EndpointCreateIssue
	case len(parts) == 5 && method == http.MethodPatch:
		return EndpointEditIssue
	case len(parts) == 6 && parts[5] == "comments" && method == http.MethodPost:
		return EndpointCreateComment
	}
	return ""
}

// FailEndpoint answers the next n requests to ep with ft; calls add up, in
// order. These faults are kept apart from SetFault's function, which is
// consulted first: a request it answers does not use one of them.
func (f *Fake) FailEndpoint(ep Endpoint, n int, ft Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.endpointFaults == nil {
		f.endpointFaults = map[Endpoint][]Fault{}
	}
	for range n {
		c := ft
		c.Header = ft.Header.Clone()
		f.endpointFaults[ep] = append(f.endpointFaults[ep], c)
	}
}

// LoseAnswers carries out the next n requests to ep, writes included, and
// then loses their answers as loss says: FailEndpoint with LostAnswer(loss).
func (f *Fake) LoseAnswers(ep Endpoint, n int, loss Loss) {
	f.FailEndpoint(ep, n, LostAnswer(loss))
}

// PendingFaults counts the faults FailEndpoint and LoseAnswers queued for ep
// that no request has used yet.
func (f *Fake) PendingFaults(ep Endpoint) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.endpointFaults[ep])
}

// takeEndpointFault pops the next fault queued for the write of method on
// apiPath; f.mu is held.
func (f *Fake) takeEndpointFault(method, apiPath string) *Fault {
	ep := endpointOf(method, apiPath)
	q := f.endpointFaults[ep]
	if ep == "" || len(q) == 0 {
		return nil
	}
	ft := q[0]
	f.endpointFaults[ep] = q[1:]
	return &ft
}

// hold keeps a lost answer back until the client gives up, the Fake closes
// or maxHold passes.
func (f *Fake) hold(r *http.Request) {
	t := time.NewTimer(maxHold)
	defer t.Stop()
	select {
	case <-r.Context().Done():
	case <-f.closing:
	case <-t.C:
	}
}
