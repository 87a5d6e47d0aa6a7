package cli_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const (
	deployedConfig = "../../../deploy/alertbridge/config.yaml"
	gpuLostPayload = "../../../alertbridge/render/testdata/gpu-lost.json"
)

func TestAlertbridgeRender(t *testing.T) {
	code, out, errOut := run("alertbridge", "render", "--config", deployedConfig, "--payload", gpuLostPayload)
	require.Equal(t, 0, code, "stderr:\n%s", errOut)
	require.Empty(t, errOut)
	head := strings.Join([]string{
		"Repo:       acme/gpu-oncall",
		`Key:        gpu-oncall/{alertname="KubemedicGPULost",node="gpu-7"}`,
		"Key hash:   fca8caadfe1bfa78843c58268bfbc5a8",
		"Title:      [critical] KubemedicGPULost on gpu-7",
		"Labels:     kubemedic-alert, severity:critical",
		"Assignees:  alice, bob",
		"Auto-close: yes",
		"Body (",
	}, "\n")
	require.True(t, strings.HasPrefix(out, head), "got:\n%s", out)
	require.Contains(t, out, "### Firing: KubemedicGPULost on `gpu-7`")
	require.Contains(t, out, "| **Reason** | GPUFellOffTheBus |")
	require.Contains(t, out, "[Silence this group in Alertmanager](https://alertmanager.example.com/#/silences/new?filter=")
}

func TestAlertbridgeRenderRoutesAndSkipAutoClose(t *testing.T) {
	dir := t.TempDir()
	cfg := write(t, dir, "alertbridge.yaml", "defaultRepo: acme/gpu-oncall\ndryRun: true\nroutes:\n  - matchers: ['node=\"gpu-7\"']\n    repo: acme/fleet\n    labels: [fleet]\n")
	code, out, errOut := run("alertbridge", "render", "--config", cfg, "--payload", "../../../alertbridge/render/testdata/resolved.json")
	require.Equal(t, 0, code, "stderr:\n%s", errOut)
	require.Contains(t, out, "Repo:       acme/fleet\n")
	require.Contains(t, out, "Labels:     fleet, kubemedic-alert, severity:critical\n")
	require.Contains(t, out, "Assignees:  (none)\n")
	require.Contains(t, out, "Auto-close: no (an alert has the annotation kubemedic_skip_auto_close)\n")
	require.Contains(t, out, "Dry run:    yes")
	require.Contains(t, out, "### Resolved: KubemedicGPULost")
}

func TestAlertbridgeRenderErrors(t *testing.T) {
	dir := t.TempDir()
	badConfig := write(t, dir, "bad.yaml", "defaultRepo: acme/gpu-oncall\nstormGuard:\n  window: 10x\nroutes:\n  - matchers: ['team=~(']\n    repo: acme/storage\n")
	badPayload := write(t, dir, "bad.json", `{"version":"3","receiver":"r","status":"firing","alerts":[{"status":"firing","fingerprint":"f"}]}`)
	failing := write(t, dir, "failing.yaml", "defaultRepo: acme/gpu-oncall\ntemplates:\n  title: '{{ (index .Alerts 1).Status }}'\n")
	missing := filepath.Join(dir, "nope.json")
	for _, tc := range []struct {
		desc      string
		args      []string
		code      int
		stderrHas []string
	}{
		{desc: "bad config names file, line and field", args: []string{"--config", badConfig, "--payload", gpuLostPayload}, code: 1, stderrHas: []string{
			badConfig + `:3: stormGuard.window: must be a duration such as 90s, 10m, 24h or 1d, got "10x"`,
			badConfig + `:5: routes[0].matchers[0]: bad matcher "team=~("`,
		}},
		{desc: "missing config", args: []string{"--config", filepath.Join(dir, "nope.yaml"), "--payload", gpuLostPayload}, code: 1,
			stderrHas: []string{filepath.Join(dir, "nope.yaml") + ": read config: no such file or directory"}},
		{desc: "bad payload names the file", args: []string{"--config", deployedConfig, "--payload", badPayload}, code: 1,
			stderrHas: []string{badPayload + `: payload: version: unsupported version "3" (want "4")`}},
		{desc: "missing payload", args: []string{"--config", deployedConfig, "--payload", missing}, code: 1,
			stderrHas: []string{missing + ": read payload: no such file or directory"}},
		{desc: "template failing on this payload", args: []string{"--config", failing, "--payload", gpuLostPayload}, code: 1,
			stderrHas: []string{gpuLostPayload + `: render issue gpu-oncall/{alertname="KubemedicGPULost",node="gpu-7"}: templates.title: template line 1: does not execute`}},
		{desc: "flags are required", args: []string{"--config", deployedConfig}, code: 2, stderrHas: []string{"both --config FILE and --payload FILE are required"}},
		{desc: "no positional arguments", args: []string{"--config", deployedConfig, "--payload", gpuLostPayload, "extra"}, code: 2, stderrHas: []string{`unknown command "extra"`}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			code, out, errOut := run(append([]string{"alertbridge", "render"}, tc.args...)...)
			require.Equal(t, tc.code, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
			require.Empty(t, out)
			for _, s := range tc.stderrHas {
				require.Contains(t, errOut, s)
			}
		})
	}
}
