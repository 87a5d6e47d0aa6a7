package validation

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestModelFor(t *testing.T) {
	for _, tc := range []struct {
		driverName, want string
	}{
		// shared/fixtures/nvidia-h100-580.159.04/nvidia-smi-q.txt,
		// Product Name.
		{"NVIDIA H100 80GB HBM3", "H100 SXM 80GB"},
		{"  nvidia  h100 80gb   HBM3 ", "H100 SXM 80GB"},
		{"NVIDIA H200", "H200 SXM 141GB"},
		{"NVIDIA H200 141GB HBM3e", "H200 SXM 141GB"},
		// nvbandwidth's device list on an HGX A100, NVIDIA/nvbandwidth
		// issue 34.
		{"NVIDIA A100-SXM4-80GB", "A100 SXM4 80GB"},
		{"NVIDIA A100-SXM4-40GB", "A100 SXM4 40GB"},
		{"NVIDIA L40S", "L40S"},
		// Other form factors have other links: no floor of the SXM
		// part applies.
		{"NVIDIA H100 PCIe", ""},
		{"NVIDIA H100 NVL", ""},
		{"NVIDIA H200 NVL", ""},
		{"NVIDIA A100 80GB PCIe", ""},
		{"NVIDIA H800", ""},
		{"NVIDIA L40", ""},
		{"", ""},
	} {
		t.Run(tc.driverName, func(t *testing.T) {
			m, ok := ModelFor(tc.driverName)
			require.Equal(t, tc.want != "", ok)
			require.Equal(t, tc.want, m.Name)
		})
	}
}

func TestFloor(t *testing.T) {
	for _, tc := range []struct {
		desc, model, name string
		overrides         Floors
		floor             float64
		source            string
		ok                bool
	}{
		{desc: "H100 all-reduce: 80% of NCCL's 370", model: "NVIDIA H100 80GB HBM3", name: FloorNCCLBusBW, floor: 296, source: "H100 SXM 80GB: 80% of 370 GB/s", ok: true},
		{desc: "H200 host to device: 80% of 51.2", model: "NVIDIA H200", name: FloorH2D, floor: 41, source: "H200 SXM 141GB: 80% of 51.2 GB/s", ok: true},
		{desc: "A100 device to device", model: "NVIDIA A100-SXM4-80GB", name: FloorD2D, floor: 192, ok: true, source: "A100 SXM4 80GB: 80% of 240 GB/s"},
		{desc: "A100 all-reduce", model: "NVIDIA A100-SXM4-40GB", name: FloorNCCLBusBW, floor: 196.8, ok: true, source: "A100 SXM4 40GB: 80% of 246 GB/s"},
		{desc: "L40S device to host", model: "NVIDIA L40S", name: FloorD2H, floor: 20.5, ok: true, source: "L40S: 80% of 25.6 GB/s"},
		{desc: "an override wins", model: "NVIDIA H100 80GB HBM3", name: FloorNCCLBusBW, overrides: Floors{FloorNCCLBusBW: 350}, floor: 350, source: "--floor nccl-busbw=350", ok: true},
		{desc: "an override for an unknown model", model: "NVIDIA H800", name: FloorD2D, overrides: Floors{FloorD2D: 150.5}, floor: 150.5, source: "--floor d2d=150.5", ok: true},
		{desc: "an override of another floor does not help", model: "NVIDIA H800", name: FloorH2D, overrides: Floors{FloorD2D: 150}, source: `no h2d floor for "NVIDIA H800": kubemedic knows no such GPU model; set --floor h2d=<GB/s> in the template`},
		{desc: "L40S has no all-reduce floor", model: "NVIDIA L40S", name: FloorNCCLBusBW, source: "no nccl-busbw floor for L40S: what a healthy one reaches depends on the server; set --floor nccl-busbw=<GB/s> in the template"},
		{desc: "mixed models", model: "mixed: NVIDIA H100 80GB HBM3, NVIDIA H200", name: FloorNCCLBusBW, source: `no nccl-busbw floor for "mixed: NVIDIA H100 80GB HBM3, NVIDIA H200"`},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			floor, source, ok := Floor(tc.model, tc.name, tc.overrides)
			require.Equal(t, tc.ok, ok)
			require.Equal(t, tc.floor, floor)
			require.Contains(t, source, tc.source)
		})
	}
}

