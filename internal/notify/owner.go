package notify

import (
	"fmt"
	"net/mail"
	"reflect"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Metadata keys that name who a pod belongs to.
const (
	// AnnotationOwner, on a pod (label or annotation) or on its namespace,
	// names the person to tell: an email or a Slack user ID. A label value
	// cannot hold '@', so as a label it can only be a user ID.
	AnnotationOwner = "kubemedic.io/owner"
	// AnnotationSlackChannel, on a namespace, is the channel (ID or name)
	// for messages about its pods when no person can be found or reached.
	AnnotationSlackChannel = "kubemedic.io/slack-channel"
	// AnnotationKubeflowOwner is set by Kubeflow's Profile controller on the
	// namespace of each profile: the profile owner's email
	// (Profile.spec.owner.name).
	AnnotationKubeflowOwner = "owner"
)

var (
	// slackUserID matches Slack user IDs: U… for workspace users, W… for
	// Enterprise Grid users.
	slackUserID = regexp.MustCompile(`^[UW][0-9A-Z]{6,20}$`)
	// slackChannelID matches conversation IDs: C… public, G… private, D… direct.
	slackChannelID = regexp.MustCompile(`^[CGD][0-9A-Z]{6,20}$`)
)

// ResolveOwner picks the recipient for messages about pod. Sources, first
// match wins for the person:
//
//  1. the pod's kubemedic.io/owner annotation, then its kubemedic.io/owner label;
//  2. the namespace's kubemedic.io/owner annotation, then its label;
//  3. the namespace's Kubeflow "owner" annotation (an email);
//
// and for the channel, used as the fallback when the person cannot be found
// on Slack or as the recipient when there is no person:
//
//  4. the namespace's kubemedic.io/slack-channel annotation;
//  5. defaultChannel.
//
// An owner value is an email (a bare address, no display name) or a Slack
// user ID; a channel value is a channel ID or name (a leading '#' is
// dropped). Values that are neither are skipped, and each skip is returned
// in problems (for an Event), as is a problem with a source that was
// consulted even though a later one answered. ok is false when neither a
// person nor a channel was found. namespace may be nil.
func ResolveOwner(pod, namespace metav1.Object, defaultChannel string) (r Recipient, problems []string, ok bool) {
	type source struct {
		obj  metav1.Object
		kind string // "pod" or "namespace"
		key  string
		from func(metav1.Object) map[string]string
		what string // "annotation" or "label"
	}
	annotations := func(o metav1.Object) map[string]string { return o.GetAnnotations() }
	labels := func(o metav1.Object) map[string]string { return o.GetLabels() }

	owners := []source{
		{pod, "pod", AnnotationOwner, annotations, "annotation"},
		{pod, "pod", AnnotationOwner, labels, "label"},
		{namespace, "namespace", AnnotationOwner, annotations, "annotation"},
		{namespace, "namespace", AnnotationOwner, labels, "label"},
		{namespace, "namespace", AnnotationKubeflowOwner, annotations, "annotation"},
	}
	for _, s := range owners {
		if isNil(s.obj) {
			continue
		}
		v, found := s.from(s.obj)[s.key]
		if !found {
			continue
		}
		where := fmt.Sprintf("%s %s %s", s.kind, s.what, s.key)
		if s.key == AnnotationKubeflowOwner {
			where += " (Kubeflow profile)"
		}
		v = strings.TrimSpace(v)
		switch {
		case slackUserID.MatchString(v):
			r.UserID, r.Source = v, where
		case isEmail(v):
			r.Email, r.Source = v, where
		default:
			problems = append(problems, fmt.Sprintf("%s %q is neither an email nor a Slack user ID", where, v))
			continue
		}
		break
	}

	channelSource := ""
	if !isNil(namespace) {
		if v, found := namespace.GetAnnotations()[AnnotationSlackChannel]; found {
			where := "namespace annotation " + AnnotationSlackChannel
			if ch, valid := normalizeChannel(v); valid {
				r.Channel, channelSource = ch, where
			} else {
				problems = append(problems, fmt.Sprintf("%s %q is not a Slack channel ID or name", where, v))
			}
		}
	}
	if r.Channel == "" && defaultChannel != "" {
		if ch, valid := normalizeChannel(defaultChannel); valid {
			r.Channel, channelSource = ch, "default channel"
		} else {
			problems = append(problems, fmt.Sprintf("default channel %q is not a Slack channel ID or name", defaultChannel))
		}
	}

	switch {
	case r.Source == "" && channelSource == "":
		return Recipient{}, problems, false
	case r.Source == "":
		r.Source = channelSource
	case channelSource != "":
		r.Source += "; channel from " + channelSource
	}
	return r, problems, true
}

// isEmail reports whether v is a bare email address.
func isEmail(v string) bool {
	a, err := mail.ParseAddress(v)
	return err == nil && a.Name == "" && a.Address == v
}

// normalizeChannel returns the channel ID or name in v without a leading
// '#', and whether it is one.
func normalizeChannel(v string) (string, bool) {
	v = strings.TrimPrefix(strings.TrimSpace(v), "#")
	if slackChannelID.MatchString(v) || isChannelName(v) {
		return v, true
	}
	return "", false
}

// isChannelName reports whether v can be a Slack channel name: at most 80
// characters, no upper case, no white space or punctuation other than '-'
// and '_'. Letters outside ASCII are allowed, as Slack allows them.
func isChannelName(v string) bool {
	if v == "" || utf8.RuneCountInString(v) > 80 {
		return false
	}
	for _, c := range v {
		switch {
		case c == '-' || c == '_':
		case unicode.IsUpper(c), unicode.IsSpace(c), unicode.IsPunct(c), unicode.IsSymbol(c), unicode.IsControl(c):
			return false
		}
	}
	return true
}

// isNil reports whether o is nil, including a typed nil pointer.
func isNil(o metav1.Object) bool {
	if o == nil {
		return true
	}
	v := reflect.ValueOf(o)
	return v.Kind() == reflect.Pointer && v.IsNil()
}
