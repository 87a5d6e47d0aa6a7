package gpu

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/kubemedic/kubemedic/detectors/gpuaction"
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
func (b *NVML) Devices(ctx context.Context, what Read) ([]Device, error) {
	return bounded(ctx, "nvml", func() ([]Device, error) { return b.devices(ctx, what) })
}

func (b *NVML) devices(ctx context.Context, what Read) ([]Device, error) {
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
	// nvmlShutdown costs about 3 ms of CPU on an H200, an eighth of a
	// gpu-memory run, just before the process exits. It stays: NVML's
	// reference says it is the caller's responsibility to call it "once
	// NVML is no longer being used" and says nothing about a process that
	// exits without it (docs.nvidia.com/deploy/nvml-api/
	// group__nvmlInitializationAndCleanup.html), so skipping it is not
	// clearly safe, and the floor the checks are measured against calls it
	// too.
	defer b.Lib.Shutdown()

	n, ret := b.Lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("nvml: device count: %v", ret)
	}
	var v *verdictReader
	if what != ReadList {
		v = newVerdictReader(b.Lib, what)
	}
	devs := make([]Device, 0, n)
	for i := 0; i < n; i++ {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("nvml: %w", err)
		}
		devs = append(devs, nvmlDevice(b.Lib, i, v))
	}
	return devs, nil
}

