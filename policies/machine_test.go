package policies

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestBMCAddress(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-7",
		Labels: map[string]string{"rack": "r12", ProtectedLabelPrefix + "kubemedic-bmc": "10.0.0.5",
			ProtectedLabelPrefix + "empty": "", ProtectedLabelPrefix + "rack": "r12"},
		Annotations: map[string]string{"kubemedic.io/bmc-address": "10.6.6.6"}}}
	for _, tc := range []struct {
		tpl, want, err string
	}{
		{tpl: `https://{{ index .Labels "node-restriction.kubernetes.io/kubemedic-bmc" }}`, want: "https://10.0.0.5"},
		{tpl: `https://{{ .Name }}-bmc.{{ index .Labels "node-restriction.kubernetes.io/rack" }}.mgmt:8443`, want: "https://gpu-7-bmc.r12.mgmt:8443"},
		{tpl: `https://{{ index .Labels "node-restriction.kubernetes.io/missing" }}`, err: `for node gpu-7 gave "https://": no host (is the node's BMC label missing or empty?)`},
		{tpl: `https://{{ index .Labels "node-restriction.kubernetes.io/empty" }}`, err: `gave "https://": no host`},
		{tpl: `{{ .Name }}`, err: `gave "gpu-7": want an http or https URL`},
		{tpl: `https://{{ .Name`, err: "not a valid Go template"},
		// What a node's own kubelet can write never says where its BMC is.
		{tpl: `https://{{ index .Annotations "kubemedic.io/bmc-address" }}`, err: "the template sees only .Name and .Labels"},
		{tpl: `https://{{ index .Labels "rack" }}`, err: `label "rack": only labels under node-restriction.kubernetes.io/ say where a BMC is`},
		{tpl: `https://{{ .Labels.rack }}`, err: `map has no entry for key "rack"`},
	} {
		t.Run(tc.tpl, func(t *testing.T) {
			got, err := BMCAddress(tc.tpl, node)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("BMCAddress(%q) = %q, %v; want an error containing %q", tc.tpl, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("BMCAddress(%q) = %q, %v; want %q", tc.tpl, got, err, tc.want)
			}
		})
	}
}
