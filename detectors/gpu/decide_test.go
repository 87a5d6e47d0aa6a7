package gpu

import (
	"fmt"
	"math"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/detectors/plugin"
	"github.com/kubemedic/kubemedic/internal/gpuwire"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/test/testsupport"
)

var busIDs = []string{"0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0", "0000:9a:00.0", "0000:ab:00.0", "0000:ba:00.0", "0000:db:00.0"}

// uuids are the devices' UUIDs (random, in the form NVML prints).
var uuids = []string{
	"GPU-6513270e-269e-0d37-f2a7-4de452e6b438",
	"GPU-d23f0824-128b-2f33-0c5c-7fd0a6a3a450",
	"GPU-9531985d-5d9d-c9f8-1818-e811892f902b",
	"GPU-36f675cc-81e7-4ef5-e8e2-5d940ed90475",
	"GPU-6b0d549b-6f03-675a-1600-a35a099950d8",
	"GPU-8d116ece-1738-f7d9-3d9c-172411e20b8f",
	"GPU-90c192cf-d3ac-94af-0f21-ddb66cad4a26",
	"GPU-a170b338-3926-3059-f28c-105d1fb17c23",
}

// healthy is n usable devices, edited by the functions in edit.
func healthy(n int, edit ...func([]Device)) []Device {
	devs := make([]Device, n)
	for i := range devs {
		devs[i] = Device{Index: i, BusID: busIDs[i], UUID: uuids[i], VolatileDBE: Count{0, true}, RowRemapPending: Flag{false, true}, RowRemapFailed: Flag{false, true}, RemappedUncorrectable: Count{0, true}}
	}
	for _, e := range edit {
		e(devs)
	}
	return devs
}

// requireNamesOneGPU: the bus ID the reset-gpu template takes from line
// and the UUID gpuwire.GPUFromMessage takes are the same device's (the
// UUID absent when the device has none).
func requireNamesOneGPU(t *testing.T, busRe *regexp.Regexp, line string, devs []Device) {
	t.Helper()
	bus, uuid := gpuwire.GPUFromMessage(line)
	if m := busRe.FindStringSubmatch(line); m != nil {
		require.Equal(t, m[1], bus, line)
	}
	for _, d := range devs {
		if bus != "" && d.BusID == bus {
			want, _ := normalizeUUID(d.UUID)
			require.Equal(t, want, uuid, line)
			return
		}
	}
	require.Empty(t, uuid, "a UUID without its device's bus ID: %s", line)
}