// TestEveryModelHasHostFloors: each model of the table has its PCIe floors
// and only known floor names.
func TestEveryModelHasHostFloors(t *testing.T) {
	for _, m := range Models() {
		require.NotEmpty(t, m.DriverNames, m.Name)
		require.NotEmpty(t, m.Basis, m.Name)
		for _, n := range []string{FloorH2D, FloorD2H} {
			require.Positive(t, m.Expected[n], "%s %s", m.Name, n)
		}
		for n := range m.Expected {
			require.Contains(t, FloorNames, n, m.Name)
		}
	}
}

func TestParseFloor(t *testing.T) {
	for _, tc := range []struct {
		in, name string
		v        float64
		err      string
	}{
		{in: "nccl-busbw=350", name: FloorNCCLBusBW, v: 350},
		{in: " d2d = 120.5 ", name: FloorD2D, v: 120.5},
		{in: "h2d", err: "want name=GB/s"},
		{in: "busbw=350", err: `unknown name "busbw", want one of nccl-busbw, h2d, d2h, d2d`},
		{in: "h2d=fast", err: `"fast" is not a bandwidth`},
		{in: "h2d=0", err: `"0" is not a bandwidth`},
		{in: "h2d=-3", err: "is not a bandwidth"},
		{in: "h2d=NaN", err: "is not a bandwidth"},
		{in: "h2d=+Inf", err: "is not a bandwidth"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			name, v, err := ParseFloor(tc.in)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.name, name)
			require.Equal(t, tc.v, v)
		})
	}
}

func TestModelName(t *testing.T) {
	h100 := GPU{Name: "NVIDIA H100 80GB HBM3"}
	name, ok := ModelName([]GPU{h100, h100})
	require.True(t, ok)
	require.Equal(t, "NVIDIA H100 80GB HBM3", name)
	name, ok = ModelName([]GPU{h100, {Name: "NVIDIA H200"}})
	require.False(t, ok)
	require.Equal(t, "mixed: NVIDIA H100 80GB HBM3, NVIDIA H200", name)
	_, ok = ModelName(nil)
	require.False(t, ok)
}

func TestVersions(t *testing.T) {
	require.Equal(t, "DCGM 4.2.3, driver 580.82.09", Versions("DCGM", "4.2.3", "driver", "580.82.09"))
	require.Equal(t, "driver 580.82.09", Versions("DCGM", " ", "driver", "580.82.09"))
	require.Equal(t, "", Versions("DCGM", ""))
}

func TestFindingResult(t *testing.T) {
	m := []Measurement{{Name: FloorH2D, Value: 25, Floor: 41}}
	require.Equal(t, GPUResult{UUID: "u", Verdict: VerdictFail, Failed: []string{"h2d", "d2h"}, Detail: "a; b", Measured: m},
		Finding{Failed: []string{"h2d", "d2h"}, Why: []string{"a", "b"}, NoAnswer: "x", Measured: m}.Result("u"), "a failure outweighs no answer")
	require.Equal(t, GPUResult{UUID: "u", Verdict: VerdictNoAnswer, Detail: "x"}, Finding{NoAnswer: "x", Notes: []string{"n"}}.Result("u"))
	require.Equal(t, GPUResult{UUID: "u", Verdict: VerdictPass, Detail: "skipped: pcie; warnings: w"}, Finding{Notes: []string{"skipped: pcie", "warnings: w"}}.Result("u"))
}
