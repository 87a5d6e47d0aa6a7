package ghclient

import (
	"errors"
	"net/http"
	"strings"
)

// RejectBodyTooLong is RejectReason's reason for a body over GitHub's limit.
const RejectBodyTooLong = "body_too_long"

// BodyTooLong reports whether GitHub refused a write because a body is over
// its limit: a 422 (REST "body is too long (maximum is 65536
// characters)", or GraphQL's UNPROCESSABLE "Body is too long ..."). The
// write can succeed with a shorter body.
func BodyTooLong(err error) bool {
	var pe *PermanentError
	return errors.As(err, &pe) && pe.Status == http.StatusUnprocessableEntity &&
		strings.Contains(strings.ToLower(pe.Error()), "is too long")
}

// RejectReason names why a write failed for good, for the bridge's
// rejected-writes metric: RejectBodyTooLong, else the PermanentError's
// reason (validation_failed, not_found, forbidden, gone, bad_request,
// client_error, bad_response, invalid_repo, ...); "" for an error that is
// not permanent.
func RejectReason(err error) string {
	var pe *PermanentError
	switch {
	case !errors.As(err, &pe):
		return ""
	case BodyTooLong(err):
		return RejectBodyTooLong
	case pe.Reason != "":
		return pe.Reason
	default:
		return "other"
	}
}