func TestDecideLost(t *testing.T) {
	busRe := templateBusRegex(t)
	lost := func(i int) func([]Device) {
		return func(d []Device) { d[i].Lost, d[i].Err = true, "GPU is lost" }
	}
	// NVML gets neither bus ID nor UUID of a GPU whose PCI info fails.
	noIDs := func(i int) func([]Device) {
		return func(d []Device) { d[i].BusID, d[i].UUID = "", "" }
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
			want: plugin.NonOK(v1alpha1.ReasonGPUFellOffBus, "GPU 0000:3a:00.0 (GPU-9531985d-5d9d-c9f8-1818-e811892f902b) is lost (fell off the bus); reboot required")},
		{desc: "lost without a UUID (NVML get handle failed)", in: LostInput{Backend: "nvml", Devices: healthy(8, lost(2), func(d []Device) { d[2].UUID = "" }), Expected: 8},
			want: plugin.NonOK(v1alpha1.ReasonGPUFellOffBus, "GPU 0000:3a:00.0 is lost (fell off the bus); reboot required")},
		{desc: "an error in the UUID field is left out", in: LostInput{Backend: "nvidia-smi", Devices: healthy(8, lost(2), func(d []Device) { d[2].UUID = "[GPU is lost]" }), Expected: 8},
			want: plugin.NonOK(v1alpha1.ReasonGPUFellOffBus, "GPU 0000:3a:00.0 is lost (fell off the bus); reboot required")},
		{desc: "three lost", in: LostInput{Devices: healthy(8, lost(7), lost(2), lost(4)), Expected: 8},
			want: plugin.NonOK(v1alpha1.ReasonGPUFellOffBus, "GPU 0000:3a:00.0 (GPU-9531985d-5d9d-c9f8-1818-e811892f902b) (+2 GPUs) fell off the bus; reboot required")},
		{desc: "lost wins over no expected count", in: LostInput{Devices: healthy(8, lost(0)), ExpectedErr: "no label"},
			want: plugin.NonOK(v1alpha1.ReasonGPUFellOffBus, "GPU 0000:18:00.0 (GPU-6513270e-269e-0d37-f2a7-4de452e6b438) is lost (fell off the bus); reboot required")},
		{desc: "lost without bus ID gets the driver's unclaimed one", in: LostInput{Devices: healthy(8, lost(5), noIDs(5)), Driver: busIDs, Expected: 8},
			want: plugin.NonOK(v1alpha1.ReasonGPUFellOffBus, "GPU 0000:ab:00.0 is lost (fell off the bus); reboot required")},
		{desc: "lost without any bus ID", in: LostInput{Devices: healthy(8, lost(5), noIDs(5)), Expected: 8},
			want: plugin.NonOK(v1alpha1.ReasonGPUFellOffBus, "GPU index 5 is lost (fell off the bus); reboot required")},
		{desc: "fewer than expected, driver names the missing one", in: LostInput{Backend: "nvml", Devices: healthy(8)[1:], Driver: busIDs, Expected: 8},
			want: plugin.NonOK(v1alpha1.ReasonGPUCountMismatch, "7 of 8 GPUs visible; missing 0000:18:00.0")},
		{desc: "driver names the missing one without an expected count", in: LostInput{Devices: healthy(8)[:6], Driver: busIDs},
			want: plugin.NonOK(v1alpha1.ReasonGPUCountMismatch, "6 of 8 GPUs visible; missing 0000:ba:00.0 (+1 GPU)")},
		{desc: "unusable device (Unknown Error) is missing", in: LostInput{Devices: healthy(8, func(d []Device) { d[3].Err = "Unknown Error" }), Expected: 8},
			want: plugin.NonOK(v1alpha1.ReasonGPUCountMismatch, "7 of 8 GPUs visible; missing 0000:5d:00.0 (GPU-36f675cc-81e7-4ef5-e8e2-5d940ed90475)")},
		{desc: "the first missing by bus ID: the driver's before an unusable one", in: LostInput{Devices: healthy(8, func(d []Device) { d[3].Err = "Unknown Error" })[1:], Driver: busIDs, Expected: 8},
			want: plugin.NonOK(v1alpha1.ReasonGPUCountMismatch, "6 of 8 GPUs visible; missing 0000:18:00.0 (+1 GPU)")},
		{desc: "the first missing by bus ID: an unusable one before the driver's", in: LostInput{Devices: healthy(8, func(d []Device) { d[3].Err = "Unknown Error" })[:7], Driver: busIDs, Expected: 8},
			want: plugin.NonOK(v1alpha1.ReasonGPUCountMismatch, "6 of 8 GPUs visible; missing 0000:5d:00.0 (GPU-36f675cc-81e7-4ef5-e8e2-5d940ed90475) (+1 GPU)")},
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
				requireNamesOneGPU(t, busRe, got.Line(), tc.in.Devices)
			}
		})
	}
}

