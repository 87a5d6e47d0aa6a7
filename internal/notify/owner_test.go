package notify

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestResolveOwner(t *testing.T) {
	type meta struct{ labels, annotations map[string]string }
	tests := []struct {
		desc           string
		pod, ns        meta
		nilNamespace   bool
		defaultChannel string
		want           Recipient
		wantProblems   int
		wantOK         bool
	}{
		{
			desc:   "pod annotation email",
			pod:    meta{annotations: map[string]string{AnnotationOwner: "alice@example.com"}},
			want:   Recipient{Email: "alice@example.com", Source: "pod annotation kubemedic.io/owner"},
			wantOK: true,
		},
		{
			desc:   "pod label user ID",
			pod:    meta{labels: map[string]string{AnnotationOwner: "U0123ABCD"}},
			want:   Recipient{UserID: "U0123ABCD", Source: "pod label kubemedic.io/owner"},
			wantOK: true,
		},
		{
			desc:   "Enterprise Grid user ID in a pod annotation",
			pod:    meta{annotations: map[string]string{AnnotationOwner: "W0123ABCDEF"}},
			want:   Recipient{UserID: "W0123ABCDEF", Source: "pod annotation kubemedic.io/owner"},
			wantOK: true,
		},
		{
			desc: "pod annotation wins over pod label and namespace",
			pod: meta{
				labels:      map[string]string{AnnotationOwner: "U0123ABCD"},
				annotations: map[string]string{AnnotationOwner: "alice@example.com"},
			},
			ns:     meta{annotations: map[string]string{AnnotationOwner: "bob@example.com"}},
			want:   Recipient{Email: "alice@example.com", Source: "pod annotation kubemedic.io/owner"},
			wantOK: true,
		},
		{
			desc: "invalid pod annotation is skipped for the pod label",
			pod: meta{
				labels:      map[string]string{AnnotationOwner: "U0123ABCD"},
				annotations: map[string]string{AnnotationOwner: "alice"},
			},
			want:         Recipient{UserID: "U0123ABCD", Source: "pod label kubemedic.io/owner"},
			wantProblems: 1,
			wantOK:       true,
		},
		{
			desc:         "invalid pod label is skipped for the namespace",
			pod:          meta{labels: map[string]string{AnnotationOwner: "alice"}},
			ns:           meta{annotations: map[string]string{AnnotationOwner: "bob@example.com"}},
			want:         Recipient{Email: "bob@example.com", Source: "namespace annotation kubemedic.io/owner"},
			wantProblems: 1,
			wantOK:       true,
		},
		{
			desc:   "namespace annotation wins over namespace label and Kubeflow",
			ns:     meta{labels: map[string]string{AnnotationOwner: "U0123ABCD"}, annotations: map[string]string{AnnotationOwner: "bob@example.com", AnnotationKubeflowOwner: "carol@example.com"}},
			want:   Recipient{Email: "bob@example.com", Source: "namespace annotation kubemedic.io/owner"},
			wantOK: true,
		},
		{
			desc:   "namespace label",
			ns:     meta{labels: map[string]string{AnnotationOwner: "U0123ABCD"}, annotations: map[string]string{AnnotationKubeflowOwner: "carol@example.com"}},
			want:   Recipient{UserID: "U0123ABCD", Source: "namespace label kubemedic.io/owner"},
			wantOK: true,
		},
		{
			desc:   "Kubeflow profile owner",
			ns:     meta{annotations: map[string]string{AnnotationKubeflowOwner: "carol@example.com"}},
			want:   Recipient{Email: "carol@example.com", Source: "namespace annotation owner (Kubeflow profile)"},
			wantOK: true,
		},
		{
			desc:   "an owner label on the namespace is not Kubeflow's",
			ns:     meta{labels: map[string]string{AnnotationKubeflowOwner: "U0123ABCD"}},
			wantOK: false,
		},
		{
			desc:           "invalid Kubeflow owner falls to the namespace channel",
			ns:             meta{annotations: map[string]string{AnnotationKubeflowOwner: "carol", AnnotationSlackChannel: "#gpu-team"}},
			defaultChannel: "gpu-users",
			want:           Recipient{Channel: "gpu-team", Source: "namespace annotation kubemedic.io/slack-channel"},
			wantProblems:   1,
			wantOK:         true,
		},
		{
			desc:           "person with the namespace channel as fallback",
			pod:            meta{annotations: map[string]string{AnnotationOwner: "alice@example.com"}},
			ns:             meta{annotations: map[string]string{AnnotationSlackChannel: "C0123ABCD"}},
			defaultChannel: "gpu-users",
			want:           Recipient{Email: "alice@example.com", Channel: "C0123ABCD", Source: "pod annotation kubemedic.io/owner; channel from namespace annotation kubemedic.io/slack-channel"},
			wantOK:         true,
		},
		{
			desc:           "person with the default channel as fallback",
			pod:            meta{annotations: map[string]string{AnnotationOwner: "alice@example.com"}},
			defaultChannel: "#gpu-users",
			want:           Recipient{Email: "alice@example.com", Channel: "gpu-users", Source: "pod annotation kubemedic.io/owner; channel from default channel"},
			wantOK:         true,
		},
		{
			desc:           "default channel only",
			defaultChannel: "gpu-users",
			want:           Recipient{Channel: "gpu-users", Source: "default channel"},
			wantOK:         true,
		},
		{
			desc:           "invalid namespace channel falls to the default",
			ns:             meta{annotations: map[string]string{AnnotationSlackChannel: "GPU Team!"}},
			defaultChannel: "gpu-users",
			want:           Recipient{Channel: "gpu-users", Source: "default channel"},
			wantProblems:   1,
			wantOK:         true,
		},
		{
			desc:           "non-ASCII channel names are Slack's too",
			defaultChannel: "gpuユーザー",
			want:           Recipient{Channel: "gpuユーザー", Source: "default channel"},
			wantOK:         true,
		},
		{
			desc:           "nothing valid at all",
			pod:            meta{annotations: map[string]string{AnnotationOwner: "Alice <alice@example.com>"}},
			defaultChannel: "not a channel",
			wantProblems:   2,
			wantOK:         false,
		},
		{
			desc:   "nothing at all",
			wantOK: false,
		},
		{
			desc:   "space around an email is trimmed",
			pod:    meta{annotations: map[string]string{AnnotationOwner: " alice@example.com\n"}},
			want:   Recipient{Email: "alice@example.com", Source: "pod annotation kubemedic.io/owner"},
			wantOK: true,
		},
		{
			desc:         "a lower-case user ID is not one",
			pod:          meta{annotations: map[string]string{AnnotationOwner: "u0123abcd"}},
			wantProblems: 1,
			wantOK:       false,
		},
		{
			desc:           "no namespace object",
			nilNamespace:   true,
			pod:            meta{labels: map[string]string{AnnotationOwner: "U0123ABCD"}},
			defaultChannel: "gpu-users",
			want:           Recipient{UserID: "U0123ABCD", Channel: "gpu-users", Source: "pod label kubemedic.io/owner; channel from default channel"},
			wantOK:         true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "train-0", Namespace: "team-a", Labels: tc.pod.labels, Annotations: tc.pod.annotations}}
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: tc.ns.labels, Annotations: tc.ns.annotations}}
			var nsObj metav1.Object = ns
			if tc.nilNamespace {
				nsObj = (*corev1.Namespace)(nil)
			}
			got, problems, ok := ResolveOwner(pod, nsObj, tc.defaultChannel)
			require.Equal(t, tc.wantOK, ok)
			require.Equal(t, tc.want, got)
			require.Len(t, problems, tc.wantProblems, "problems: %q", problems)
		})
	}
}

func TestResolveOwnerProblemNamesTheSource(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationOwner: "alice"}}}
	_, problems, ok := ResolveOwner(pod, nil, "")
	require.False(t, ok)
	require.Equal(t, []string{`pod annotation kubemedic.io/owner "alice" is neither an email nor a Slack user ID`}, problems)
}

func TestRecipientString(t *testing.T) {
	require.Equal(t, "nobody", Recipient{}.String())
	require.Equal(t, "user U0123ABCD, else email alice@example.com, else channel gpu (from pod annotation kubemedic.io/owner)",
		Recipient{UserID: "U0123ABCD", Email: "alice@example.com", Channel: "gpu", Source: "pod annotation kubemedic.io/owner"}.String())
}
