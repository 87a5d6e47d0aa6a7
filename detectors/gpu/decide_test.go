package gpu

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/detectors/plugin"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

var busIDs = []string{"0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0", "0000:9a:00.0", "0000:ab:00.0", "0000:ba:00.0", "0000:db:00.0"}

// healthy is n usable devices, edited by the functions in edit.
func healthy(n int, edit ...func([]Device)) []Device {
	devs := make([]Device, n)
	for i := range devs {
		devs[i] = Device{Index: i, BusID: busIDs[i], VolatileDBE: Count{0, true}, RowRemapPending: Flag{false, true}, RowRemapFailed: Flag{false, true}, RemappedUncorrectable: Count{0, true}}
	}
	for _, e := range edit {
		e(devs)
	}
	return devs
}

func TestDecideLost(t *testing.T) {
	lost := func(i int) func([]Device) {
		return func(d []Device) { d[i].Lost, d[i].Err = true, "GPU is lost" }
	}
	for _, tc := range []struct {
		desc string
		in   LostInput
		want plugin.Result
		warn bool
	}{
		{desc: "all healthy", in: LostInput{Backend: "nvml", Devices: healthy(8), Expected: 8},
			want: plugin.OK("8 of 8 GPUs healthy (nvml)")},
		{desc: "one lost", in: LostInput{Backend: "nvml", Devices: healthy(8, lost(2)), Expected: 8},
			want: plugin.NonOK(v1alpha1.ReasonGPUFellOffBus, "GPU 0000:3a:00.0 is lost (fell off the bus); reboot required")},
		{desc: "three lost", in: LostInput{Devices: healthy(8, lost(7), lost(2), lost(4)), Expected: 8},
			want: plugin.NonOK(v1alpha1.ReasonGPUFellOffBus, "GPU 0000:3a:00.0 (+2 GPUs) fell off the bus; reboot required")},
		{desc: "lost wins over no expected count", in: LostInput{Devices: healthy(8, lost(0)), ExpectedErr: "no label"},
			want: plugin.NonOK(v1alpha1.ReasonGPUFellOffBus, "GPU 0000:18:00.0 is lost (fell off the bus); reboot required")},
		{desc: "lost without bus ID gets the driver's unclaimed one", in: LostInput{Devices: healthy(8, lost(5), func(d []Device) { d[5].BusID = "" }), Driver: busIDs, Expected: 8},
			want: plugin.NonOK(v1alpha1.ReasonGPUFellOffBus, "GPU 0000:ab:00.0 is lost (fell off the bus); reboot required")},
		{desc: "lost without any bus ID", in: LostInput{Devices: healthy(8, lost(5), func(d []Device) { d[5].BusID = "" }), Expected: 8},
			want: plugin.NonOK(v1alpha1.ReasonGPUFellOffBus, "GPU index 5 is lost (fell off the bus); reboot required")},
		{desc: "fewer than expected, driver names the missing one", in: LostInput{Backend: "nvml", Devices: healthy(8)[1:], Driver: busIDs, Expected: 8},
			want: plugin.NonOK(v1alpha1.ReasonGPUCountMismatch, "7 of 8 GPUs visible; missing 0000:18:00.0")},
		{desc: "driver names the missing one without an expected count", in: LostInput{Devices: healthy(8)[:6], Driver: busIDs},
			want: plugin.NonOK(v1alpha1.ReasonGPUCountMismatch, "6 of 8 GPUs visible; missing 0000:ba:00.0 (+1 GPU)")},
		{desc: "unusable device (Unknown Error) is missing", in: LostInput{Devices: healthy(8, func(d []Device) { d[3].Err = "Unknown Error" }), Expected: 8},
			want: plugin.NonOK(v1alpha1.ReasonGPUCountMismatch, "7 of 8 GPUs visible; missing 0000:5d:00.0")},
		{desc: "fewer than expected, no driver dir", in: LostInput{Devices: healthy(7), Expected: 8},
			want: plugin.NonOK(v1alpha1.ReasonGPUCountMismatch, "7 of 8 GPUs visible")},
		{desc: "no devices at all", in: LostInput{Devices: nil, Driver: []string{}, Expected: 8},
			want: plugin.NonOK(v1alpha1.ReasonGPUCountMismatch, "0 of 8 GPUs visible")},
		{desc: "more than expected is OK with a warning", in: LostInput{Backend: "dcgm", Devices: healthy(8), Expected: 4},
			want: plugin.OK("8 GPUs healthy (dcgm), 4 expected"), warn: true},
		{desc: "no expected count", in: LostInput{Backend: "nvml", Devices: healthy(8), Driver: busIDs, ExpectedErr: "node n1 has no nvidia.com/gpu.count label"},
			want: plugin.Unknown("no expected GPU count (8 visible): node n1 has no nvidia.com/gpu.count label")},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, warn := DecideLost(tc.in)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.warn, warn != "")
			if got.Status == plugin.StatusNonOK {
				require.LessOrEqual(t, len(got.Reason+": "+got.Message), plugin.MaxLine)
			}
		})
	}
}