func TestDecideMemory(t *testing.T) {
	busRe := templateBusRegex(t)
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
			want: plugin.NonOK(v1alpha1.ReasonVolatileDBE, "volatile DBE on 0000:9a:00.0 (GPU-6b0d549b-6f03-675a-1600-a35a099950d8); reset GPU")},
		{desc: "no UUID: the bus ID alone", devs: healthy(8, set(4, func(d *Device) { d.VolatileDBE.Value = 3; d.UUID = "" })), th: th,
			want: plugin.NonOK(v1alpha1.ReasonVolatileDBE, "volatile DBE on 0000:9a:00.0; reset GPU")},
		{desc: "an N/A UUID is left out", devs: healthy(8, set(4, func(d *Device) { d.VolatileDBE.Value = 3; d.UUID = "[N/A]" })), th: th,
			want: plugin.NonOK(v1alpha1.ReasonVolatileDBE, "volatile DBE on 0000:9a:00.0; reset GPU")},
		{desc: "volatile DBE below a raised threshold", devs: healthy(8, set(4, func(d *Device) { d.VolatileDBE.Value = 3 })), th: Thresholds{DBE: 4},
			want: plugin.OK("8 GPUs without memory faults (nvml)")},
		{desc: "DBE threshold 0 is off", devs: healthy(8, set(4, func(d *Device) { d.VolatileDBE.Value = 3 })), th: Thresholds{},
			want: plugin.OK("8 GPUs without memory faults (nvml)")},
		{desc: "row remap pending on three", devs: healthy(8,
			set(6, func(d *Device) { d.RowRemapPending.Value = true }),
			set(1, func(d *Device) { d.RowRemapPending.Value = true }),
			set(3, func(d *Device) { d.RowRemapPending.Value = true })), th: th,
			want: plugin.NonOK(v1alpha1.ReasonRowRemapPending, "row remap pending on 0000:2a:00.0 (GPU-d23f0824-128b-2f33-0c5c-7fd0a6a3a450) (+2 GPUs); reset GPU")},
		{desc: "remap failed beats pending and DBE", devs: healthy(8,
			set(1, func(d *Device) { d.RowRemapPending.Value = true; d.VolatileDBE.Value = 1 }),
			set(5, func(d *Device) { d.RowRemapFailed.Value = true })), th: th,
			want: plugin.NonOK(v1alpha1.ReasonRowRemapFailed, "row remap failed on 0000:ab:00.0 (GPU-8d116ece-1738-f7d9-3d9c-172411e20b8f); replace GPU")},
		{desc: "retired page limit beats retired pending", devs: healthy(8,
			set(1, func(d *Device) { d.RetiredPagesPending = Flag{true, true} }),
			set(6, func(d *Device) { d.RetiredPages = Count{61, true} })), th: th,
			want: plugin.NonOK(v1alpha1.ReasonRetiredPageLimit, "60+ retired pages on 0000:ba:00.0 (GPU-90c192cf-d3ac-94af-0f21-ddb66cad4a26); replace GPU")},
		{desc: "retired pages under the limit", devs: healthy(8, set(6, func(d *Device) { d.RetiredPages = Count{59, true} })), th: th,
			want: plugin.OK("8 GPUs without memory faults (nvml)")},
		{desc: "retired pages pending", devs: healthy(8, set(1, func(d *Device) { d.RetiredPagesPending = Flag{true, true} })), th: th,
			want: plugin.NonOK(v1alpha1.ReasonRetiredPagesPending, "retired pages pending on 0000:2a:00.0 (GPU-d23f0824-128b-2f33-0c5c-7fd0a6a3a450); reset GPU")},
		// The driver's own verdict (issue 19).
		{desc: "unrepairable memory replaces, even with every counter at 0", devs: healthy(8, set(5, func(d *Device) { d.UnrepairableMemory = Flag{true, true} })), th: th,
			want: plugin.NonOK(v1alpha1.ReasonUnrepairableMemory, "memory unrepairable on 0000:ab:00.0 (GPU-8d116ece-1738-f7d9-3d9c-172411e20b8f); replace GPU")},
		{desc: "SRAM threshold replaces", devs: healthy(8, set(5, func(d *Device) { d.SRAMThresholdExceeded = Flag{true, true} })), th: th,
			want: plugin.NonOK(v1alpha1.ReasonSRAMThresholdExceeded, "SRAM error threshold exceeded on 0000:ab:00.0 (GPU-8d116ece-1738-f7d9-3d9c-172411e20b8f); replace GPU")},
		{desc: "a remap failure is reported before the driver's unrepairable flag", devs: healthy(8,
			set(5, func(d *Device) { d.UnrepairableMemory = Flag{true, true} }), set(1, func(d *Device) { d.RowRemapFailed = Flag{true, true} })), th: th,
			want: plugin.NonOK(v1alpha1.ReasonRowRemapFailed, "row remap failed on 0000:2a:00.0 (GPU-d23f0824-128b-2f33-0c5c-7fd0a6a3a450); replace GPU")},
		{desc: "a replace reason beats a pending repair", devs: healthy(8,
			set(1, func(d *Device) { d.ChannelRepairPending = Flag{true, true} }), set(5, func(d *Device) { d.SRAMThresholdExceeded = Flag{true, true} })), th: th,
			want: plugin.NonOK(v1alpha1.ReasonSRAMThresholdExceeded, "SRAM error threshold exceeded on 0000:ab:00.0 (GPU-8d116ece-1738-f7d9-3d9c-172411e20b8f); replace GPU")},
		{desc: "channel repair pending resets", devs: healthy(8, set(1, func(d *Device) { d.ChannelRepairPending = Flag{true, true} })), th: th,
			want: plugin.NonOK(v1alpha1.ReasonRepairPending, "channel or TPC repair pending on 0000:2a:00.0 (GPU-d23f0824-128b-2f33-0c5c-7fd0a6a3a450); reset GPU")},
		{desc: "TPC repair pending resets", devs: healthy(8, set(1, func(d *Device) { d.TPCRepairPending = Flag{true, true} })), th: th,
			want: plugin.NonOK(v1alpha1.ReasonRepairPending, "channel or TPC repair pending on 0000:2a:00.0 (GPU-d23f0824-128b-2f33-0c5c-7fd0a6a3a450); reset GPU")},
		{desc: "a row remap pending is reported before a pending repair", devs: healthy(8,
			set(1, func(d *Device) { d.TPCRepairPending = Flag{true, true} }), set(5, func(d *Device) { d.RowRemapPending = Flag{true, true} })), th: th,
			want: plugin.NonOK(v1alpha1.ReasonRowRemapPending, "row remap pending on 0000:ab:00.0 (GPU-8d116ece-1738-f7d9-3d9c-172411e20b8f); reset GPU")},
		{desc: "signals a GPU does not support are not faults", devs: healthy(8, set(1, func(d *Device) {
			d.UnrepairableMemory, d.SRAMThresholdExceeded, d.ChannelRepairPending = Flag{true, false}, Flag{true, false}, Flag{true, false}
			d.Unsupported = []string{"unrepairable memory", "SRAM threshold", "repair status"}
		})), th: th, want: plugin.OK("8 GPUs without memory faults (nvml)")},
		{desc: "banks without spare rows are not a fault, and are said", devs: healthy(8, set(1, func(d *Device) { d.BanksWithoutSpareRows = Count{3, true} })), th: th,
			want: plugin.OK("8 GPUs without memory faults (nvml); 3 banks without spare rows on 0000:2a:00.0 (GPU-d23f0824-128b-2f33-0c5c-7fd0a6a3a450)")},
		{desc: "banks without spare rows on two GPUs", devs: healthy(8, set(5, func(d *Device) { d.BanksWithoutSpareRows = Count{1, true} }),
			set(1, func(d *Device) { d.BanksWithoutSpareRows = Count{2, true} })), th: th,
			want: plugin.OK("8 GPUs without memory faults (nvml); 2 banks without spare rows on 0000:2a:00.0 (GPU-d23f0824-128b-2f33-0c5c-7fd0a6a3a450) (+1 GPUs)")},
		{desc: "a supported signal that cannot be read is Unknown", devs: healthy(8, set(2, func(d *Device) { d.ReadErr = "repair status: ERROR_UNKNOWN" })), th: th,
			want: plugin.Unknown("cannot read 0000:3a:00.0: repair status: ERROR_UNKNOWN")},
		{desc: "lost GPU is Unknown", devs: healthy(8, set(2, func(d *Device) { d.Lost, d.Err = true, "GPU is lost" })), th: th,
			want: plugin.Unknown("cannot read 0000:3a:00.0: GPU is lost")},
		{desc: "unreadable counters are Unknown", devs: healthy(8, set(2, func(d *Device) { d.ReadErr = "volatile ECC: ERROR_UNKNOWN" }), set(3, func(d *Device) { d.Err = "x" })), th: th,
			want: plugin.Unknown("cannot read 0000:3a:00.0 (+1 GPU): volatile ECC: ERROR_UNKNOWN")},
		{desc: "a fault beats an unreadable GPU", devs: healthy(8, set(2, func(d *Device) { d.Lost = true }), set(3, func(d *Device) { d.VolatileDBE.Value = 1 })), th: th,
			want: plugin.NonOK(v1alpha1.ReasonVolatileDBE, "volatile DBE on 0000:5d:00.0 (GPU-36f675cc-81e7-4ef5-e8e2-5d940ed90475); reset GPU")},
		{desc: "no devices is Unknown", devs: nil, th: th, want: plugin.Unknown("no GPUs visible (nvml)")},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got := DecideMemory("nvml", tc.devs, tc.th)
			require.Equal(t, tc.want, got)
			if got.Status == plugin.StatusNonOK {
				require.LessOrEqual(t, len(got.Reason+": "+got.Message), plugin.MaxLine)
				require.NotNil(t, busRe.FindStringSubmatch(got.Line()), got.Line())
				requireNamesOneGPU(t, busRe, got.Line(), tc.devs)
			}
		})
	}
}

