// Package ghfake is an in-process stand-in for the parts of GitHub's REST API
// that the alertbridge uses: issues, issue comments, labels, GitHub App
// installation tokens and (only so tests can prove it is never used) issue
// search. It serves real status codes, the JSON shapes go-github decodes, rate
// limit headers and Link pagination, under both "/" and GitHub Enterprise's
// "/api/v3/" prefix.
//
// Tests drive it like a person would (CloseIssue, AddLabel, SetTitle,
// AddComment), inject faults (SetFault, FailNext, FailWrites, SetRateLimit,
// and per write FailEndpoint and LoseAnswers, which carry a write out and
// then lose its answer to a proxy's 502 or to the client's timeout) and
// assert on what the client sent (Calls, CallCount). Human actions are not
// recorded as calls; every HTTP request is, faults included.
//
// It must never be more lenient than GitHub where the bridge could depend on
// it: unknown repositories are 404, missing titles and unknown state reasons
// are 422, a body over 65,536 characters or a title over 256 (counted in
// characters, not bytes) is 422 in GitHub's words (UNPROCESSABLE in
// GraphQL), counted by Rejected, and bad credentials are 401.
//
// Tests use it, and so does `kubemedic-demo` as its GitHub stand-in: Page
// (also served at PagePath, "/_page", on the Fake's own server, a path
// GitHub does not have) is a read-only web page that shows people the
// issues and comments the bridge wrote. It keeps everything in memory and
// talks to nothing else; it is never a client of the real GitHub.
package ghfake
