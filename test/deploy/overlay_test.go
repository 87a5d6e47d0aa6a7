package deploy_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/test/harness"
)

const (
	overlayDir       = "deploy/overlays/example"
	overlayNamespace = "gpu-health"
	overlayRegistry  = "registry.example.com/"
)

// serverDryRun runs `kubectl apply -k --dry-run=server` of deploy/ and of
// the example overlay against env, whose kubemedic CRDs are installed and
// established (a NodeOperationTemplate cannot be applied in the same run as
// its CRD): the API's validation (schemas, CEL rules, the Deployments' and
// the DaemonSet's pod specs, PodDisruptionBudgets) and admission run on
// every object, and none is stored. The namespaces are created first
// because a dry run creates none. deploy/prometheus is not applied: its
// kinds are prometheus-operator's, whose CRDs this API server does not have
// (TestPrometheusKustomization checks it apart). TestInstallFresh calls it
// before the real install, sharing its API server.
func serverDryRun(t *testing.T, env *localcluster.Cluster) {
	t.Helper()
	kubectl := filepath.Join(env.BinDir, "kubectl")
	root := repoRoot(t)
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(kubectl, append([]string{"--kubeconfig", env.Kubeconfig}, args...)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		require.NoError(t, err, "kubectl %s: %s", strings.Join(args, " "), stderr.String())
		return string(out)
	}
	for _, ns := range []string{namespace, overlayNamespace} {
		require.NoError(t, env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	}

	for _, tc := range []struct {
		dir, ns, registry string
	}{
		{"deploy", namespace, ""},
		{overlayDir, overlayNamespace, overlayRegistry},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			// What kustomize renders, to compare with what the server kept.
			want := map[string]bool{}
			for _, d := range splitDocs(t, tc.dir, kustomize(t, kubectl, tc.dir)) {
				want[d.Obj.GetKind()+"/"+d.Obj.GetName()] = true
			}
			out := run("apply", "-k", filepath.Join(root, tc.dir), "--dry-run=server", "-o", "yaml")
			var list struct {
				Items []map[string]any `json:"items"`
			}
			require.NoError(t, yaml.Unmarshal([]byte(out), &list))
			got := map[string]bool{}
			for _, item := range list.Items {
				u := unstructured.Unstructured{Object: item}
				id := u.GetKind() + "/" + u.GetName()
				got[id] = true
				switch {
				case u.GetKind() == "Namespace" || u.GetKind() == "CustomResourceDefinition" || u.GetKind() == "PriorityClass" ||
					u.GetKind() == "NodeOperationTemplate" || strings.HasPrefix(u.GetKind(), "Cluster"):
					require.Empty(t, u.GetNamespace(), "%s is cluster-scoped", id)
				default:
					require.Equal(t, tc.ns, u.GetNamespace(), id)
				}
				if tc.registry == "" {
					continue
				}
				// The overlay: every image from the mirror, every binding's
				// ServiceAccount in the new namespace.
				for _, img := range storedImages(t, u) {
					require.True(t, strings.HasPrefix(img, tc.registry), "%s runs %s, not from the mirror", id, img)
				}
				subjects, _, err := unstructured.NestedSlice(u.Object, "subjects")
				require.NoError(t, err)
				for _, s := range subjects {
					require.Equal(t, tc.ns, s.(map[string]any)["namespace"], "%s binds a ServiceAccount of another namespace", id)
				}
			}
			require.Equal(t, want, got, "the server's dry run must return every rendered object")
			for _, must := range []string{
				"Deployment/kubemedic-remediator", "Deployment/kubemedic-janitor", "Deployment/kubemedic-alertbridge",
				"DaemonSet/kubemedic-npd", "PodDisruptionBudget/kubemedic-remediator", "PodDisruptionBudget/kubemedic-janitor",
				"ConfigMap/kubemedic-grafana-dashboard", "NodeOperationTemplate/reset-gpu", "Namespace/" + tc.ns,
			} {
				require.True(t, got[must], "%s: the dry run did not return %s", tc.dir, must)
			}
		})
	}
}