// Every NonOK message fits the line whole in the worst case: 16 GPUs
// affected, 8-digit PCI domains, every UUID known, the largest retired-page
// limit. The template takes the first GPU's bus ID and GPUFromMessage its
// bus ID and UUID, never another GPU's.
func TestMessagesFit(t *testing.T) {
	busRe := templateBusRegex(t)
	all := func(f func(*Device)) []Device {
		devs := make([]Device, 16)
		for i := range devs {
			devs[i] = Device{Index: i, BusID: fmt.Sprintf("ffff%04x:%02x:1f.7", i, 0xf0+i), UUID: fmt.Sprintf("GPU-%08x-ffff-ffff-ffff-ffffffffffff", i)}
			f(&devs[i])
		}
		return devs
	}
	first := all(func(*Device) {})[0]
	th := Thresholds{DBE: 1, RetiredPages: math.MaxUint64}
	check := func(t *testing.T, r plugin.Result) {
		t.Helper()
		require.Equal(t, plugin.StatusNonOK, r.Status)
		line := r.Line()
		require.Equal(t, r.Reason+": "+r.Message, line, "cut")
		require.LessOrEqual(t, len(line), plugin.MaxLine)
		require.Equal(t, first.BusID, busRe.FindStringSubmatch(line)[1], line)
		bus, uuid := gpuwire.GPUFromMessage(line)
		require.Equal(t, first.BusID, bus, line)
		require.Equal(t, first.UUID, uuid, line)
	}
	for _, devs := range [][]Device{
		all(func(d *Device) { d.RowRemapFailed = Flag{true, true} }),
		all(func(d *Device) { d.RetiredPages = Count{math.MaxUint64, true} }),
		all(func(d *Device) { d.RowRemapPending = Flag{true, true} }),
		all(func(d *Device) { d.RetiredPagesPending = Flag{true, true} }),
		all(func(d *Device) { d.VolatileDBE = Count{9, true} }),
		all(func(d *Device) { d.UnrepairableMemory = Flag{true, true} }),
		all(func(d *Device) { d.SRAMThresholdExceeded = Flag{true, true} }),
		all(func(d *Device) { d.TPCRepairPending = Flag{true, true} }),
	} {
		r := DecideMemory("nvml", devs, th)
		t.Run(r.Reason, func(t *testing.T) { check(t, r) })
	}
	r, _ := DecideLost(LostInput{Devices: all(func(d *Device) { d.Lost = true }), Expected: 16})
	t.Run("lost", func(t *testing.T) { check(t, r) })
	r, _ = DecideLost(LostInput{Devices: all(func(d *Device) { d.Err = "Unknown Error" }), Expected: 16})
	t.Run("missing", func(t *testing.T) { check(t, r) })
}

