package gpu

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/kubemedic/kubemedic/detectors/gpuaction"
	"github.com/stretchr/testify/require"
)

// dgx is go-nvml's fake DGX A100 with the memory calls set: healthy
// counters, row remapping supported, page retirement not (Ampere), and
// every verdict call answering Success with a healthy value, as all of
// them did on the H100 with driver 580 (NODE-FACTS, "Seen on a real
// driver"): recovery action None, no unrepairable memory, SRAM below its
// threshold, no repair pending, 2560 banks with every spare row left.
func dgx(t *testing.T) *dgxa100.Server {
	t.Helper()
	s := dgxa100.New()
	for i, d := range s.Devices {
		dev := d.(*dgxa100.Device)
		bus := fmt.Sprintf("00000000:%02X:00.0", []int{0x07, 0x0f, 0x47, 0x4e, 0x87, 0x90, 0xb7, 0xbd}[i])
		dev.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
			var p nvml.PciInfo
			for j := range bus {
				p.BusId[j] = int8(bus[j])
			}
			return p, nvml.SUCCESS
		}
		dev.GetTotalEccErrorsFunc = func(e nvml.MemoryErrorType, c nvml.EccCounterType) (uint64, nvml.Return) {
			require.Equal(t, nvml.MEMORY_ERROR_TYPE_UNCORRECTED, e)
			require.Equal(t, nvml.VOLATILE_ECC, c)
			return 0, nvml.SUCCESS
		}
		dev.GetRetiredPagesPendingStatusFunc = func() (nvml.EnableState, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
		dev.GetRetiredPagesFunc = func(nvml.PageRetirementCause) ([]uint64, nvml.Return) { return nil, nvml.ERROR_NOT_SUPPORTED }
		dev.GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) { return 0, 0, false, false, nvml.SUCCESS }
		dev.GetFieldValuesFunc = recoveryField(nvml.GPU_RECOVERY_ACTION_NONE, nvml.SUCCESS)
		dev.GetUnrepairableMemoryFlag_v1Func = func() (nvml.UnrepairableMemoryStatus_v1, nvml.Return) {
			return nvml.UnrepairableMemoryStatus_v1{}, nvml.SUCCESS
		}
		dev.GetSramEccErrorStatusFunc = func() (nvml.EccSramErrorStatus, nvml.Return) {
			return nvml.EccSramErrorStatus{Version: 1}, nvml.SUCCESS
		}
		dev.GetRepairStatusFunc = func() (nvml.RepairStatus, nvml.Return) { return nvml.RepairStatus{Version: 1}, nvml.SUCCESS }
		dev.GetRowRemapperHistogramFunc = func() (nvml.RowRemapperHistogramValues, nvml.Return) {
			return nvml.RowRemapperHistogramValues{Max: 2560}, nvml.SUCCESS
		}
	}
	return s
}

// recoveryField answers GetFieldValues with field 230 set to action, as an
// unsigned int (nvmlDeviceGpuRecoveryAction_t), with the field's own
// return fieldRet. It fills every value it is asked for; the tests check
// that the backend asks for exactly one.
func recoveryField(action nvml.DeviceGpuRecoveryAction, fieldRet nvml.Return) func([]nvml.FieldValue) nvml.Return {
	return func(vals []nvml.FieldValue) nvml.Return {
		for i := range vals {
			vals[i].ValueType = uint32(nvml.VALUE_TYPE_UNSIGNED_INT)
			binary.NativeEndian.PutUint32(vals[i].Value[:], uint32(action))
			vals[i].NvmlReturn = uint32(fieldRet)
		}
		return nvml.SUCCESS
	}
}

func dev(s *dgxa100.Server, i int) *dgxa100.Device { return s.Devices[i].(*dgxa100.Device) }

