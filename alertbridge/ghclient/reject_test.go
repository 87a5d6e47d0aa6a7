package ghclient

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/google/go-github/v60/github"
	"github.com/stretchr/testify/assert"
)

func TestRejectReason(t *testing.T) {
	tooLong := &github.ErrorResponse{Response: &http.Response{StatusCode: 422}, Message: "Validation Failed",
		Errors: []github.Error{{Resource: "Issue", Field: "body", Code: "custom", Message: "body is too long (maximum is 65536 characters)"}}}
	tests := []struct {
		desc        string
		err         error
		want        string
		wantTooLong bool
	}{
		{desc: "REST body too long", err: fmt.Errorf("create: %w", &PermanentError{Status: 422, Reason: ReasonValidationFailed, Err: tooLong}),
			want: RejectBodyTooLong, wantTooLong: true},
		{desc: "GraphQL body too long", err: &PermanentError{Status: 422, Reason: ReasonValidationFailed,
			Err: &github.ErrorResponse{Response: &http.Response{StatusCode: 422}, Message: "GraphQL: UNPROCESSABLE: Body is too long (maximum is 65536 characters)"}},
			want: RejectBodyTooLong, wantTooLong: true},
		{desc: "another 422", err: &PermanentError{Status: 422, Reason: ReasonValidationFailed, Err: errors.New("Validation Failed: labels")}, want: ReasonValidationFailed},
		{desc: "a 404", err: &PermanentError{Status: 404, Reason: ReasonNotFound, Err: errors.New("Not Found")}, want: ReasonNotFound},
		{desc: "a 403 saying too long is no body limit", err: &PermanentError{Status: 403, Reason: ReasonForbidden, Err: errors.New("name is too long")}, want: ReasonForbidden},
		{desc: "a transient error is no rejection", err: errors.New("github issues.create: 502"), want: ""},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			assert.Equal(t, tc.want, RejectReason(tc.err))
			assert.Equal(t, tc.wantTooLong, BodyTooLong(tc.err))
		})
	}
}
