// Package bridge is the alertbridge server: it takes Alertmanager webhooks,
// records each one durably in the journal before answering 2xx, and applies
// the transitions to GitHub issues in order per dedupe key.
//
// What it must never do: acknowledge a webhook that is not on disk; run two
// transitions of one key at once; find issues through GitHub's search API;
// overwrite the title, labels or assignees people changed; reopen an issue a
// human closed as not planned or marked with the ignore label; retry a
// permanent GitHub error forever; log a credential.
//
// The decisions are in package decide; this package holds the moving parts:
// the HTTP server and its authentication, the per-key queue and workers, the
// key→issue cache (rebuilt from GitHub at start and refreshed from it), the
// storm guard's roll-up issues, and the metrics.
package bridge