func TestNVMLHealthy(t *testing.T) {
	s := dgx(t)
	devs, err := (&NVML{Lib: s}).Devices(context.Background(), ReadMemory)
	require.NoError(t, err)
	require.Len(t, devs, 8)
	require.Equal(t, Device{
		Index: 3, BusID: "0000:4e:00.0", UUID: dev(s, 3).UUID,
		VolatileDBE: Count{0, true}, RowRemapPending: Flag{false, true}, RowRemapFailed: Flag{false, true}, RemappedUncorrectable: Count{0, true},
		RecoveryAction: Recovery{gpuaction.None, true}, UnrepairableMemory: Flag{false, true}, SRAMThresholdExceeded: Flag{false, true},
		ChannelRepairPending: Flag{false, true}, TPCRepairPending: Flag{false, true}, BanksWithoutSpareRows: Count{0, true},
	}, devs[3])
	require.Len(t, s.ShutdownCalls(), 1)
	require.Equal(t, plugin8OK, DecideMemory("nvml", devs, Thresholds{DBE: 1, RetiredPages: 60}).Message)
}

const plugin8OK = "8 GPUs without memory faults (nvml)"

func TestNVMLLostGPU(t *testing.T) {
	s := dgx(t)
	inner := s.DeviceGetHandleByIndexFunc
	s.DeviceGetHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		if i == 5 {
			return nil, nvml.ERROR_GPU_IS_LOST
		}
		return inner(i)
	}
	devs, err := (&NVML{Lib: s}).Devices(context.Background(), ReadList)
	require.NoError(t, err)
	require.True(t, devs[5].Lost)
	require.Equal(t, "get handle: ERROR_GPU_IS_LOST", devs[5].Err)
	require.Empty(t, dev(s, 0).GetTotalEccErrorsCalls(), "no memory calls without memory")

	driver := []string{"0000:07:00.0", "0000:0f:00.0", "0000:47:00.0", "0000:4e:00.0", "0000:87:00.0", "0000:90:00.0", "0000:b7:00.0", "0000:bd:00.0"}
	r, _ := DecideLost(LostInput{Backend: "nvml", Devices: devs, Driver: driver, Expected: 8})
	require.Equal(t, "GPUFellOffBus: GPU 0000:90:00.0 is lost (fell off the bus); reboot required", r.Line())
}

func TestNVMLMemoryValues(t *testing.T) {
	s := dgx(t)
	dev(s, 1).GetTotalEccErrorsFunc = func(nvml.MemoryErrorType, nvml.EccCounterType) (uint64, nvml.Return) { return 4, nvml.SUCCESS }
	dev(s, 2).GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) { return 3, 2, true, false, nvml.SUCCESS }
	dev(s, 6).GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) { return 0, 9, true, true, nvml.SUCCESS }
	dev(s, 7).GetTotalEccErrorsFunc = func(nvml.MemoryErrorType, nvml.EccCounterType) (uint64, nvml.Return) {
		return 0, nvml.ERROR_UNKNOWN
	}
	// A Volta-like GPU: page retirement instead of row remapping.
	dev(s, 4).GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) { return 0, 0, false, false, nvml.ERROR_NOT_SUPPORTED }
	dev(s, 4).GetRetiredPagesPendingStatusFunc = func() (nvml.EnableState, nvml.Return) { return nvml.FEATURE_ENABLED, nvml.SUCCESS }
	dev(s, 4).GetRetiredPagesFunc = func(c nvml.PageRetirementCause) ([]uint64, nvml.Return) {
		if c == nvml.PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR {
			return []uint64{0x1000}, nvml.SUCCESS
		}
		return []uint64{0x2000, 0x3000}, nvml.SUCCESS
	}
	devs, err := (&NVML{Lib: s}).Devices(context.Background(), ReadMemory)
	require.NoError(t, err)
	require.Equal(t, Count{4, true}, devs[1].VolatileDBE)
	require.Equal(t, Flag{true, true}, devs[2].RowRemapPending)
	require.Equal(t, Count{2, true}, devs[2].RemappedUncorrectable)
	require.Equal(t, Flag{true, true}, devs[6].RowRemapFailed)
	require.Equal(t, "volatile ECC: ERROR_UNKNOWN", devs[7].ReadErr)
	require.Equal(t, Flag{true, true}, devs[4].RetiredPagesPending)
	require.Equal(t, Count{3, true}, devs[4].RetiredPages)
	require.Equal(t, Flag{}, devs[4].RowRemapPending)
	require.Empty(t, devs[4].ReadErr)

	r := DecideMemory("nvml", devs, Thresholds{DBE: 1, RetiredPages: 60})
	require.Equal(t, "RowRemapFailed: row remap failed on 0000:b7:00.0 ("+dev(s, 6).UUID+"); replace GPU", r.Line())
}

