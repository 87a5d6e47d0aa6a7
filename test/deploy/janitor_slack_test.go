package deploy_test

import (
	"path"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// TestJanitorSlackInteractivity checks that Slack can reach the janitor's
// interactivity endpoint: the flag's port is the container's port slack,
// the Service and the Ingress lead to it on the handler's path, and the
// signing secret is an optional reference to the Slack Secret, never a
// value.
func TestJanitorSlackInteractivity(t *testing.T) {
	o := readJanitor(t)
	c := o.dep.Spec.Template.Spec.Containers[0]
	args := janitorArgs(t, c)
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	require.Equal(t, ":8082", args["slack-interactivity-bind-address"])
	require.Equal(t, int32(8082), ports["slack"])

	var secret *corev1.EnvVar
	for i, e := range c.Env {
		if e.Name == "KUBEMEDIC_SLACK_SIGNING_SECRET" {
			secret = &c.Env[i]
		}
	}
	require.NotNil(t, secret, "the signing secret turns the buttons on")
	require.Empty(t, secret.Value, "never a value in git")
	require.NotNil(t, secret.ValueFrom)
	ref := secret.ValueFrom.SecretKeyRef
	require.NotNil(t, ref)
	require.Equal(t, janitorSlackSecret, ref.Name)
	require.Equal(t, "signing-secret", ref.Key)
	require.True(t, ref.Optional != nil && *ref.Optional, "optional: without it, no buttons, and no crash loop")
	require.NotContains(t, args, "slack-signing-secret-file", "read from the environment (optional), not a file that must exist")

	var svc corev1.Service
	rel := path.Join(janitorDir, "slack.yaml")
	docs := splitDocs(t, rel, readRepoFile(t, rel))
	require.Len(t, docs, 1)
	decodeStrict(t, docs[0], &svc)
	require.Equal(t, "kubemedic-janitor-slack", svc.Name)
	require.Equal(t, o.dep.Spec.Selector.MatchLabels, svc.Spec.Selector)
	require.Len(t, svc.Spec.Ports, 1)
	require.Equal(t, "slack", svc.Spec.Ports[0].TargetPort.String())

	var ing networkingv1.Ingress
	rel = path.Join(janitorDir, "slack-ingress.yaml")
	docs = splitDocs(t, rel, readRepoFile(t, rel))
	require.Len(t, docs, 1)
	decodeStrict(t, docs[0], &ing)
	require.Len(t, ing.Spec.TLS, 1, "Slack posts to HTTPS URLs only")
	require.NotEmpty(t, ing.Spec.TLS[0].SecretName)
	require.Len(t, ing.Spec.Rules, 1)
	rule := ing.Spec.Rules[0]
	require.Equal(t, ing.Spec.TLS[0].Hosts, []string{rule.Host}, "the certificate is for the rule's host")
	require.Len(t, rule.HTTP.Paths, 1, "only the endpoint is exposed")
	p := rule.HTTP.Paths[0]
	require.Equal(t, "/slack/interactivity", p.Path, "the janitor's handler path")
	require.Equal(t, networkingv1.PathTypeExact, *p.PathType)
	require.Equal(t, svc.Name, p.Backend.Service.Name)
	require.Equal(t, svc.Spec.Ports[0].Name, p.Backend.Service.Port.Name)
}
