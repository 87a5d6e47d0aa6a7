package gpu

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/detectors/gpuaction"
	"github.com/kubemedic/kubemedic/detectors/plugin"
	"github.com/kubemedic/kubemedic/internal/gpuwire"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

func TestDecideRecovery(t *testing.T) {
	busRe := templateBusRegex(t)
	set := func(i int, f func(*Device)) func([]Device) { return func(d []Device) { f(&d[i]) } }
	asks := func(a gpuaction.Action) func(*Device) {
		return func(d *Device) { d.RecoveryAction = Recovery{Action: a, Known: true} }
	}
	// none is healthy(8) with every GPU's action read as None.
	none := func(mods ...func([]Device)) []Device {
		return healthy(8, append([]func([]Device){func(ds []Device) {
			for i := range ds {
				ds[i].RecoveryAction = Recovery{Action: gpuaction.None, Known: true}
			}
		}}, mods...)...)
	}
	unsupported := func(d *Device) {
		d.RecoveryAction = Recovery{}
		d.Unsupported = append(d.Unsupported, SignalRecoveryAction)
	}
	for _, tc := range []struct {
		desc string
		devs []Device
		want plugin.Result
	}{
		{desc: "healthy: the driver asks nothing", devs: none(), want: plugin.OK("8 GPUs, the driver asks no recovery (nvml)")},
		{desc: "reset", devs: none(set(4, asks(gpuaction.GPUReset))),
			want: plugin.NonOK(v1alpha1.ReasonResetRequired, "driver asks to reset the GPU: GPU reset on 0000:9a:00.0 (GPU-6b0d549b-6f03-675a-1600-a35a099950d8)")},
		{desc: "reboot", devs: none(set(4, asks(gpuaction.NodeReboot))),
			want: plugin.NonOK(v1alpha1.ReasonRebootRequired, "driver asks to reboot the node: node reboot on 0000:9a:00.0 (GPU-6b0d549b-6f03-675a-1600-a35a099950d8)")},
		{desc: "drain P2P", devs: none(set(4, asks(gpuaction.DrainP2P))),
			want: plugin.NonOK(v1alpha1.ReasonDrainP2P, "driver asks to drain its peer-to-peer work: drain P2P on 0000:9a:00.0 (GPU-6b0d549b-6f03-675a-1600-a35a099950d8)")},
		{desc: "drain and reset", devs: none(set(4, asks(gpuaction.DrainAndReset))),
			want: plugin.NonOK(v1alpha1.ReasonDrainAndReset, "driver asks to drain and reset the GPU: drain and reset on 0000:9a:00.0 (GPU-6b0d549b-6f03-675a-1600-a35a099950d8)")},
		{desc: "recover the IMEX domain (NVML 5)", devs: none(set(4, asks(gpuaction.RecoverIMEXDomain))),
			want: plugin.NonOK(v1alpha1.ReasonIMEXDomainRecovery, "driver asks to recover its IMEX domain: recover IMEX domain on 0000:9a:00.0 (GPU-6b0d549b-6f03-675a-1600-a35a099950d8)")},
		{desc: "bus reset (NVML 6)", devs: none(set(4, asks(gpuaction.BusReset))),
			want: plugin.NonOK(v1alpha1.ReasonBusResetRequired, "driver asks to reset the GPU's PCIe bus: bus reset on 0000:9a:00.0 (GPU-6b0d549b-6f03-675a-1600-a35a099950d8)")},
		{desc: "system reboot (NVML 7) is a reboot", devs: none(set(4, asks(gpuaction.SystemReboot))),
			want: plugin.NonOK(v1alpha1.ReasonRebootRequired, "driver asks to reboot the system: system reboot on 0000:9a:00.0 (GPU-6b0d549b-6f03-675a-1600-a35a099950d8)")},
		{desc: "a bus reset covers a drain and reset; IMEX ranks last", devs: none(set(1, asks(gpuaction.RecoverIMEXDomain)), set(2, asks(gpuaction.DrainAndReset)), set(4, asks(gpuaction.BusReset))),
			want: plugin.NonOK(v1alpha1.ReasonBusResetRequired, "driver asks to reset the GPU's PCIe bus: bus reset on 0000:9a:00.0 (GPU-6b0d549b-6f03-675a-1600-a35a099950d8)")},
		{desc: "a reboot on one GPU covers a reset on another", devs: none(set(1, asks(gpuaction.GPUReset)), set(4, asks(gpuaction.NodeReboot))),
			want: plugin.NonOK(v1alpha1.ReasonRebootRequired, "driver asks to reboot the node: node reboot on 0000:9a:00.0 (GPU-6b0d549b-6f03-675a-1600-a35a099950d8)")},
		{desc: "two resets: the first by bus ID, the other counted", devs: none(set(4, asks(gpuaction.GPUReset)), set(1, asks(gpuaction.GPUReset))),
			want: plugin.NonOK(v1alpha1.ReasonResetRequired, "driver asks to reset the GPU: GPU reset on 0000:2a:00.0 (GPU-d23f0824-128b-2f33-0c5c-7fd0a6a3a450) (+1 GPU)")},
		{desc: "a GSP fault: every ECC counter 0, the driver still asks", devs: none(set(2, func(d *Device) {
			d.VolatileDBE, d.RowRemapPending = Count{0, true}, Flag{false, true}
			asks(gpuaction.GPUReset)(d)
		})), want: plugin.NonOK(v1alpha1.ReasonResetRequired, "driver asks to reset the GPU: GPU reset on 0000:3a:00.0 (GPU-9531985d-5d9d-c9f8-1818-e811892f902b)")},
		{desc: "an older driver without the field is judged OK, saying so", devs: none(func(ds []Device) {
			for i := range ds {
				unsupported(&ds[i])
			}
		}), want: plugin.OK("8 GPUs; the driver reports no recovery action (not supported) (nvml)")},
		{desc: "some GPUs without the field", devs: none(set(3, unsupported)), want: plugin.OK("8 GPUs, the driver asks no recovery (1 do not report it) (nvml)")},
		{desc: "a supported field that cannot be read is Unknown", devs: none(set(2, func(d *Device) {
			d.RecoveryAction = Recovery{}
			d.ReadErr = "recovery action: ERROR_UNKNOWN"
		})), want: plugin.Unknown("cannot read the recovery action of 0000:3a:00.0: recovery action: ERROR_UNKNOWN")},
		{desc: "a lost GPU is Unknown, not healthy", devs: none(set(2, func(d *Device) { d.Lost, d.Err = true, "GPU is lost" })),
			want: plugin.Unknown("cannot read the recovery action of 0000:3a:00.0: GPU is lost")},
		{desc: "an action this code does not know is not health", devs: none(set(2, asks(gpuaction.Action(8)))),
			want: plugin.Unknown("cannot read the recovery action of 0000:3a:00.0: recovery action unknown action 8")},
		{desc: "a fault on one GPU beats another unreadable", devs: none(set(2, func(d *Device) { d.Lost = true }), set(5, asks(gpuaction.GPUReset))),
			want: plugin.NonOK(v1alpha1.ReasonResetRequired, "driver asks to reset the GPU: GPU reset on 0000:ab:00.0 (GPU-8d116ece-1738-f7d9-3d9c-172411e20b8f)")},
		{desc: "no devices is Unknown", devs: nil, want: plugin.Unknown("no GPUs visible (nvml)")},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got := DecideRecovery("nvml", tc.devs)
			require.Equal(t, tc.want, got)
			if got.Status == plugin.StatusNonOK {
				line := got.Line()
				require.Equal(t, got.Reason+": "+got.Message, line, "cut")
				m := busRe.FindStringSubmatch(line)
				require.NotNil(t, m, line)
				bus, uuid := gpuwire.GPUFromMessage(line)
				require.Equal(t, m[1], bus)
				require.NotEmpty(t, uuid)
			}
		})
	}
}