func TestDecideMemory(t *testing.T) {
	th := Thresholds{DBE: 1, RetiredPages: DefaultRetiredPagesLimit}
	set := func(i int, f func(*Device)) func([]Device) { return func(d []Device) { f(&d[i]) } }
	for _, tc := range []struct {
		desc string
		devs []Device
		th   Thresholds
		want plugin.Result
	}{
		{desc: "healthy", devs: healthy(8), th: th, want: plugin.OK("8 GPUs without memory faults (nvml)")},
		{desc: "all N/A is not a fault", devs: []Device{{Index: 0, BusID: busIDs[0]}}, th: th, want: plugin.OK("1 GPU without memory faults (nvml)")},
		{desc: "volatile DBE", devs: healthy(8, set(4, func(d *Device) { d.VolatileDBE.Value = 3 })), th: th,
			want: plugin.NonOK(v1alpha1.ReasonVolatileDBE, "volatile DBE on 0000:9a:00.0; reset GPU")},
		{desc: "volatile DBE below a raised threshold", devs: healthy(8, set(4, func(d *Device) { d.VolatileDBE.Value = 3 })), th: Thresholds{DBE: 4},
			want: plugin.OK("8 GPUs without memory faults (nvml)")},
		{desc: "DBE threshold 0 is off", devs: healthy(8, set(4, func(d *Device) { d.VolatileDBE.Value = 3 })), th: Thresholds{},
			want: plugin.OK("8 GPUs without memory faults (nvml)")},
		{desc: "row remap pending on three", devs: healthy(8,
			set(6, func(d *Device) { d.RowRemapPending.Value = true }),
			set(1, func(d *Device) { d.RowRemapPending.Value = true }),
			set(3, func(d *Device) { d.RowRemapPending.Value = true })), th: th,
			want: plugin.NonOK(v1alpha1.ReasonRowRemapPending, "row remap pending on 0000:2a:00.0 (+2 GPUs); reset GPU")},
		{desc: "remap failed beats pending and DBE", devs: healthy(8,
			set(1, func(d *Device) { d.RowRemapPending.Value = true; d.VolatileDBE.Value = 1 }),
			set(5, func(d *Device) { d.RowRemapFailed.Value = true })), th: th,
			want: plugin.NonOK(v1alpha1.ReasonRowRemapFailed, "row remap failed on 0000:ab:00.0; replace GPU")},
		{desc: "retired page limit beats retired pending", devs: healthy(8,
			set(1, func(d *Device) { d.RetiredPagesPending = Flag{true, true} }),
			set(6, func(d *Device) { d.RetiredPages = Count{61, true} })), th: th,
			want: plugin.NonOK(v1alpha1.ReasonRetiredPageLimit, "60+ retired pages on 0000:ba:00.0; replace GPU")},
		{desc: "retired pages under the limit", devs: healthy(8, set(6, func(d *Device) { d.RetiredPages = Count{59, true} })), th: th,
			want: plugin.OK("8 GPUs without memory faults (nvml)")},
		{desc: "retired pages pending", devs: healthy(8, set(1, func(d *Device) { d.RetiredPagesPending = Flag{true, true} })), th: th,
			want: plugin.NonOK(v1alpha1.ReasonRetiredPagesPending, "retired pages pending on 0000:2a:00.0; reset GPU")},
		{desc: "lost GPU is Unknown", devs: healthy(8, set(2, func(d *Device) { d.Lost, d.Err = true, "GPU is lost" })), th: th,
			want: plugin.Unknown("cannot read 0000:3a:00.0: GPU is lost")},
		{desc: "unreadable counters are Unknown", devs: healthy(8, set(2, func(d *Device) { d.ReadErr = "volatile ECC: ERROR_UNKNOWN" }), set(3, func(d *Device) { d.Err = "x" })), th: th,
			want: plugin.Unknown("cannot read 0000:3a:00.0 (+1 GPU): volatile ECC: ERROR_UNKNOWN")},
		{desc: "a fault beats an unreadable GPU", devs: healthy(8, set(2, func(d *Device) { d.Lost = true }), set(3, func(d *Device) { d.VolatileDBE.Value = 1 })), th: th,
			want: plugin.NonOK(v1alpha1.ReasonVolatileDBE, "volatile DBE on 0000:5d:00.0; reset GPU")},
		{desc: "no devices is Unknown", devs: nil, th: th, want: plugin.Unknown("no GPUs visible (nvml)")},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got := DecideMemory("nvml", tc.devs, tc.th)
			require.Equal(t, tc.want, got)
			if got.Status == plugin.StatusNonOK {
				require.LessOrEqual(t, len(got.Reason+": "+got.Message), plugin.MaxLine)
				require.Regexp(t, `\b([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\b`, got.Line())
			}
		})
	}
}

// Every NonOK message, with the most GPUs affected, fits NPD's 80 bytes.
func TestMessagesFit(t *testing.T) {
	all := func(f func(*Device)) []Device {
		devs := healthy(8)
		for i := range devs {
			f(&devs[i])
		}
		return devs
	}
	th := Thresholds{DBE: 1, RetiredPages: 60}
	for _, devs := range [][]Device{
		all(func(d *Device) { d.RowRemapFailed.Value = true }),
		all(func(d *Device) { d.RetiredPages = Count{64, true} }),
		all(func(d *Device) { d.RowRemapPending.Value = true }),
		all(func(d *Device) { d.RetiredPagesPending = Flag{true, true} }),
		all(func(d *Device) { d.VolatileDBE.Value = 9 }),
	} {
		r := DecideMemory("nvml", devs, th)
		require.Equal(t, plugin.StatusNonOK, r.Status)
		require.LessOrEqual(t, len(r.Reason+": "+r.Message), plugin.MaxLine, r.Message)
	}
	r, _ := DecideLost(LostInput{Devices: all(func(d *Device) { d.Lost = true }), Expected: 8})
	require.LessOrEqual(t, len(r.Reason+": "+r.Message), plugin.MaxLine, r.Message)
	r, _ = DecideLost(LostInput{Devices: nil, Driver: busIDs, Expected: 8})
	require.LessOrEqual(t, len(r.Reason+": "+r.Message), plugin.MaxLine, r.Message)
}
