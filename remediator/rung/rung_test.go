package rung

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubemedic/kubemedic/remediator/rung/redfish"
)

func TestRedfishTarget(t *testing.T) {
	for _, tc := range []struct {
		desc string
		req  redfish.Request
		want string
	}{
		{desc: "a named system", req: redfish.Request{Endpoint: "https://10.0.0.5", System: "1"}, want: "https://10.0.0.5/redfish/v1/Systems/1"},
		{desc: "a trailing slash on the address", req: redfish.Request{Endpoint: "https://10.0.0.5:8443/", System: "System.Embedded.1"}, want: "https://10.0.0.5:8443/redfish/v1/Systems/System.Embedded.1"},
		{desc: "the only system", req: redfish.Request{Endpoint: "https://bmc.example/"}, want: "https://bmc.example/redfish/v1/Systems (its only system)"},
		{desc: "no credentials in the target", req: redfish.Request{Endpoint: "https://bmc", Username: "admin", Password: "hunter2", System: "1"}, want: "https://bmc/redfish/v1/Systems/1"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			require.Equal(t, tc.want, redfishTarget(tc.req))
		})
	}
}

func TestTargetRoundTrip(t *testing.T) {
	for _, gvk := range []string{MachineGVK.Kind, BareMetalHostGVK.Kind} {
		obj := &unstructured.Unstructured{}
		obj.SetKind(gvk)
		obj.SetNamespace("ns")
		obj.SetName("name")
		target := targetOf(obj)
		require.Equal(t, gvk+" ns/name", target)
		key, ok := parseTarget(target, gvk)
		require.True(t, ok)
		require.Equal(t, types.NamespacedName{Namespace: "ns", Name: "name"}, key)
	}
	for _, bad := range []string{"Machine ns/", "Machine /name", "Machine name", "BareMetalHost ns/name", "https://bmc/redfish/v1/Systems/1"} {
		_, ok := parseTarget(bad, MachineGVK.Kind)
		require.False(t, ok, bad)
	}
}