// TestNVMLRetiredPagesOnlyWithoutRemapper: a GPU whose row remapper
// answers (Ampere and later) is not asked for retired pages, which it does
// not keep; one whose remapper is Not Supported (Volta, Turing) or fails
// is, and its counts are read as before.
func TestNVMLRetiredPagesOnlyWithoutRemapper(t *testing.T) {
	s := dgx(t)
	volta, failing := dev(s, 4), dev(s, 5)
	volta.GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) { return 0, 0, false, false, nvml.ERROR_NOT_SUPPORTED }
	volta.GetRetiredPagesPendingStatusFunc = func() (nvml.EnableState, nvml.Return) { return nvml.FEATURE_DISABLED, nvml.SUCCESS }
	volta.GetRetiredPagesFunc = func(nvml.PageRetirementCause) ([]uint64, nvml.Return) { return []uint64{0x1000}, nvml.SUCCESS }
	failing.GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) { return 0, 0, false, false, nvml.ERROR_UNKNOWN }
	devs, err := (&NVML{Lib: s}).Devices(context.Background(), ReadMemory)
	require.NoError(t, err)

	for i := range devs {
		d := dev(s, i)
		require.Len(t, d.GetRemappedRowsCalls(), 1, "GPU %d", i)
		if i == 4 || i == 5 {
			require.Len(t, d.GetRetiredPagesPendingStatusCalls(), 1, "GPU %d", i)
			require.Len(t, d.GetRetiredPagesCalls(), 2, "GPU %d", i)
			continue
		}
		require.Empty(t, d.GetRetiredPagesPendingStatusCalls(), "GPU %d remaps rows", i)
		require.Empty(t, d.GetRetiredPagesCalls(), "GPU %d remaps rows", i)
		require.Equal(t, Flag{}, devs[i].RetiredPagesPending)
		require.Equal(t, Count{}, devs[i].RetiredPages)
		require.Equal(t, Flag{false, true}, devs[i].RowRemapPending)
		require.Equal(t, Recovery{gpuaction.None, true}, devs[i].RecoveryAction, "the five verdict reads are still made")
		require.Equal(t, Count{0, true}, devs[i].BanksWithoutSpareRows)
	}
	require.Equal(t, Flag{false, true}, devs[4].RetiredPagesPending)
	require.Equal(t, Count{2, true}, devs[4].RetiredPages)
	require.Equal(t, Flag{}, devs[4].RowRemapPending)
	require.Empty(t, devs[4].ReadErr)
	require.Equal(t, "remapped rows: ERROR_UNKNOWN", devs[5].ReadErr, "retired pages Not Supported is N/A, the remapper's failure an error")
}

func TestNVMLLostDuringMemoryRead(t *testing.T) {
	s := dgx(t)
	dev(s, 0).GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) { return 0, 0, false, false, nvml.ERROR_GPU_IS_LOST }
	devs, err := (&NVML{Lib: s}).Devices(context.Background(), ReadMemory)
	require.NoError(t, err)
	require.True(t, devs[0].Lost)
	require.Equal(t, "0000:07:00.0", devs[0].BusID)
	require.Equal(t, "Unknown", DecideMemory("nvml", devs, Thresholds{DBE: 1}).Status.String())
}

