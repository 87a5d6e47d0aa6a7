package policies_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/policies"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/test/harness"
)

// apiClient applies raw YAML documents the way `kubectl apply` does: as
// unstructured objects with strict field validation, so unknown fields are
// rejected by the API server and not dropped by a typed client.
type apiClient struct {
	env    *localcluster.Cluster
	dyn    dynamic.Interface
	mapper meta.RESTMapper
}

func newAPIClient(t *testing.T, env *localcluster.Cluster) *apiClient {
	dyn, err := dynamic.NewForConfig(env.Config)
	require.NoError(t, err)
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	require.NoError(t, err)
	groups, err := restmapper.GetAPIGroupResources(dc)
	require.NoError(t, err)
	return &apiClient{env: env, dyn: dyn, mapper: restmapper.NewDiscoveryRESTMapper(groups)}
}

// readDocs splits a YAML file into unstructured objects.
func readDocs(t *testing.T, path string) []*unstructured.Unstructured {
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err, path)
		if m != nil {
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
}

func (a *apiClient) create(ctx context.Context, u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	gvk := u.GroupVersionKind()
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, err
	}
	var ri dynamic.ResourceInterface = a.dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		ns := u.GetNamespace()
		if ns == "" {
			ns = metav1.NamespaceDefault
		}
		if err := a.env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, err
		}
		ri = a.dyn.Resource(m.Resource).Namespace(ns)
	}
	return ri.Create(ctx, u, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict})
}

func TestAPIServer(t *testing.T) {
	env := harness.Start(t, localcluster.Options{})
	api := newAPIClient(t, env)
	ctx := t.Context()

	t.Run("CRDs apply with kubectl --dry-run=server", func(t *testing.T) {
		out, err := exec.CommandContext(ctx, filepath.Join(env.BinDir, "kubectl"), "--kubeconfig", env.Kubeconfig, "apply", "--dry-run=server", "-f", "../deploy/crds").CombinedOutput()
		require.NoError(t, err, "%s", out)
		for _, crd := range []string{"remediationpolicies", "nodeoperationtemplates", "nodeoperations", "clusterreclaimpolicies", "reclaimpolicies"} {
			require.Contains(t, string(out), "customresourcedefinition.apiextensions.k8s.io/"+crd+".kubemedic.io", "kubectl output: %s", out)
		}
	})

	examples, err := filepath.Glob("examples/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, examples)

	t.Run("examples are accepted and stored as the CLI defaults them", func(t *testing.T) {
		docs, problems := policies.LoadFiles("examples")
		require.Empty(t, problems)
		byKey := map[string]runtime.Object{}
		for _, d := range docs {
			m := d.Object.(metav1.Object)
			byKey[d.Kind+"/"+m.GetNamespace()+"/"+m.GetName()] = d.Object
		}
		for _, f := range examples {
			for _, u := range readDocs(t, f) {
				created, err := api.create(ctx, u)
				require.NoError(t, err, "%s: %s %s", f, u.GetKind(), u.GetName())
				// What the API server stored (its CRD defaults applied) must
				// equal what the CLI loaded (SetDefaults applied).
				key := created.GetKind() + "/" + created.GetNamespace() + "/" + created.GetName()
				if created.GetNamespace() == metav1.NamespaceDefault && byKey[key] == nil {
					key = created.GetKind() + "//" + created.GetName()
				}
				want, ok := byKey[key]
				require.True(t, ok, "CLI did not load %s", key)
				got := want.DeepCopyObject()
				require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(created.Object, got))
				require.Equal(t, specOf(t, want), specOf(t, got), "%s: %s: API server defaults differ from policies.SetDefaults", f, key)
			}
		}
	})

	t.Run("invalid policies", func(t *testing.T) {
		for _, c := range invalidCases(t) {
			t.Run(c.name, func(t *testing.T) {
				var errs []string
				for _, u := range readDocs(t, c.path) {
					u.SetName(u.GetName() + "-" + c.name)
					if _, err := api.create(ctx, u); err != nil {
						errs = append(errs, err.Error())
					}
				}
				if c.apiserver == "" {
					require.Empty(t, errs, "the file says the API server accepts it (only Validate catches it)")
					return
				}
				require.NotEmpty(t, errs, "API server accepted %s, want an error containing %q", c.path, c.apiserver)
				require.Contains(t, strings.Join(errs, "\n"), c.apiserver)
			})
		}
	})

	t.Run("NodeOperation spec is immutable, status is not", func(t *testing.T) {
		op := &v1alpha1.NodeOperation{
			ObjectMeta: metav1.ObjectMeta{Name: "planned-reboot-immutable"},
			Spec:       v1alpha1.NodeOperationSpec{NodeName: "gpu-node-000", StepAction: v1alpha1.StepAction{Operation: "reboot"}, Reason: "planned firmware update"},
		}
		require.NoError(t, env.Client.Create(ctx, op))
		op.Status.Phase = v1alpha1.PhaseWaitingForBudget
		op.Status.Message = "maxConcurrent 1 reached for policy gpu-xid"
		require.NoError(t, env.Client.Status().Update(ctx, op))
		op.Spec.NodeName = "gpu-node-001"
		err := env.Client.Update(ctx, op)
		require.Error(t, err)
		require.Contains(t, err.Error(), "spec is immutable; create a new NodeOperation instead")

		out, err := exec.CommandContext(ctx, filepath.Join(env.BinDir, "kubectl"), "--kubeconfig", env.Kubeconfig, "get", "nodeoperations", "planned-reboot-immutable").CombinedOutput()
		require.NoError(t, err, "%s", out)
		header := strings.Fields(strings.SplitN(string(out), "\n", 2)[0])
		require.Equal(t, []string{"NAME", "NODE", "POLICY", "STEP", "PHASE", "DIAGNOSTICS", "AGE", "MESSAGE"}, header)
		require.Contains(t, string(out), "WaitingForBudget")
		require.Contains(t, string(out), "maxConcurrent 1 reached")
	})
}

// specOf returns the spec of a kubemedic object as a comparable value.
func specOf(t *testing.T, obj runtime.Object) any {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	require.NoError(t, err)
	return u["spec"]
}
