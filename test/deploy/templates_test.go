package deploy_test

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

const (
	templatesExample = "policies/examples/operation-templates.yaml"
	templatesDeploy  = "deploy/remediator/operation-templates.yaml"
)

// TestOperationTemplatesIdentical keeps one reviewed text of the
// NodeOperationTemplates: the copy that deploy/remediator installs and the
// one next to the example policies must not drift apart.
func TestOperationTemplatesIdentical(t *testing.T) {
	example := readRepoFile(t, templatesExample)
	deployed := readRepoFile(t, templatesDeploy)
	if bytes.Equal(example, deployed) {
		return
	}
	a, b := strings.Split(string(example), "\n"), strings.Split(string(deployed), "\n")
	line := 0
	for line < len(a) && line < len(b) && a[line] == b[line] {
		line++
	}
	at := func(lines []string) string {
		if line < len(lines) {
			return lines[line]
		}
		return "(end of file)"
	}
	t.Fatalf("%s and %s differ from line %d:\n  %s\n  %s\nChange both; they are one reviewed text.",
		templatesExample, templatesDeploy, line+1, at(a), at(b))
}

// TestOperationTemplatesSet checks the file holds the eight templates the
// example policies name, each once, each with a description that names its
// image (when it runs one) and its privileges.
func TestOperationTemplatesSet(t *testing.T) {
	docs := splitDocs(t, templatesDeploy, readRepoFile(t, templatesDeploy))
	var names []string
	for _, d := range docs {
		var tpl v1alpha1.NodeOperationTemplate
		decodeStrict(t, d, &tpl)
		require.Equal(t, "NodeOperationTemplate", tpl.Kind)
		names = append(names, tpl.Name)
		t.Run(tpl.Name, func(t *testing.T) {
			s := tpl.Spec
			require.LessOrEqual(t, len(s.Description), 2048, "the CRD's limit")
			require.Contains(t, s.Description, "Privileges:", "say which privileges it takes and why")
			require.Empty(t, s.ServiceAccountName, "operation pods run without an API token")
			if s.SuccessCriterion == v1alpha1.SuccessNone {
				require.Empty(t, s.Image)
				require.False(t, s.Privileged || s.HostPID || s.HostNetwork || len(s.HostPaths) > 0 || len(s.Capabilities) > 0,
					"a template that runs no pod takes no privileges")
				return
			}
			require.Contains(t, s.Description, "Image:")
			require.NotContains(t, s.Image, ":latest")
			require.Regexp(t, `:[^/]+$`, s.Image, "pin the image to a tag")
			if s.HostPID {
				require.Contains(t, s.Description, "hostPID", "say why it needs the host PID namespace")
			}
			if s.Privileged {
				require.Contains(t, s.Description, "privileged", "say why it is privileged")
			}
			require.NotNil(t, s.Timeout)
			require.NotNil(t, s.Resources)
			require.False(t, s.Resources.Limits.Memory().IsZero(), "a memory limit")
		})
	}
	slices.Sort(names)
	require.Equal(t, []string{"collect-gpu-diagnostics", "drain-only", "reapply-mig-config", "reboot", "remount-nfs", "reset-gpu",
		"restart-containerd", "restart-device-plugin", "restart-kubelet"}, names)

	// What the brief of each operation promises, in its script.
	byName := map[string]v1alpha1.NodeOperationTemplateSpec{}
	for _, d := range docs {
		var tpl v1alpha1.NodeOperationTemplate
		decodeStrict(t, d, &tpl)
		byName[tpl.Name] = tpl.Spec
	}
	script := func(name string) string {
		s := byName[name]
		return strings.Join(append(slices.Clone(s.Command), s.Args...), " ")
	}
	require.Equal(t, v1alpha1.SuccessNodeRebooted, byName["reboot"].SuccessCriterion)
	require.Contains(t, script("reboot"), "nsenter -t 1 -m")
	require.Contains(t, script("reboot"), "systemctl reboot")
	require.Contains(t, script("restart-kubelet"), "systemctl restart kubelet")
	require.Contains(t, script("reset-gpu"), `nvidia-smi -r -i "$GPU_BUS_ID"`)
	require.Contains(t, script("reset-gpu"), "--query-compute-apps=pid", "refuse to reset a GPU with processes")
	require.Contains(t, script("remount-nfs"), "/proc/1/root/etc/fstab", "remount only what the host's fstab lists")
	require.Equal(t, v1alpha1.SuccessNone, byName["drain-only"].SuccessCriterion)
	for _, name := range []string{"restart-device-plugin", "reapply-mig-config"} {
		require.Contains(t, script(name), "crictl stop", name)
		require.Contains(t, script(name), `"$count" -ne 1`, "%s: refuse unless exactly one container matches", name)
		require.Equal(t, v1alpha1.SuccessPodSucceeded, byName[name].SuccessCriterion, name)
	}
	require.Contains(t, script("restart-containerd"), "systemctl restart containerd")
	require.Contains(t, script("restart-containerd"), "KillMode", "refuse a restart that would kill every container")

	// The capture: kubemedic-diag on the host's root, read-only but for
	// the spool, and no store credentials in the template.
	diag := byName["collect-gpu-diagnostics"]
	require.Contains(t, script("collect-gpu-diagnostics"), "kubemedic-diag capture --root=/host")
	require.Regexp(t, `^ghcr\.io/kubemedic/kubemedic-diag:`, diag.Image)
	mounts := map[string]v1alpha1.HostPathMount{}
	for _, h := range diag.HostPaths {
		mounts[h.MountPath] = h
	}
	require.True(t, mounts["/host"].ReadOnly, "the host's root read-only")
	require.Equal(t, "/var/lib/kubemedic/diagnostics", mounts["/host/var/lib/kubemedic/diagnostics"].Path)
	require.False(t, mounts["/host/var/lib/kubemedic/diagnostics"].ReadOnly, "the spool writable")
	for _, e := range diag.Env {
		require.NotContains(t, strings.ToLower(e.Name), "key", "credentials come from the remediator's Secret, never the template")
	}
}

// TestCRDKustomizationComplete checks that deploy/crds/Kustomization lists
// every CRD that `make generate` writes, so that a new CRD is installed by
// deploy/remediator too.
func TestCRDKustomizationComplete(t *testing.T) {
	crds, err := filepath.Glob(filepath.Join(repoRoot(t), "deploy/crds/*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, crds)
	var kz struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Resources  []string `json:"resources"`
	}
	docs := splitDocs(t, "deploy/crds/Kustomization", readRepoFile(t, "deploy/crds/Kustomization"))
	require.Len(t, docs, 1)
	decodeStrict(t, docs[0], &kz)
	var want []string
	for _, c := range crds {
		want = append(want, filepath.Base(c))
	}
	require.ElementsMatch(t, want, kz.Resources)
}