// storedImages returns the images of a workload's pod template, or a
// NodeOperationTemplate's image.
func storedImages(t *testing.T, u unstructured.Unstructured) []string {
	t.Helper()
	if u.GetKind() == "NodeOperationTemplate" {
		img, _, err := unstructured.NestedString(u.Object, "spec", "image")
		require.NoError(t, err)
		if img == "" {
			return nil
		}
		return []string{img}
	}
	var out []string
	for _, field := range []string{"initContainers", "containers"} {
		cs, _, err := unstructured.NestedSlice(u.Object, "spec", "template", "spec", field)
		require.NoError(t, err)
		for _, c := range cs {
			out = append(out, c.(map[string]any)["image"].(string))
		}
	}
	return out
}

// TestOverlayExample checks what the example overlay promises without an
// API server: the same parts as deploy/ (it cannot include deploy/ itself,
// kustomize refuses an overlay inside its base), a mirror for every image
// deploy/ pins, the namespace moved everywhere (no object or binding left
// in kubemedic-system), each patch landed, and an alertbridge routing file
// that the real `kubemedic alertbridge render` accepts.
func TestOverlayExample(t *testing.T) {
	base := readKustomization(t, "deploy/kustomization.yaml")
	overlay := readKustomization(t, overlayDir+"/kustomization.yaml")
	var parts []string
	for _, r := range base.Resources {
		parts = append(parts, "../../"+r)
	}
	require.Equal(t, parts, overlay.Resources, "the overlay lists deploy/kustomization.yaml's parts")
	var mirrored []string
	for _, e := range overlay.Images {
		require.True(t, strings.HasPrefix(e.NewName, overlayRegistry), "images: %s", e.Name)
		mirrored = append(mirrored, e.Name)
	}
	for _, e := range base.Images {
		require.Contains(t, mirrored, e.Name, "the overlay leaves %s on its public registry", e.Name)
	}

	kubectl := kubectlForRender(t)
	text := string(kustomize(t, kubectl, overlayDir))
	require.NotContains(t, text, namespace, "something still names the base's namespace")
	out := render(t, overlayDir)
	args := map[string][]string{}
	for _, d := range out.deployments {
		args[d.Name] = d.Spec.Template.Spec.Containers[0].Args
	}
	require.Contains(t, args["kubemedic-janitor"], "--prometheus-url=http://prometheus-operated.monitoring.svc:9090")
	n := 0
	for _, a := range args["kubemedic-janitor"] {
		if strings.HasPrefix(a, "--prometheus-url=") {
			n++
		}
	}
	require.Equal(t, 1, n, "one --prometheus-url")
	require.Contains(t, args["kubemedic-remediator"], "--slack-default-channel=#gpu-cluster-ops")
	require.Len(t, out.daemonSets, 1)
	npd := out.daemonSets[0].Spec.Template.Spec
	require.NotNil(t, npd.RuntimeClassName)
	require.Equal(t, "nvidia", *npd.RuntimeClassName)

	var routing string
	for _, d := range out.docs {
		switch {
		case d.Obj.GetKind() == "ConfigMap" && strings.HasPrefix(d.Obj.GetName(), "kubemedic-alertbridge-config-"):
			var cm corev1.ConfigMap
			decodeStrict(t, d, &cm)
			routing = cm.Data["config.yaml"]
		case d.Obj.GetKind() == "PersistentVolumeClaim":
			var pvc corev1.PersistentVolumeClaim
			decodeStrict(t, d, &pvc)
			require.Equal(t, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod}, pvc.Spec.AccessModes)
		case d.Obj.GetKind() == "Namespace":
			require.Equal(t, overlayNamespace, d.Obj.GetName())
			require.Equal(t, "privileged", d.Obj.GetLabels()["pod-security.kubernetes.io/enforce"])
		}
	}
	require.Equal(t, string(readRepoFile(t, overlayDir+"/config.yaml")), routing, "the overlay's routing replaces the base's")

	cli := harness.GoBuild(t, "./cmd/kubemedic")
	render := exec.Command(cli, "alertbridge", "render",
		"--config", filepath.Join(repoRoot(t), overlayDir, "config.yaml"),
		"--payload", filepath.Join(repoRoot(t), "alertbridge/render/testdata/gpu-lost.json"))
	b, err := render.CombinedOutput()
	require.NoError(t, err, "kubemedic alertbridge render with the overlay's config.yaml:\n%s", b)
	require.Contains(t, string(b), "example-org/gpu-cluster-oncall", "a GPU alert goes to the default repository")
}