func TestNVMLInitFailures(t *testing.T) {
	for _, tc := range []struct {
		ret      nvml.Return
		want     string
		fallback bool
	}{
		{nvml.ERROR_LIBRARY_NOT_FOUND, "nvml: libnvidia-ml.so.1 not found", true},
		{nvml.ERROR_DRIVER_NOT_LOADED, "nvml: init: NVIDIA driver not loaded (ERROR_DRIVER_NOT_LOADED)", false},
		{nvml.ERROR_NO_PERMISSION, "nvml: init: ERROR_NO_PERMISSION", false},
	} {
		t.Run(tc.ret.Error(), func(t *testing.T) {
			lib := &mock.Interface{InitFunc: func() nvml.Return { return tc.ret }}
			devs, err := (&NVML{Lib: lib}).Devices(context.Background(), ReadMemory)
			require.EqualError(t, err, tc.want)
			require.Nil(t, devs)
			require.Equal(t, tc.fallback, isLibraryNotFound(err))
		})
	}
}

func TestNVMLPanicIsAnError(t *testing.T) {
	// Unset mock funcs panic: DeviceGetCount here.
	lib := &mock.Interface{InitFunc: func() nvml.Return { return nvml.SUCCESS }, ShutdownFunc: func() nvml.Return { return nvml.SUCCESS }}
	_, err := (&NVML{Lib: lib}).Devices(context.Background(), ReadList)
	require.ErrorContains(t, err, "nvml: internal error")
}

func TestNVMLRealLibraryAbsent(t *testing.T) {
	// On a machine without the NVIDIA driver go-nvml's Init must fail
	// cleanly; with one, it must list devices. Either way, no panic.
	devs, err := (&NVML{Lib: nvml.New()}).Devices(context.Background(), ReadMemory)
	if err != nil {
		t.Logf("no NVML here: %v", err)
		return
	}
	t.Logf("NVML lists %d GPUs", len(devs))
}

func TestNVMLHangIsBounded(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	lib := &mock.Interface{InitFunc: func() nvml.Return { <-block; return nvml.ERROR_UNINITIALIZED }}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := (&NVML{Lib: lib}).Devices(ctx, ReadList)
	require.ErrorContains(t, err, "nvml: no answer")
	require.Less(t, time.Since(start), 2*time.Second)
}

func TestNVMLVerdictValues(t *testing.T) {
	s := dgx(t)
	// Recovery actions 0..4 on GPUs 0..4, in NVML's numbering.
	for i, a := range []nvml.DeviceGpuRecoveryAction{
		nvml.GPU_RECOVERY_ACTION_NONE, nvml.GPU_RECOVERY_ACTION_GPU_RESET, nvml.GPU_RECOVERY_ACTION_NODE_REBOOT,
		nvml.GPU_RECOVERY_ACTION_DRAIN_P2P, nvml.GPU_RECOVERY_ACTION_DRAIN_AND_RESET,
	} {
		dev(s, i).GetFieldValuesFunc = recoveryField(a, nvml.SUCCESS)
	}
	dev(s, 5).GetUnrepairableMemoryFlag_v1Func = func() (nvml.UnrepairableMemoryStatus_v1, nvml.Return) {
		return nvml.UnrepairableMemoryStatus_v1{BUnrepairableMemory: 1}, nvml.SUCCESS
	}
	dev(s, 5).GetRowRemapperHistogramFunc = func() (nvml.RowRemapperHistogramValues, nvml.Return) {
		return nvml.RowRemapperHistogramValues{Max: 2550, Low: 7, None: 3}, nvml.SUCCESS
	}
	dev(s, 6).GetSramEccErrorStatusFunc = func() (nvml.EccSramErrorStatus, nvml.Return) {
		return nvml.EccSramErrorStatus{Version: 1, AggregateUncParity: 5, BThresholdExceeded: 1}, nvml.SUCCESS
	}
	dev(s, 7).GetRepairStatusFunc = func() (nvml.RepairStatus, nvml.Return) {
		return nvml.RepairStatus{Version: 1, BChannelRepairPending: 1}, nvml.SUCCESS
	}
	devs, err := (&NVML{Lib: s}).Devices(context.Background(), ReadMemory)
	require.NoError(t, err)
	for i, want := range []gpuaction.Action{gpuaction.None, gpuaction.GPUReset, gpuaction.NodeReboot, gpuaction.DrainP2P, gpuaction.DrainAndReset} {
		require.Equal(t, Recovery{want, true}, devs[i].RecoveryAction, "GPU %d", i)
	}
	require.Equal(t, Flag{true, true}, devs[5].UnrepairableMemory)
	require.Equal(t, Count{3, true}, devs[5].BanksWithoutSpareRows)
	require.Equal(t, Flag{true, true}, devs[6].SRAMThresholdExceeded)
	require.Equal(t, Flag{true, true}, devs[7].ChannelRepairPending)
	require.Equal(t, Flag{false, true}, devs[7].TPCRepairPending)
	for i, d := range devs {
		require.Empty(t, d.ReadErr, "GPU %d", i)
		require.Empty(t, d.Unsupported, "GPU %d", i)
		calls := dev(s, i).GetFieldValuesCalls()
		require.Len(t, calls, 1, "one GetFieldValues call per GPU")
		require.Len(t, calls[0].FieldValues, 1, "one field")
		require.EqualValues(t, nvml.FI_DEV_GET_GPU_RECOVERY_ACTION, calls[0].FieldValues[0].FieldId)
	}
}