// The message names a GPU the same way while the fault lasts, whatever
// the counters do: no count in it moves with them.
func TestMemoryMessageIsStable(t *testing.T) {
	th := Thresholds{DBE: 1, RetiredPages: DefaultRetiredPagesLimit}
	for _, rule := range []struct {
		desc string
		set  func(d *Device, n uint64)
	}{
		{"volatile DBE", func(d *Device, n uint64) { d.VolatileDBE.Value = n }},
		{"retired pages", func(d *Device, n uint64) { d.RetiredPages = Count{DefaultRetiredPagesLimit + n, true} }},
		{"row remap failed", func(d *Device, n uint64) { d.RowRemapFailed.Value, d.RemappedUncorrectable.Value = true, n }},
		{"row remap pending", func(d *Device, n uint64) { d.RowRemapPending.Value, d.RemappedUncorrectable.Value = true, n }},
	} {
		t.Run(rule.desc, func(t *testing.T) {
			var lines []string
			for _, n := range []uint64{1, 2, 1000} {
				r := DecideMemory("nvml", healthy(8, func(d []Device) { rule.set(&d[3], n) }), th)
				require.Equal(t, plugin.StatusNonOK, r.Status)
				lines = append(lines, r.Line())
			}
			require.Equal(t, []string{lines[0], lines[0], lines[0]}, lines)
			require.Contains(t, lines[0], busIDs[3]+" ("+uuids[3]+")")
		})
	}
}

