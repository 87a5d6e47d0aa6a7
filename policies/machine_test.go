package policies

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestBMCAddress(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-7",
		Labels:      map[string]string{"rack": "r12"},
		Annotations: map[string]string{"kubemedic.io/bmc-address": "10.0.0.5", "empty": ""}}}
	for _, tc := range []struct {
		tpl, want, err string
	}{
		{tpl: `https://{{ index .Annotations "kubemedic.io/bmc-address" }}`, want: "https://10.0.0.5"},
		{tpl: `https://{{ .Name }}-bmc.{{ .Labels.rack }}.mgmt:8443`, want: "https://gpu-7-bmc.r12.mgmt:8443"},
		{tpl: `https://{{ .Annotations.missing }}`, err: `node gpu-7: template: address:1:23: executing "address" at <.Annotations.missing>: map has no entry for key "missing"`},
		{tpl: `https://{{ index .Annotations "empty" }}`, err: `gave "https://": no host`},
		{tpl: `{{ .Name }}`, err: `gave "gpu-7": want an http or https URL`},
		{tpl: `https://{{ .Name`, err: "not a valid Go template"},
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