func TestNVMLVerdictReadOnlyForMemory(t *testing.T) {
	s := dgx(t)
	_, err := (&NVML{Lib: s}).Devices(context.Background(), ReadList)
	require.NoError(t, err)
	require.Empty(t, s.LookupSymbolCalls())
	require.Empty(t, dev(s, 0).GetFieldValuesCalls())
	require.Empty(t, dev(s, 0).GetRepairStatusCalls())

	_, err = (&NVML{Lib: s}).Devices(context.Background(), ReadMemory)
	require.NoError(t, err)
	var syms []string
	for _, c := range s.LookupSymbolCalls() {
		syms = append(syms, c.S)
	}
	require.Equal(t, []string{symUnrepairable, symSRAM, symRepair, symHistogram}, syms, "each symbol looked up once per run, not per GPU")
}

// gpu-recovery reads the recovery action and nothing else of the memory:
// no ECC counter, remapper, page or symbol look-up, one field per GPU.
func TestNVMLRecoveryReadsOnlyTheAction(t *testing.T) {
	s := dgx(t)
	dev(s, 3).GetFieldValuesFunc = func(v []nvml.FieldValue) nvml.Return {
		v[0].ValueType = uint32(nvml.VALUE_TYPE_UNSIGNED_INT)
		binary.NativeEndian.PutUint32(v[0].Value[:], uint32(nvml.GPU_RECOVERY_ACTION_GPU_RESET))
		return nvml.SUCCESS
	}
	dev(s, 5).GetFieldValuesFunc = func(v []nvml.FieldValue) nvml.Return { return nvml.ERROR_UNKNOWN }
	devs, err := (&NVML{Lib: s}).Devices(context.Background(), ReadRecovery)
	require.NoError(t, err)
	require.Len(t, devs, 8)
	require.Empty(t, s.LookupSymbolCalls())
	for i := range devs {
		d := dev(s, i)
		require.Empty(t, d.GetTotalEccErrorsCalls(), "GPU %d", i)
		require.Empty(t, d.GetRemappedRowsCalls(), "GPU %d", i)
		require.Empty(t, d.GetRetiredPagesPendingStatusCalls(), "GPU %d", i)
		require.Empty(t, d.GetRepairStatusCalls(), "GPU %d", i)
		require.Empty(t, d.GetSramEccErrorStatusCalls(), "GPU %d", i)
		require.Empty(t, d.GetRowRemapperHistogramCalls(), "GPU %d", i)
		require.Empty(t, d.GetUnrepairableMemoryFlag_v1Calls(), "GPU %d", i)
		calls := d.GetFieldValuesCalls()
		require.Len(t, calls, 1, "GPU %d", i)
		require.EqualValues(t, nvml.FI_DEV_GET_GPU_RECOVERY_ACTION, calls[0].FieldValues[0].FieldId)
		require.False(t, devs[i].VolatileDBE.Known, "not read")
	}
	require.Equal(t, Recovery{gpuaction.GPUReset, true}, devs[3].RecoveryAction)
	require.Equal(t, "recovery action: ERROR_UNKNOWN", devs[5].ReadErr)
	require.Equal(t, Recovery{gpuaction.None, true}, devs[0].RecoveryAction)
	require.Equal(t, "ResetRequired", DecideRecovery("nvml", devs).Reason)
}

