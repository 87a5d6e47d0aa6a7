package gpu

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/stretchr/testify/require"
)

// dgx is go-nvml's fake DGX A100 with the memory calls set: healthy
// counters, row remapping supported, page retirement not (Ampere).
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
	}
	return s
}

func dev(s *dgxa100.Server, i int) *dgxa100.Device { return s.Devices[i].(*dgxa100.Device) }

func TestNVMLHealthy(t *testing.T) {
	s := dgx(t)
	devs, err := (&NVML{Lib: s}).Devices(context.Background(), true)
	require.NoError(t, err)
	require.Len(t, devs, 8)
	require.Equal(t, Device{
		Index: 3, BusID: "0000:4e:00.0", UUID: dev(s, 3).UUID,
		VolatileDBE: Count{0, true}, RowRemapPending: Flag{false, true}, RowRemapFailed: Flag{false, true}, RemappedUncorrectable: Count{0, true},
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
	devs, err := (&NVML{Lib: s}).Devices(context.Background(), false)
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
	devs, err := (&NVML{Lib: s}).Devices(context.Background(), true)
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

func TestNVMLLostDuringMemoryRead(t *testing.T) {
	s := dgx(t)
	dev(s, 0).GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) { return 0, 0, false, false, nvml.ERROR_GPU_IS_LOST }
	devs, err := (&NVML{Lib: s}).Devices(context.Background(), true)
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
			devs, err := (&NVML{Lib: lib}).Devices(context.Background(), true)
			require.EqualError(t, err, tc.want)
			require.Nil(t, devs)
			require.Equal(t, tc.fallback, isLibraryNotFound(err))
		})
	}
}

func TestNVMLPanicIsAnError(t *testing.T) {
	// Unset mock funcs panic: DeviceGetCount here.
	lib := &mock.Interface{InitFunc: func() nvml.Return { return nvml.SUCCESS }, ShutdownFunc: func() nvml.Return { return nvml.SUCCESS }}
	_, err := (&NVML{Lib: lib}).Devices(context.Background(), false)
	require.ErrorContains(t, err, "nvml: internal error")
}

func TestNVMLRealLibraryAbsent(t *testing.T) {
	// On a machine without the NVIDIA driver go-nvml's Init must fail
	// cleanly; with one, it must list devices. Either way, no panic.
	devs, err := (&NVML{Lib: nvml.New()}).Devices(context.Background(), true)
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
	_, err := (&NVML{Lib: lib}).Devices(ctx, false)
	require.ErrorContains(t, err, "nvml: no answer")
	require.Less(t, time.Since(start), 2*time.Second)
}
