// Package ghclient is the alertbridge's only way to GitHub: it lists, files,
// edits and comments on issues through go-github, behind one retry loop whose
// decisions come from the pure function Classify, and it counts every HTTP
// attempt in Prometheus.
//
// What must hold:
//
//   - It never calls the Search API: issues are found through the issues list
//     endpoint filtered by label, which is consistent right after a write
//     where search is not.
//   - An edit never sends assignees, and sends a title or labels only when
//     the caller says so (the bridge, as decide.Follow allows: a title it
//     set that nobody changed, labels it rendered): people own them once the
//     issue exists, and the bridge must not undo their triage.
//   - It never logs a token or a private key, and no error it returns
//     contains one.
//   - It never retries a permanent 4xx (bad repository, validation error, a
//     403 that is not a rate limit): those return a *PermanentError at once.
//     Everything that can heal (5xx, 409, 401 while credentials rotate,
//     network errors, rate limits) is retried until it does or the caller's
//     context ends, in which case the context's error is returned and the
//     caller keeps its work queued.
//   - A write that is not idempotent (a create, a comment, a transition's
//     comment) is never sent again while it may already have happened:
//     after an answer that may have been lost (a 5xx, a 408, a timeout or a
//     network error once the request was sent) the comments are
//     looked through for it, or the caller's NewIssue.Find for the issue,
//     before the retry. Edits of body and state are idempotent and are
//     simply sent again.
//   - Rate limits are waited out as GitHub asks (Retry-After, then
//     X-RateLimit-Reset), and while one is being waited out no other call
//     from the same Client is sent.
//
// NewDryRun wraps reads and logs the writes it would send, exact JSON
// included, without sending them. NewHTTPClient builds the authenticated
// transport from a token file (re-read when Kubernetes rotates it) or a
// GitHub App installation.
package ghclient