// TestNVMLVerdictReturns sets one verdict call's return on GPU 2 and checks
// that the signal is Known, Unsupported, a read error, or the GPU lost,
// with nothing else on any GPU changed.
func TestNVMLVerdictReturns(t *testing.T) {
	type signal struct {
		name  string
		sym   string // "" when the call is not looked up
		set   func(*dgxa100.Device, nvml.Return)
		known func(Device) bool
	}
	signals := []signal{
		{signalRecoveryAction, "", func(d *dgxa100.Device, r nvml.Return) {
			d.GetFieldValuesFunc = func(v []nvml.FieldValue) nvml.Return {
				recoveryField(nvml.GPU_RECOVERY_ACTION_NONE, nvml.SUCCESS)(v)
				return r
			}
		}, func(d Device) bool { return d.RecoveryAction.Known }},
		{signalRecoveryAction + " (field's own return)", "", func(d *dgxa100.Device, r nvml.Return) {
			d.GetFieldValuesFunc = recoveryField(nvml.GPU_RECOVERY_ACTION_NONE, r)
		}, func(d Device) bool { return d.RecoveryAction.Known }},
		{signalUnrepairableMemory, symUnrepairable, func(d *dgxa100.Device, r nvml.Return) {
			d.GetUnrepairableMemoryFlag_v1Func = func() (nvml.UnrepairableMemoryStatus_v1, nvml.Return) {
				return nvml.UnrepairableMemoryStatus_v1{}, r
			}
		}, func(d Device) bool { return d.UnrepairableMemory.Known }},
		{signalSRAMThreshold, symSRAM, func(d *dgxa100.Device, r nvml.Return) {
			d.GetSramEccErrorStatusFunc = func() (nvml.EccSramErrorStatus, nvml.Return) { return nvml.EccSramErrorStatus{}, r }
		}, func(d Device) bool { return d.SRAMThresholdExceeded.Known }},
		{signalRepairStatus, symRepair, func(d *dgxa100.Device, r nvml.Return) {
			d.GetRepairStatusFunc = func() (nvml.RepairStatus, nvml.Return) { return nvml.RepairStatus{}, r }
		}, func(d Device) bool {
			require.Equal(t, d.ChannelRepairPending.Known, d.TPCRepairPending.Known)
			return d.ChannelRepairPending.Known
		}},
		{signalRowRemapHistogram, symHistogram, func(d *dgxa100.Device, r nvml.Return) {
			d.GetRowRemapperHistogramFunc = func() (nvml.RowRemapperHistogramValues, nvml.Return) {
				return nvml.RowRemapperHistogramValues{}, r
			}
		}, func(d Device) bool { return d.BanksWithoutSpareRows.Known }},
	}
	type want struct {
		known       bool
		unsupported bool
		readErr     string // after the signal's name and ": "
		lost        bool
		status      string // DecideMemory's status
	}
	for _, sig := range signals {
		name, _, _ := strings.Cut(sig.name, " (")
		for _, tc := range []struct {
			ret  nvml.Return
			want want
		}{
			{nvml.SUCCESS, want{known: true, status: "OK"}},
			{nvml.ERROR_NOT_SUPPORTED, want{unsupported: true, status: "OK"}},
			{nvml.ERROR_FUNCTION_NOT_FOUND, want{unsupported: true, status: "OK"}},
			{nvml.ERROR_UNKNOWN, want{readErr: "ERROR_UNKNOWN", status: "Unknown"}},
			{nvml.ERROR_NO_PERMISSION, want{readErr: "ERROR_NO_PERMISSION", status: "Unknown"}},
			{nvml.ERROR_GPU_IS_LOST, want{lost: true, status: "Unknown"}},
		} {
			t.Run(sig.name+"/"+tc.ret.String(), func(t *testing.T) {
				s := dgx(t)
				sig.set(dev(s, 2), tc.ret)
				devs, err := (&NVML{Lib: s}).Devices(context.Background(), ReadMemory)
				require.NoError(t, err)
				d := devs[2]
				require.Equal(t, tc.want.known, sig.known(d), "Known")
				if tc.want.unsupported {
					require.Equal(t, []string{name}, d.Unsupported)
				} else {
					require.Empty(t, d.Unsupported)
				}
				if tc.want.readErr != "" {
					require.Equal(t, name+": "+tc.want.readErr, d.ReadErr)
				} else {
					require.Empty(t, d.ReadErr)
				}
				require.Equal(t, tc.want.lost, d.Lost)
				if tc.want.lost {
					require.Equal(t, name+": ERROR_GPU_IS_LOST", d.Err)
				}
				require.Equal(t, tc.want.status, DecideMemory("nvml", devs, Thresholds{DBE: 1, RetiredPages: 60}).Status.String())
				healthy := devs[3]
				require.True(t, healthy.RecoveryAction.Known && healthy.BanksWithoutSpareRows.Known && healthy.ReadErr == "", "other GPUs unchanged")
			})
		}
		if sig.sym == "" {
			continue
		}
		t.Run(sig.name+"/symbol missing", func(t *testing.T) {
			s := dgx(t)
			s.LookupSymbolFunc = func(sym string) error {
				if sym == sig.sym {
					return fmt.Errorf("error resolving symbol %s: undefined symbol", sym)
				}
				return nil
			}
			// Calling it would be a dynamic linker error on a real driver;
			// the mock's unset func panics, which Devices reports.
			for _, d := range s.Devices {
				sig.set(d.(*dgxa100.Device), nvml.SUCCESS)
			}
			for _, d := range s.Devices {
				dd := d.(*dgxa100.Device)
				switch sig.sym {
				case symUnrepairable:
					dd.GetUnrepairableMemoryFlag_v1Func = nil
				case symSRAM:
					dd.GetSramEccErrorStatusFunc = nil
				case symRepair:
					dd.GetRepairStatusFunc = nil
				case symHistogram:
					dd.GetRowRemapperHistogramFunc = nil
				}
			}
			devs, err := (&NVML{Lib: s}).Devices(context.Background(), ReadMemory)
			require.NoError(t, err)
			for i, d := range devs {
				require.False(t, sig.known(d), "GPU %d", i)
				require.Equal(t, []string{name}, d.Unsupported, "GPU %d", i)
				require.Empty(t, d.ReadErr, "GPU %d", i)
			}
			require.Equal(t, plugin8OK, DecideMemory("nvml", devs, Thresholds{DBE: 1, RetiredPages: 60}).Message)
		})
	}
}

