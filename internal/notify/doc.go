// Package notify is the one way kubemedic tells people something on Slack.
//
// The janitor (a notice before it reclaims an idle or expired GPU pod, then
// follow-ups in that message's thread) and the remediator (a message to the
// owner of a pod that a drain evicted) both post through the Notifier in this
// package, so that they find the same person, retry the same way, and build
// messages from the same Block Kit helpers.
//
// The package owns:
//
//   - the Slack transport (Slack, on Slack's Web API through slack-go), with
//     bounded retries: a rate limit waits for Slack's Retry-After, a 5xx or a
//     network error backs off exponentially, a permanent Slack error returns at
//     once (IsPermanent);
//   - owner resolution (ResolveOwner): pod and namespace metadata → Recipient,
//     a pure function;
//   - helpers that assemble Block Kit messages and escape user text (Section,
//     Fields, Context, Escape, ...). The wording belongs to the callers.
//
// What it must never do:
//
//   - log, wrap or return the Slack token: errors name the Slack method and
//     the recipient, never the credentials;
//   - block forever: every call is bounded by the caller's context, a
//     per-request timeout, MaxAttempts, and a ceiling on how long it will
//     wait for a Retry-After;
//   - decide anything about pods or nodes: it delivers a message or says why
//     it could not, and the caller decides what that means (a missing Slack
//     token is ErrNotConfigured, which callers treat like a failing Slack);
//   - guess a recipient: a value that is neither an email nor a Slack user ID
//     is skipped and reported, never "fixed up".
//
// Tests use the stand-in in notify/notifytest, which answers like Slack's
// Web API (errors, rate limits, auth) on a local slacktest server.
package notify
