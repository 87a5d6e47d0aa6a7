package deploy_test

import (
	"bytes"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/operationpod"
	"github.com/kubemedic/kubemedic/remediator/validation"
	"github.com/kubemedic/kubemedic/remediator/validation/run"
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

// TestOperationTemplatesSet checks the file holds the templates the
// example policies name (the eight repairs, the capture and the three GPU
// tests), each once, each with a description that names its image (when
// it runs one) and its privileges.
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
		"restart-containerd", "restart-device-plugin", "restart-kubelet", "validate-dcgm", "validate-nccl", "validate-nvbandwidth"}, names)

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

// koBinary is where ko puts kubemedic-validate in every image it builds.
const koBinary = "/ko-app/kubemedic-validate"

// TestValidationTemplates checks each GPU test template against what the
// remediator and kubemedic-validate do with it. The remediator builds the
// test pod from the template as an operation pod (operationpod.Build), then
// renames the container, reads the termination message from the file and
// adds every nvidia.com/ resource of the node (buildValidationPod); so the
// template names no GPU, and its process must be kubemedic-validate writing
// to the kubelet's default /dev/termination-log. The argv the pod runs is
// handed to the real run.Main, with a stand-in nvidia-smi that lists one
// H100 and a PATH without the tools: a flag kubemedic-validate does not
// take is a usage error, and a wired test reaches its tool, whose command
// line (and --tool-path) the report names. The image is the one make
// images builds for the test, on a base the Makefile pins.
func TestValidationTemplates(t *testing.T) {
	byName := map[string]v1alpha1.NodeOperationTemplate{}
	for _, d := range splitDocs(t, templatesDeploy, readRepoFile(t, templatesDeploy)) {
		var tpl v1alpha1.NodeOperationTemplate
		decodeStrict(t, d, &tpl)
		byName[tpl.Name] = tpl
	}
	makefile := string(readRepoFile(t, "Makefile"))
	tests := regexp.MustCompile(`(?m)^VALIDATE_TESTS\s*:?=\s*(.+)$`).FindStringSubmatch(makefile)
	require.NotNil(t, tests, "the Makefile has no VALIDATE_TESTS")

	for _, tc := range []struct {
		test string
		// command is the tool's command line as the report names it.
		command string
	}{
		{validation.TestDCGM, "dcgmi diag -r 2 -j"},
		{validation.TestNCCL, "all_reduce_perf -b 8 -e 8G -f 2 -g 1"},
		{validation.TestNVBandwidth, "nvbandwidth -t host_to_device_memcpy_ce -t device_to_host_memcpy_ce -t device_to_device_memcpy_read_ce"},
	} {
		name := "validate-" + tc.test
		t.Run(name, func(t *testing.T) {
			tpl, ok := byName[name]
			require.True(t, ok, "no template %s", name)
			s := tpl.Spec
			require.Equal(t, v1alpha1.SuccessPodSucceeded, s.SuccessCriterion)
			require.False(t, s.Privileged || s.HostPID || s.HostNetwork || len(s.HostPaths) > 0,
				"a test needs the GPUs the device plugin gives it, nothing of the host")
			for _, e := range s.Env {
				require.NotEqual(t, "NVIDIA_VISIBLE_DEVICES", e.Name, "the device plugin picks the GPUs: every one of the node's")
			}
			for res := range s.Resources.Limits {
				require.False(t, strings.HasPrefix(string(res), "nvidia.com/"), "the remediator adds the node's GPU resources")
			}
			for res := range s.Resources.Requests {
				require.False(t, strings.HasPrefix(string(res), "nvidia.com/"), "the remediator adds the node's GPU resources")
			}

			// The image: make images builds kubemedic-validate-<test> on
			// VALIDATE_BASE_<test>.
			img, tag, _ := splitImage(s.Image)
			require.Equal(t, "ghcr.io/kubemedic/kubemedic-validate-"+tc.test, img)
			require.Regexp(t, `^v[0-9]`, tag)
			require.Contains(t, strings.Fields(tests[1]), tc.test, "make images does not build %s", img)
			require.Regexp(t, `(?m)^VALIDATE_BASE_`+tc.test+`\s*\?=\s*\S+`, makefile, "the Makefile pins no base for %s", img)

			// What the container runs, as the pod has it.
			op := &v1alpha1.NodeOperation{ObjectMeta: metav1.ObjectMeta{Name: "gpu-memory-reset.node-1-1", UID: "u"},
				Spec: v1alpha1.NodeOperationSpec{NodeName: "node-1", Policy: "gpu-memory-reset", Step: "reset-gpu"}}
			c := operationpod.Build(op, &tpl, "kubemedic").Spec.Containers[0]
			argv := validateArgv(t, c)
			require.Equal(t, tc.test, argv[0], "the test kubemedic-validate runs")
			require.NotContains(t, argv, "--termination-log", "the report goes where the kubelet reads it: /dev/termination-log")

			// kubemedic-validate's bound on the test ends before the
			// remediator's, with time left to pull the image and start:
			// a report, not a pod killed at the deadline.
			bound := run.DefaultTimeout
			if i := slices.Index(argv, "--timeout"); i >= 0 {
				require.Less(t, i+1, len(argv))
				d, err := time.ParseDuration(argv[i+1])
				require.NoError(t, err)
				bound = d
			}
			require.NotNil(t, s.Timeout)
			require.LessOrEqual(t, bound+5*time.Minute, s.Timeout.Duration, "--timeout %s and the template's %s", bound, s.Timeout.Duration)
			if i := slices.Index(argv, "--tool-path"); i >= 0 {
				require.Less(t, i+1, len(argv))
				require.True(t, path.IsAbs(argv[i+1]), "--tool-path %s: by absolute path, as in the base image", argv[i+1])
			}

			// The real kubemedic-validate, up to the tool.
			dir := t.TempDir()
			smi := filepath.Join(dir, "nvidia-smi")
			require.NoError(t, os.WriteFile(smi, []byte("#!/bin/sh\necho '0, GPU-179b83e0-c021-1d8e-a043-c3b3abb37ced, NVIDIA H100 80GB HBM3, 00000000:18:00.0, 1654922006536'\n"), 0o755))
			report := filepath.Join(dir, "report")
			t.Setenv("PATH", dir)
			args := append(slices.Clone(argv), "--nvidia-smi", smi, "--termination-log", report)
			code := run.Main(args, io.Discard, io.Discard, os.Getenv)
			b, err := os.ReadFile(report)
			require.NoError(t, err, "kubemedic-validate wrote no report")
			r, err := validation.Decode(string(b))
			require.NoError(t, err)
			require.Equal(t, run.ExitNoAnswer, code, "no tool here: %s", r.Reason)
			require.Equal(t, tc.test, r.Test)
			require.NotContains(t, r.Reason, "kubemedic-validate:", "a usage error: the template's args are not kubemedic-validate's")
			require.True(t, strings.HasPrefix(r.Reason, tc.command), "it ran %q, want %q", r.Reason, tc.command)
			if i := slices.Index(argv, "--tool-path"); i >= 0 {
				require.Contains(t, r.Reason, argv[i+1], "the tool at --tool-path")
			}
		})
	}
}

// validateArgv returns kubemedic-validate's arguments in c: the command
// itself (/ko-app/kubemedic-validate), or a bash script that ends by
// exec'ing it with the container's args ("$@"; bash -c script $0 args...).
func validateArgv(t *testing.T, c corev1.Container) []string {
	t.Helper()
	require.NotEmpty(t, c.Command)
	if c.Command[0] == koBinary {
		return append(slices.Clone(c.Command[1:]), c.Args...)
	}
	require.Equal(t, []string{"/bin/bash", "-c"}, c.Command[:2], "kubemedic-validate, or a bash script that execs it")
	require.Len(t, c.Command, 4, "bash -c SCRIPT NAME: the args are the script's \"$@\"")
	var last string
	for _, l := range strings.Split(c.Command[2], "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			last = l
		}
	}
	require.Equal(t, "exec "+koBinary+` "$@"`, last, "the script ends in kubemedic-validate, whose exit status and report are the pod's")
	require.Contains(t, c.Command[2], "set -euo pipefail")
	return slices.Clone(c.Args)
}