func TestNVMLVerdictOldGenerations(t *testing.T) {
	s := dgx(t)
	// An A100 on a current driver: no unrepairable-memory flag (Hopper+).
	for _, d := range s.Devices {
		d.(*dgxa100.Device).GetUnrepairableMemoryFlag_v1Func = func() (nvml.UnrepairableMemoryStatus_v1, nvml.Return) {
			return nvml.UnrepairableMemoryStatus_v1{}, nvml.ERROR_NOT_SUPPORTED
		}
	}
	// GPU 4 is a V100: page retirement instead of row remapping, so no
	// remapped rows and no histogram; no SRAM status (Ampere+) either.
	v100 := dev(s, 4)
	v100.GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) { return 0, 0, false, false, nvml.ERROR_NOT_SUPPORTED }
	v100.GetRowRemapperHistogramFunc = func() (nvml.RowRemapperHistogramValues, nvml.Return) {
		return nvml.RowRemapperHistogramValues{}, nvml.ERROR_NOT_SUPPORTED
	}
	v100.GetSramEccErrorStatusFunc = func() (nvml.EccSramErrorStatus, nvml.Return) {
		return nvml.EccSramErrorStatus{}, nvml.ERROR_NOT_SUPPORTED
	}
	v100.GetRetiredPagesPendingStatusFunc = func() (nvml.EnableState, nvml.Return) { return nvml.FEATURE_DISABLED, nvml.SUCCESS }
	v100.GetRetiredPagesFunc = func(nvml.PageRetirementCause) ([]uint64, nvml.Return) { return nil, nvml.SUCCESS }

	devs, err := (&NVML{Lib: s}).Devices(context.Background(), ReadMemory)
	require.NoError(t, err)
	a100 := devs[0]
	require.Equal(t, Flag{}, a100.UnrepairableMemory)
	require.Equal(t, []string{signalUnrepairableMemory}, a100.Unsupported)
	require.Equal(t, Recovery{gpuaction.None, true}, a100.RecoveryAction)
	require.Equal(t, Count{0, true}, a100.BanksWithoutSpareRows)
	require.Empty(t, a100.ReadErr)

	v := devs[4]
	require.Equal(t, []string{signalUnrepairableMemory, signalSRAMThreshold, signalRowRemapHistogram}, v.Unsupported)
	require.Equal(t, Count{}, v.BanksWithoutSpareRows)
	require.Equal(t, Flag{}, v.SRAMThresholdExceeded)
	require.Equal(t, Flag{false, true}, v.RetiredPagesPending)
	require.Equal(t, Count{0, true}, v.RetiredPages)
	require.Equal(t, Flag{false, true}, v.ChannelRepairPending)
	require.Empty(t, v.ReadErr)

	// Generations that do not report a signal are judged by what they do
	// report.
	require.Equal(t, plugin8OK, DecideMemory("nvml", devs, Thresholds{DBE: 1, RetiredPages: 60}).Message)
}

