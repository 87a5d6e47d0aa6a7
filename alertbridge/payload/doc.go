// Package payload decodes Alertmanager's version-4 webhook payload.
//
// It never guesses: an unknown version, a missing receiver or an alert
// without a fingerprint or a known status is an error that names the field,
// so the webhook can answer 400 and nothing half-understood is queued.
package payload
