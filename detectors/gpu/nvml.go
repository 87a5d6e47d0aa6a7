package gpu

import (
	"context"
	"fmt"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// NVML lists GPUs through the NVIDIA Management Library (go-nvml, which
// dlopens libnvidia-ml.so.1).
type NVML struct {
	// Lib is nvml.New() in production and a go-nvml mock in tests.
	Lib nvml.Interface
}

// Name implements Backend.
func (*NVML) Name() string { return "nvml" }

// Devices implements Backend. NVML calls on a GPU that fell off the bus can
// block for a long time, so the calls run in a goroutine and ctx bounds
// the wait; a call that never returns is left behind (the process exits).
func (b *NVML) Devices(ctx context.Context, memory bool) ([]Device, error) {
	return bounded(ctx, "nvml", func() ([]Device, error) { return b.devices(ctx, memory) })
}

func (b *NVML) devices(ctx context.Context, memory bool) ([]Device, error) {
	if ret := b.Lib.Init(); ret != nvml.SUCCESS {
		switch ret {
		case nvml.ERROR_LIBRARY_NOT_FOUND:
			return nil, libraryNotFoundError("nvml: libnvidia-ml.so.1 not found")
		case nvml.ERROR_DRIVER_NOT_LOADED:
			return nil, fmt.Errorf("nvml: init: NVIDIA driver not loaded (%v)", ret)
		case nvml.ERROR_LIB_RM_VERSION_MISMATCH:
			return nil, fmt.Errorf("nvml: init: library and kernel driver versions differ (%v)", ret)
		default:
			return nil, fmt.Errorf("nvml: init: %v", ret)
		}
	}
	defer b.Lib.Shutdown()

	n, ret := b.Lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("nvml: device count: %v", ret)
	}
	devs := make([]Device, 0, n)
	for i := 0; i < n; i++ {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("nvml: %w", err)
		}
		devs = append(devs, nvmlDevice(b.Lib, i, memory))
	}
	return devs, nil
}

func nvmlDevice(lib nvml.Interface, i int, memory bool) Device {
	d := Device{Index: i}
	h, ret := lib.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		d.Lost = ret == nvml.ERROR_GPU_IS_LOST
		d.Err = fmt.Sprintf("get handle: %v", ret)
		return d
	}
	pci, ret := h.GetPciInfo()
	switch ret {
	case nvml.SUCCESS:
		d.BusID = pciBusID(pci)
	case nvml.ERROR_GPU_IS_LOST:
		d.Lost, d.Err = true, fmt.Sprintf("PCI info: %v", ret)
		return d
	default:
		d.Err = fmt.Sprintf("PCI info: %v", ret)
		return d
	}
	if uuid, ret := h.GetUUID(); ret == nvml.SUCCESS {
		d.UUID = uuid
	}
	if !memory {
		return d
	}

	var readErrs []string
	// check sorts one call's return: SUCCESS is known, NOT_SUPPORTED is
	// N/A for this GPU, GPU_IS_LOST marks the device lost, anything else is
	// a read error.
	check := func(what string, ret nvml.Return) bool {
		switch ret {
		case nvml.SUCCESS:
			return true
		case nvml.ERROR_NOT_SUPPORTED:
		case nvml.ERROR_GPU_IS_LOST:
			d.Lost, d.Err = true, fmt.Sprintf("%s: %v", what, ret)
		default:
			readErrs = append(readErrs, fmt.Sprintf("%s: %v", what, ret))
		}
		return false
	}
	if v, ret := h.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC); check("volatile ECC", ret) {
		d.VolatileDBE = Count{Value: v, Known: true}
	}
	if v, ret := h.GetRetiredPagesPendingStatus(); check("retired pages pending", ret) {
		d.RetiredPagesPending = Flag{Value: v == nvml.FEATURE_ENABLED, Known: true}
	}
	sbe, ret1 := h.GetRetiredPages(nvml.PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS)
	dbe, ret2 := h.GetRetiredPages(nvml.PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR)
	if check("retired pages (SBE)", ret1) && check("retired pages (DBE)", ret2) {
		d.RetiredPages = Count{Value: uint64(len(sbe) + len(dbe)), Known: true}
	}
	if _, unc, pending, failed, ret := h.GetRemappedRows(); check("remapped rows", ret) {
		d.RowRemapPending = Flag{Value: pending, Known: true}
		d.RowRemapFailed = Flag{Value: failed, Known: true}
		d.RemappedUncorrectable = Count{Value: uint64(unc), Known: true}
	}
	d.ReadErr = strings.Join(readErrs, "; ")
	return d
}

// pciBusID is the normalised bus ID from NVML's PCI info: the BusId string,
// or, when that is empty, the domain, bus and device numbers (function 0).
func pciBusID(p nvml.PciInfo) string {
	if id, ok := NormalizeBusID(cString(p.BusId[:])); ok {
		return id
	}
	if id, ok := NormalizeBusID(cString(p.BusIdLegacy[:])); ok {
		return id
	}
	if p.Domain == 0 && p.Bus == 0 && p.Device == 0 {
		return ""
	}
	id, _ := NormalizeBusID(fmt.Sprintf("%x:%x:%x.0", p.Domain, p.Bus, p.Device))
	return id
}

// cString is a NUL-terminated C char array as a string.
func cString(b []int8) string {
	var sb strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		sb.WriteByte(byte(c))
	}
	return sb.String()
}

// bounded runs f and waits for it or ctx, whichever ends first. A panic in
// f is returned as an error.
func bounded(ctx context.Context, what string, f func() ([]Device, error)) ([]Device, error) {
	type result struct {
		devs []Device
		err  error
	}
	done := make(chan result, 1)
	go func() {
		// The goroutine may outlive the caller, whose recover does not
		// cover it: a panic in a cgo binding is an error, not a crash.
		defer func() {
			if p := recover(); p != nil {
				done <- result{nil, fmt.Errorf("%s: internal error: %v", what, p)}
			}
		}()
		devs, err := f()
		done <- result{devs, err}
	}()
	select {
	case r := <-done:
		return r.devs, r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("%s: no answer: %w", what, ctx.Err())
	}
}