func TestNVMLRecoveryActionValueTypes(t *testing.T) {
	set := func(typ nvml.ValueType, raw uint64) func([]nvml.FieldValue) nvml.Return {
		return func(v []nvml.FieldValue) nvml.Return {
			v[0].ValueType = uint32(typ)
			binary.NativeEndian.PutUint64(v[0].Value[:], raw)
			return nvml.SUCCESS
		}
	}
	for _, tc := range []struct {
		desc    string
		typ     nvml.ValueType
		raw     uint64
		want    Recovery
		readErr string
	}{
		{"unsigned int", nvml.VALUE_TYPE_UNSIGNED_INT, 4, Recovery{gpuaction.DrainAndReset, true}, ""},
		{"unsigned long long", nvml.VALUE_TYPE_UNSIGNED_LONG_LONG, 1, Recovery{gpuaction.GPUReset, true}, ""},
		{"signed int", nvml.VALUE_TYPE_SIGNED_INT, 2, Recovery{gpuaction.NodeReboot, true}, ""},
		{"action newer than kubemedic", nvml.VALUE_TYPE_UNSIGNED_INT, uint64(nvml.GPU_RECOVERY_ACTION_RECOVER_IMEX_DOMAIN), Recovery{gpuaction.RecoverIMEXDomain, true}, ""},
		{"negative", nvml.VALUE_TYPE_SIGNED_LONG_LONG, ^uint64(0), Recovery{}, "recovery action: value type 4"},
		{"double", nvml.VALUE_TYPE_DOUBLE, 0, Recovery{}, "recovery action: value type 0"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			s := dgx(t)
			dev(s, 1).GetFieldValuesFunc = set(tc.typ, tc.raw)
			devs, err := (&NVML{Lib: s}).Devices(context.Background(), ReadMemory)
			require.NoError(t, err)
			require.Equal(t, tc.want, devs[1].RecoveryAction)
			require.Equal(t, tc.readErr, devs[1].ReadErr)
			require.Empty(t, devs[1].Unsupported)
		})
	}
}

func TestNVMLLostSkipsVerdict(t *testing.T) {
	s := dgx(t)
	dev(s, 0).GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) { return 0, 0, false, false, nvml.ERROR_GPU_IS_LOST }
	devs, err := (&NVML{Lib: s}).Devices(context.Background(), ReadMemory)
	require.NoError(t, err)
	require.Equal(t, "remapped rows: ERROR_GPU_IS_LOST", devs[0].Err)
	require.Empty(t, dev(s, 0).GetFieldValuesCalls(), "no more calls on a lost GPU")
	require.Empty(t, devs[0].Unsupported)
	require.Len(t, dev(s, 1).GetFieldValuesCalls(), 1)
}
