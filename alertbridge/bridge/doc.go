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
// The decisions are in package decide (what a transition does and where it
// goes, the storm guard, which listed issue the cache keeps, the roll-up's
// syncs) and the issue text in package render; this package holds the
// state and its locks, asks decide, has render write the text, and does the
// IO. Its files: bridge.go (Options, New, Run), server.go (the HTTP
// handlers), auth.go (webhook credentials), queue.go (the per-key queue),
// worker.go (the workers and their retries), transition.go (applying one
// journal entry to its issue), cache.go (the key→issue cache, rebuilt from
// GitHub at start and refreshed from it, holding only the open issues, those
// closed within the window and the ignored ones, and the storm guard's
// count; it closes issues filed twice at start),
// rollup.go (the storm guard's roll-up issues and their sync),
// rollupstate.go (their local files and restoring them at start),
// history.go (the nodes' operation history, read behind the one-method
// NodeOperations with a bounded wait; a failed read never stops an issue),
// metrics.go, and serve.go (Serve: the kubemedic-alertbridge process).
package bridge
