package stackhealth_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/kubemedic/kubemedic/internal/localcluster"
	"github.com/kubemedic/kubemedic/remediator/stackhealth"
)

// TestDetectorDefaultsMatchDeploy ties the detector check's defaults to
// what deploy/npd ships: the selector selects the DaemonSet's pods, the
// check interval is the longest invoke_interval of the monitors the
// DaemonSet runs, and the DaemonSet leaves node-problem-detector's
// heartbeat period at the default DetectorHeartbeatPeriod names (checked
// against the binary's own --help when the test binaries are there). A
// change of any of them must change the default stale threshold with it.
func TestDetectorDefaultsMatchDeploy(t *testing.T) {
	root, err := localcluster.RepoRoot()
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(root, "deploy/npd/daemonset.yaml"))
	require.NoError(t, err)
	var ds appsv1.DaemonSet
	require.NoError(t, yaml.UnmarshalStrict(b, &ds))

	sel, err := labels.Parse(stackhealth.DefaultDetectorSelector)
	require.NoError(t, err)
	require.True(t, sel.Matches(labels.Set(ds.Spec.Template.Labels)), "the default selector selects the DaemonSet's pods")

	var npd []string
	for _, c := range ds.Spec.Template.Spec.Containers {
		if c.Name == "node-problem-detector" {
			npd = append(c.Command, c.Args...)
		}
	}
	require.NotEmpty(t, npd, "node-problem-detector container")
	var monitors []string
	for _, a := range npd {
		require.False(t, strings.HasPrefix(a, "--k8s-exporter-heartbeat-period"),
			"the DaemonSet sets %s: DetectorHeartbeatPeriod and the stale threshold assume NPD's default", a)
		if v, ok := strings.CutPrefix(a, "--config.custom-plugin-monitor="); ok {
			monitors = strings.Split(v, ",")
		}
	}
	require.NotEmpty(t, monitors)

	var longest time.Duration
	for _, m := range monitors {
		f := filepath.Join(root, "deploy/npd", strings.TrimPrefix(m, "/config/"))
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		var cfg struct {
			PluginConfig struct {
				InvokeInterval string `json:"invoke_interval"`
			} `json:"pluginConfig"`
		}
		require.NoError(t, json.Unmarshal(b, &cfg), f)
		d, err := time.ParseDuration(cfg.PluginConfig.InvokeInterval)
		require.NoError(t, err, "%s: invoke_interval", f)
		longest = max(longest, d)
	}
	require.Equal(t, stackhealth.DetectorCheckInterval, longest, "the longest invoke_interval of the monitors the DaemonSet runs")
	require.Equal(t, stackhealth.DetectorHeartbeatPeriod+3*stackhealth.DetectorCheckInterval, stackhealth.DefaultDetectorStaleAfter)

	t.Run("NPD's default heartbeat period", func(t *testing.T) {
		dir, err := localcluster.BinDir()
		if err != nil {
			t.Skipf("no test binaries (%v): NPD's default is not checked", err)
		}
		out, err := exec.Command(filepath.Join(dir, "node-problem-detector"), "--help").CombinedOutput()
		m := regexp.MustCompile(`--k8s-exporter-heartbeat-period duration .*\(default ([0-9a-z.]+)\)`).FindSubmatch(out)
		require.NotNil(t, m, "node-problem-detector --help (%v): %s", err, out)
		d, err := time.ParseDuration(string(m[1]))
		require.NoError(t, err)
		require.Equal(t, stackhealth.DetectorHeartbeatPeriod, d)
	})
}