func TestNameAndUUID(t *testing.T) {
	for _, tc := range []struct {
		desc, uuid, want string
	}{
		{"NVML's form", "GPU-179b83e0-c021-1d8e-a043-c3b3abb37ced", "0000:3b:00.0 (GPU-179b83e0-c021-1d8e-a043-c3b3abb37ced)"},
		{"upper-case hex is lowered", "GPU-179B83E0-C021-1D8E-A043-C3B3ABB37CED", "0000:3b:00.0 (GPU-179b83e0-c021-1d8e-a043-c3b3abb37ced)"},
		{"white space is trimmed", " GPU-179b83e0-c021-1d8e-a043-c3b3abb37ced ", "0000:3b:00.0 (GPU-179b83e0-c021-1d8e-a043-c3b3abb37ced)"},
		{"none", "", "0000:3b:00.0"},
		{"N/A", "[N/A]", "0000:3b:00.0"},
		{"an error", "[Unknown Error]", "0000:3b:00.0"},
		{"a MIG UUID is not the GPU's", "MIG-179b83e0-c021-1d8e-a043-c3b3abb37ced", "0000:3b:00.0"},
		{"lower-case prefix", "gpu-179b83e0-c021-1d8e-a043-c3b3abb37ced", "0000:3b:00.0"},
		{"a hyphen out of place", "GPU-179b83e0c-021-1d8e-a043-c3b3abb37ced", "0000:3b:00.0"},
		{"not hex", "GPU-179b83e0-c021-1d8e-a043-c3b3abb37cez", "0000:3b:00.0"},
		{"too short", "GPU-179b83e0-c021-1d8e-a043-c3b3abb37ce", "0000:3b:00.0"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			require.Equal(t, tc.want, Device{BusID: "0000:3b:00.0", UUID: tc.uuid}.nameAndUUID())
		})
	}
	require.Equal(t, "index 5 (GPU-179b83e0-c021-1d8e-a043-c3b3abb37ced)", Device{Index: 5, UUID: "GPU-179b83e0-c021-1d8e-a043-c3b3abb37ced"}.nameAndUUID())
}

// templateBusRegex is the reset-gpu template's GPU_BUS_ID messageRegex,
// read from the example templates.
func templateBusRegex(t *testing.T) *regexp.Regexp { return testsupport.ResetGPUBusRegex(t) }
