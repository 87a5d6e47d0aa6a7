package localcluster_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/test/harness"
)

// obj builds an unstructured object in namespace default.
func obj(apiVersion, kind, name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": apiVersion,
		"kind":       kind,
		"metadata":   map[string]any{"name": name, "namespace": "default"},
		"spec":       spec,
	}}
}

// TestThirdPartyCRDs installs Cluster API's and Metal3's CRDs from the
// testbin cache and checks that the API server applies their real schemas.
func TestThirdPartyCRDs(t *testing.T) {
	env := harness.Start(t, localcluster.Options{ThirdPartyCRDs: true})
	ctx := t.Context()

	valid := []*unstructured.Unstructured{
		obj("cluster.x-k8s.io/v1beta2", "Machine", "gpu-node-000", map[string]any{
			"clusterName":       "gpu",
			"bootstrap":         map[string]any{"dataSecretName": "gpu-node-000-bootstrap"},
			"infrastructureRef": map[string]any{"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "Metal3Machine", "name": "gpu-node-000"},
		}),
		obj("cluster.x-k8s.io/v1beta2", "MachineHealthCheck", "gpu-nodes", map[string]any{
			"clusterName": "gpu",
			"selector":    map[string]any{"matchLabels": map[string]any{"pool": "gpu"}},
		}),
		obj("metal3.io/v1alpha1", "BareMetalHost", "gpu-node-000", map[string]any{
			"online":         true,
			"bootMACAddress": "00:11:22:33:44:55",
			"bmc":            map[string]any{"address": "redfish://10.0.0.1/redfish/v1/Systems/1", "credentialsName": "gpu-node-000-bmc"},
		}),
	}
	for _, o := range valid {
		require.NoError(t, env.Client.Create(ctx, o), "create %s", o.GetKind())
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(o.GroupVersionKind())
		require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(o), got))
		require.NotEmpty(t, got.GetUID())
	}

	// The schemas are the real ones: required fields and enums are enforced.
	invalid := []*unstructured.Unstructured{
		obj("cluster.x-k8s.io/v1beta2", "Machine", "no-infrastructure", map[string]any{
			"clusterName": "gpu",
			"bootstrap":   map[string]any{"dataSecretName": "x"},
		}),
		obj("cluster.x-k8s.io/v1beta2", "MachineHealthCheck", "no-selector", map[string]any{"clusterName": "gpu"}),
		obj("metal3.io/v1alpha1", "BareMetalHost", "bad-boot-mode", map[string]any{"online": true, "bootMode": "floppy"}),
	}
	for _, o := range invalid {
		err := env.Client.Create(ctx, o)
		require.True(t, apierrors.IsInvalid(err), "create %s %s: want Invalid, got %v", o.GetKind(), o.GetName(), err)
	}

	// Both Machine versions are served; v1beta2 is the storage version.
	dc := discovery.NewDiscoveryClientForConfigOrDie(env.Config)
	for _, gv := range []string{"cluster.x-k8s.io/v1beta1", "cluster.x-k8s.io/v1beta2", "metal3.io/v1alpha1"} {
		_, err := dc.ServerResourcesForGroupVersion(gv)
		require.NoError(t, err, gv)
	}
}

func TestThirdPartyCRDsMissingNamesTestbin(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"etcd", "kube-apiserver"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\nexit 1\n"), 0o755))
	}
	t.Setenv(localcluster.EnvTestBin, dir)
	env, err := localcluster.New(t.Context(), localcluster.Options{ThirdPartyCRDs: true})
	require.Nil(t, env)
	require.ErrorContains(t, err, "hack/testbin.sh")
	require.ErrorContains(t, err, filepath.Join(dir, localcluster.ThirdPartyCRDsDir))
}

// TestDRA checks that Options.DRA, and only it, serves DeviceTaintRule.
func TestDRA(t *testing.T) {
	served := func(env *localcluster.Cluster) bool {
		t.Helper()
		dc := discovery.NewDiscoveryClientForConfigOrDie(env.Config)
		list, err := dc.ServerResourcesForGroupVersion("resource.k8s.io/v1beta2")
		if apierrors.IsNotFound(err) {
			return false
		}
		require.NoError(t, err)
		for _, r := range list.APIResources {
			if r.Name == "devicetaintrules" {
				require.Equal(t, "DeviceTaintRule", r.Kind)
				return true
			}
		}
		return false
	}
	t.Run("with DRA", func(t *testing.T) {
		env := harness.Start(t, localcluster.Options{DRA: true, CRDDir: "-"})
		require.True(t, served(env))
	})
	t.Run("without DRA", func(t *testing.T) {
		env := harness.Start(t, localcluster.Options{CRDDir: "-"})
		require.False(t, served(env))
	})
}
