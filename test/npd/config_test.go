package npd_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cpmtypes "k8s.io/node-problem-detector/pkg/custompluginmonitor/types"

	"github.com/kubemedic/kubemedic/detectors/plugin"
	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/test/harness"
)

// TestMonitorConfigs checks every deploy/npd monitor config with NPD's own
// config types and against what kubemedic-detect and the remediator expect.
func TestMonitorConfigs(t *testing.T) {
	dir := filepath.Join(repoRoot(t), "deploy/npd")
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	require.NoError(t, err)
	require.Len(t, files, 7, "one monitor per check")
	detect := harness.GoBuild(t, "./cmd/kubemedic-detect")
	covered := map[string]bool{}

	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			require.NoError(t, err)
			var cfg cpmtypes.CustomPluginConfig
			dec := json.NewDecoder(strings.NewReader(string(b)))
			dec.DisallowUnknownFields()
			require.NoError(t, dec.Decode(&cfg))
			require.NoError(t, cfg.ApplyConfiguration())
			// NPD's Validate wants the plugin to exist: check the
			// in-cluster path, then validate against the built binary.
			for _, r := range cfg.Rules {
				require.Equal(t, "/opt/kubemedic/bin/kubemedic-detect", r.Path)
				r.Path = detect
			}
			require.NoError(t, cfg.Validate())

			g := cfg.PluginGlobalConfig
			require.Equal(t, plugin.MaxLine, *g.MaxOutputLength, "room for the line kubemedic-detect prints")
			require.True(t, *g.SkipInitialStatus, "an NPD restart must not blip a True condition to False")
			require.True(t, *g.EnableMessageChangeBasedConditionUpdate, "a change of the reason prefix must reach the Node")

			require.Len(t, cfg.DefaultConditions, 1)
			cond := cfg.DefaultConditions[0]
			reasons, ok := v1alpha1.ConditionReasons[cond.Type]
			require.True(t, ok, "condition %s is not a detector condition", cond.Type)
			require.NotContains(t, reasons, cond.Reason, "the OK reason must not be a fault reason")
			covered[cond.Type] = true

			require.Len(t, cfg.Rules, 1, "NPD flip-flops a condition with two permanent rules (NPD #566)")
			rule := cfg.Rules[0]
			require.Equal(t, "permanent", string(rule.Type))
			require.Equal(t, cond.Type, rule.Condition)
			require.Equal(t, v1alpha1.DetectReason, rule.Reason)
			require.LessOrEqual(t, *rule.Timeout, *g.Timeout, "NPD uses the smaller of the two")

			// The check's own deadline must come first, with room to print.
			var own time.Duration
			for _, a := range rule.Args {
				if v, ok := strings.CutPrefix(a, "--timeout="); ok {
					own, err = time.ParseDuration(v)
					require.NoError(t, err)
				}
			}
			require.NotZero(t, own, "rule args must set --timeout")
			require.GreaterOrEqual(t, *rule.Timeout-own, 5*time.Second, "rule timeout %s vs check --timeout %s", *rule.Timeout, own)
			require.GreaterOrEqual(t, *g.InvokeInterval, *rule.Timeout, "a run that times out must end before the next one is due")

			// The real binary accepts the args (flags exist, values parse).
			args := slices.Clone(rule.Args)
			for i, a := range args {
				if strings.HasPrefix(a, "--root=") {
					args[i] = "--root=" + t.TempDir()
				}
			}
			args = append(args, "--state-dir="+t.TempDir(), "--timeout=3s")
			out, _ := exec.Command(detect, args...).Output()
			line := strings.TrimSpace(string(out))
			require.NotRegexp(t, regexp.MustCompile(`unknown flag|unexpected argument|invalid argument|unknown check`), line)
			require.LessOrEqual(t, len(line), plugin.MaxLine)
		})
	}
	for typ := range v1alpha1.ConditionReasons {
		require.True(t, covered[typ], "no monitor config sets %s", typ)
	}

	// The DaemonSet runs every config, and the kustomization ships them all.
	ds, err := os.ReadFile(filepath.Join(dir, "daemonset.yaml"))
	require.NoError(t, err)
	kz, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	require.NoError(t, err)
	for _, f := range files {
		require.Contains(t, string(ds), "/config/"+filepath.Base(f))
		require.Contains(t, string(kz), "- "+filepath.Base(f))
	}
}

// TestManifestsApply renders deploy/npd with kustomize and applies it to a
// real API server in server-side dry-run mode, which runs the API's own
// validation of the DaemonSet, RBAC and ConfigMap.
func TestManifestsApply(t *testing.T) {
	env := harness.Start(t, localcluster.Options{})
	ctx := context.Background()
	require.NoError(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kubemedic-system"}}))
	kubectl := filepath.Join(env.BinDir, "kubectl")
	rendered, err := exec.Command(kubectl, "kustomize", filepath.Join(repoRoot(t), "deploy/npd")).Output()
	require.NoError(t, err, "kubectl kustomize: %s", exitStderr(err))
	apply := exec.Command(kubectl, "--kubeconfig", env.Kubeconfig, "apply", "--dry-run=server", "-f", "-")
	apply.Stdin = strings.NewReader(string(rendered))
	out, err := apply.CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, want := range []string{
		"serviceaccount/kubemedic-npd", "clusterrole.rbac.authorization.k8s.io/kubemedic-npd",
		"clusterrolebinding.rbac.authorization.k8s.io/kubemedic-npd", "configmap/kubemedic-npd-config-",
		"daemonset.apps/kubemedic-npd",
	} {
		require.Contains(t, string(out), want)
	}
	// RBAC stays narrow: no wildcards, no secrets, no nodes/proxy.
	require.NotContains(t, string(rendered), `"*"`)
	require.NotContains(t, string(rendered), "- '*'")
	require.NotContains(t, string(rendered), "secrets")
	require.NotRegexp(t, `(?m)^\s*- nodes/proxy`, string(rendered))
}

func exitStderr(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}
