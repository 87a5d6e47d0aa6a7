// Package alertbridge receives Alertmanager webhooks and files, comments on,
// closes and reopens GitHub issues for on-call SREs: no duplicates, nothing
// lost across restarts, nothing noisy. It must never acknowledge a webhook
// before the transition is durably recorded, never use GitHub's search API to
// find issues, and never log a token.
package alertbridge