// nvmlDevice reads device i; v is nil when only the list is wanted, and
// reads only the recovery action for ReadRecovery.
func nvmlDevice(lib nvml.Interface, i int, v *verdictReader) Device {
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
	if v == nil {
		return d
	}
	if v.what == ReadRecovery {
		var readErrs []string
		v.readRecovery(h, &d, &readErrs)
		d.ReadErr = strings.Join(readErrs, "; ")
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
	// The row remapper is read first because its answer says whether the
	// page retirement calls are worth making. A GPU whose remapper answers
	// (Ampere and later: nvmlDeviceGetRemappedRows is "for Ampere or
	// newer") repairs its memory by remapping rows, not by retiring pages
	// (NVIDIA, "GPU Memory Error Management", docs.nvidia.com/deploy/
	// a100-gpu-mem-error-mgmt): its retired-page calls only answer Not
	// Supported, which left the two fields unknown anyway. On an H200 the
	// first of them alone cost 0.4 ms of CPU to say so (docs/detectors.md,
	// Measurements). Any other answer from the remapper (Not Supported on
	// Volta and Turing, an error) keeps the page retirement reads, and the
	// checks below sort the returns in the order they always had, so that
	// ReadErr and Err read as before.
	_, unc, pending, failed, remapRet := h.GetRemappedRows()
	if remapRet != nvml.SUCCESS {
		if v, ret := h.GetRetiredPagesPendingStatus(); check("retired pages pending", ret) {
			d.RetiredPagesPending = Flag{Value: v == nvml.FEATURE_ENABLED, Known: true}
		}
		sbe, ret1 := h.GetRetiredPages(nvml.PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS)
		dbe, ret2 := h.GetRetiredPages(nvml.PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR)
		if check("retired pages (SBE)", ret1) && check("retired pages (DBE)", ret2) {
			d.RetiredPages = Count{Value: uint64(len(sbe) + len(dbe)), Known: true}
		}
	}
	if check("remapped rows", remapRet) {
		d.RowRemapPending = Flag{Value: pending, Known: true}
		d.RowRemapFailed = Flag{Value: failed, Known: true}
		d.RemappedUncorrectable = Count{Value: uint64(unc), Known: true}
	}
	if !d.Lost {
		v.read(h, &d, &readErrs)
	}
	d.ReadErr = strings.Join(readErrs, "; ")
	return d
}

// The driver's verdict signals' names, as Device.Unsupported and ReadErr
// give them; the DCGM backend uses the same names.
const (
	signalRecoveryAction     = "recovery action"
	signalUnrepairableMemory = "unrepairable memory"
	signalSRAMThreshold      = "SRAM threshold"
	signalRepairStatus       = "repair status"
	signalRowRemapHistogram  = "row remapper histogram"
)

// verdictReader reads the driver's own verdict on a GPU (issue 19): the
// recovery action, unrepairable memory, SRAM threshold, channel/TPC
// repair pending and the row remapper histogram. One is made per run,
// after Init, and reused for every GPU, so a run pays for the symbol
// look-ups and the field value buffer once.
type verdictReader struct {
	// what is ReadRecovery or ReadMemory.
	what Read
	// has* say whether the installed libnvidia-ml exports the call.
	// go-nvml binds its C calls lazily (dlopen RTLD_LAZY) and does not
	// check for a symbol: calling one the library lacks is a dynamic
	// linker "undefined symbol" error that kills the process, not
	// ERROR_FUNCTION_NOT_FOUND (go-nvlib guards its newer calls the same
	// way, NVIDIA/go-nvlib#87). A missing symbol is an old driver: the
	// signal is unsupported.
	hasUnrepairable, hasSRAM, hasRepair, hasHistogram bool
	// field is GetFieldValues' one-value buffer; reset for each GPU.
	field []nvml.FieldValue
}

// The calls that older drivers' libnvidia-ml lacks (NODE-FACTS: repair
// status is NVML 580+, the SRAM status NVML 535+). nvmlDeviceGetFieldValues
// is far older and is not looked up: a field an old driver does not know
// comes back in the field's own nvmlReturn.
const (
	symUnrepairable = "nvmlDeviceGetUnrepairableMemoryFlag_v1"
	symSRAM         = "nvmlDeviceGetSramEccErrorStatus"
	symRepair       = "nvmlDeviceGetRepairStatus"
	symHistogram    = "nvmlDeviceGetRowRemapperHistogram"
)

func newVerdictReader(lib nvml.Interface, what Read) *verdictReader {
	if what == ReadRecovery {
		// The recovery action is a field value: no symbol to look up.
		return &verdictReader{what: what, field: make([]nvml.FieldValue, 1)}
	}
	ext := lib.Extensions()
	has := func(sym string) bool { return ext.LookupSymbol(sym) == nil }
	return &verdictReader{
		what:            what,
		hasUnrepairable: has(symUnrepairable),
		hasSRAM:         has(symSRAM),
		hasRepair:       has(symRepair),
		hasHistogram:    has(symHistogram),
		field:           make([]nvml.FieldValue, 1),
	}
}

// sorter returns the function that sorts one verdict signal's return:
// SUCCESS is Known (true); ERROR_NOT_SUPPORTED, ERROR_FUNCTION_NOT_FOUND
// or a symbol the library lacks puts the signal's name in d.Unsupported;
// ERROR_GPU_IS_LOST marks the device lost, as the counters above do, and
// the first such return is kept in Err; any other return is a read error
// naming the signal, appended to readErrs.
func (v *verdictReader) sorter(d *Device, readErrs *[]string) func(what string, ret nvml.Return) bool {
	return func(what string, ret nvml.Return) bool {
		switch ret {
		case nvml.SUCCESS:
			return true
		case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_FUNCTION_NOT_FOUND:
			d.Unsupported = append(d.Unsupported, what)
		case nvml.ERROR_GPU_IS_LOST:
			if !d.Lost {
				d.Lost, d.Err = true, fmt.Sprintf("%s: %v", what, ret)
			}
		default:
			*readErrs = append(*readErrs, fmt.Sprintf("%s: %v", what, ret))
		}
		return false
	}
}

// readRecovery reads the recovery action, a field value: one
// GetFieldValues call, whose own return covers the call and the field's
// nvmlReturn the value.
func (v *verdictReader) readRecovery(h nvml.Device, d *Device, readErrs *[]string) {
	ok := v.sorter(d, readErrs)
	v.field[0] = nvml.FieldValue{FieldId: nvml.FI_DEV_GET_GPU_RECOVERY_ACTION}
	if ok(signalRecoveryAction, h.GetFieldValues(v.field)) && ok(signalRecoveryAction, nvml.Return(v.field[0].NvmlReturn)) {
		if a, good := fieldUint(v.field[0]); good {
			d.RecoveryAction = Recovery{Action: gpuaction.Action(a), Known: true}
		} else {
			*readErrs = append(*readErrs, fmt.Sprintf("%s: value type %d", signalRecoveryAction, v.field[0].ValueType))
		}
	}
}

// read fills d's verdict fields, sorting each signal's return as sorter
// says.
func (v *verdictReader) read(h nvml.Device, d *Device, readErrs *[]string) {
	v.readRecovery(h, d, readErrs)
	ok := v.sorter(d, readErrs)

	if !v.hasUnrepairable {
		ok(signalUnrepairableMemory, nvml.ERROR_FUNCTION_NOT_FOUND)
	} else if s, ret := h.GetUnrepairableMemoryFlag_v1(); ok(signalUnrepairableMemory, ret) {
		d.UnrepairableMemory = Flag{Value: s.BUnrepairableMemory != 0, Known: true}
	}

	if !v.hasSRAM {
		ok(signalSRAMThreshold, nvml.ERROR_FUNCTION_NOT_FOUND)
	} else if s, ret := h.GetSramEccErrorStatus(); ok(signalSRAMThreshold, ret) {
		d.SRAMThresholdExceeded = Flag{Value: s.BThresholdExceeded != 0, Known: true}
	}

	if !v.hasRepair {
		ok(signalRepairStatus, nvml.ERROR_FUNCTION_NOT_FOUND)
	} else if s, ret := h.GetRepairStatus(); ok(signalRepairStatus, ret) {
		d.ChannelRepairPending = Flag{Value: s.BChannelRepairPending != 0, Known: true}
		d.TPCRepairPending = Flag{Value: s.BTpcRepairPending != 0, Known: true}
	}

	if !v.hasHistogram {
		ok(signalRowRemapHistogram, nvml.ERROR_FUNCTION_NOT_FOUND)
	} else if s, ret := h.GetRowRemapperHistogram(); ok(signalRowRemapHistogram, ret) {
		d.BanksWithoutSpareRows = Count{Value: uint64(s.None), Known: true}
	}
}

// fieldUint is an NVML field value as an unsigned integer; ok is false
// for a floating point, negative or unknown value type.
func fieldUint(f nvml.FieldValue) (uint64, bool) {
	b := f.Value[:]
	switch nvml.ValueType(f.ValueType) {
	case nvml.VALUE_TYPE_UNSIGNED_INT:
		return uint64(binary.NativeEndian.Uint32(b)), true
	case nvml.VALUE_TYPE_UNSIGNED_LONG, nvml.VALUE_TYPE_UNSIGNED_LONG_LONG:
		return binary.NativeEndian.Uint64(b), true
	case nvml.VALUE_TYPE_UNSIGNED_SHORT:
		return uint64(binary.NativeEndian.Uint16(b)), true
	case nvml.VALUE_TYPE_SIGNED_INT:
		if n := int32(binary.NativeEndian.Uint32(b)); n >= 0 {
			return uint64(n), true
		}
	case nvml.VALUE_TYPE_SIGNED_LONG_LONG:
		if n := int64(binary.NativeEndian.Uint64(b)); n >= 0 {
			return uint64(n), true
		}
	}
	return 0, false
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
