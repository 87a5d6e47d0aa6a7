package gpu

import (
	"context"
	"fmt"
	"strings"

	"github.com/kubemedic/kubemedic/detectors/gpu/dcgm"
	"github.com/kubemedic/kubemedic/detectors/gpuaction"
)

// DCGM field IDs, by number so that they mean the same across go-dcgm
// tags (v1.4601.x has only the legacy names). Each is checked against
// go-dcgm v1.4611.0's pkg/dcgm/dcgm_fields.h, cited as dcgm_fields.h:line.
const (
	fieldECCDBEVolatile     uint16 = 311 // DCGM_FI_DEV_ECC_DBE_VOL_TOTAL, dcgm_fields.h:942
	fieldRetiredSBE         uint16 = 390 // DCGM_FI_DEV_RETIRED_SBE, now DCGM_FI_DEV_PAGE_RETIRED_SBE_TOTAL, dcgm_fields.h:1255
	fieldRetiredDBE         uint16 = 391 // DCGM_FI_DEV_RETIRED_DBE, now DCGM_FI_DEV_PAGE_RETIRED_DBE_TOTAL, dcgm_fields.h:1261
	fieldRetiredPending     uint16 = 392 // DCGM_FI_DEV_RETIRED_PENDING, now DCGM_FI_DEV_PAGE_RETIRED_PENDING, dcgm_fields.h:1266
	fieldRemapUncorrectable uint16 = 393 // DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS, now DCGM_FI_DEV_ROW_REMAP_UNCORRECTABLE_TOTAL, dcgm_fields.h:1271
	fieldRowRemapFailed     uint16 = 395 // DCGM_FI_DEV_ROW_REMAP_FAILURE, now DCGM_FI_DEV_ROW_REMAP_FAILED, dcgm_fields.h:1281
	fieldRowRemapPending    uint16 = 396 // DCGM_FI_DEV_ROW_REMAP_PENDING, dcgm_fields.h:1286

	// The driver's verdict (issue 19).

	// fieldRecoveryAction is DCGM_FI_DEV_GPU_RECOVERY_ACTION,
	// dcgm_fields.h:3497 ("see nvmlDeviceGpuRecoveryAction_t for return
	// values"; legacy name DCGM_FI_DEV_GET_GPU_RECOVERY_ACTION, :4006).
	fieldRecoveryAction uint16 = 1523
	// fieldMemoryUnrepairable is DCGM_FI_DEV_MEMORY_UNREPAIRABLE,
	// dcgm_fields.h:3475, 1=yes 0=no (legacy name
	// DCGM_FI_DEV_MEMORY_UNREPAIRABLE_FLAG, :4003).
	fieldMemoryUnrepairable uint16 = 1507
	// fieldSRAMExceeded is DCGM_FI_DEV_SRAM_EXCEEDED, dcgm_fields.h:1136,
	// 1=true (DCGM_FI_DEV_THRESHOLD_SRM before DCGM 4.6, :3752).
	fieldSRAMExceeded uint16 = 346
	// fieldBankRemapNone is DCGM_FI_DEV_BANK_REMAP_AVAIL_NONE,
	// dcgm_fields.h:1249, memory banks with no spare row left (legacy
	// name DCGM_FI_DEV_BANKS_REMAP_ROWS_AVAIL_NONE, :3757). The other
	// buckets, 385 MAX (:1229), 386 HIGH (:1234), 387 PARTIAL (:1239) and
	// 388 LOW (:1244), are not read: Device keeps only the None bucket,
	// and every field watched is host engine work for each run.
	fieldBankRemapNone uint16 = 389
	// DCGM has no field for NVML's repair status (channel/TPC repair
	// pending): dcgm_fields.h v1.4611.0 has none, and DCGM 4.6's health
	// watches do not check it (NODE-FACTS).

	dcgmStatusOK           = 0   // DCGM_ST_OK
	dcgmStatusNotSupported = -6  // DCGM_ST_NOT_SUPPORTED
	dcgmStatusGPUIsLost    = -18 // DCGM_ST_GPU_IS_LOST
	dcgmStatusEntityOK     = 1   // DcgmEntityStatusOk
)

// DCGM's int64 sentinels: DCGM_INT64_BLANK (dcgm_structs.h:59), then
// NOT_FOUND (:80), NOT_SUPPORTED (:100), NOT_PERMISSIONED (:120).
const (
	dcgmInt64Blank           int64 = 0x7ffffffffffffff0
	dcgmInt64NotFound              = dcgmInt64Blank + 1
	dcgmInt64NotPermissioned       = dcgmInt64Blank + 3
)

var dcgmMemoryFields = []uint16{
	fieldECCDBEVolatile, fieldRetiredSBE, fieldRetiredDBE, fieldRetiredPending,
	fieldRemapUncorrectable, fieldRowRemapFailed, fieldRowRemapPending,
	fieldRecoveryAction, fieldMemoryUnrepairable, fieldSRAMExceeded, fieldBankRemapNone,
}

// dcgmRecoveryFields are gpu-recovery's: the recovery action alone.
var dcgmRecoveryFields = []uint16{fieldRecoveryAction}

// DCGM lists GPUs through a running nv-hostengine (go-dcgm, which dlopens
// libdcgm.so.4).
type DCGM struct {
	// Addr is the host engine, host:port.
	Addr string
	// read is dcgm.Read; tests replace it.
	read func(addr string, fields []uint16) ([]dcgm.GPU, error)
}

// Name implements Backend.
func (*DCGM) Name() string { return "dcgm" }

// Devices implements Backend.
func (b *DCGM) Devices(ctx context.Context, what Read) ([]Device, error) {
	read := b.read
	if read == nil {
		read = dcgm.Read
	}
	var fields []uint16
	switch what {
	case ReadMemory:
		fields = dcgmMemoryFields
	case ReadRecovery:
		fields = dcgmRecoveryFields
	}
	return bounded(ctx, "dcgm", func() ([]Device, error) {
		raw, err := read(b.Addr, fields)
		if err != nil {
			return nil, err
		}
		return dcgmDevices(raw, what), nil
	})
}

// dcgmDevices maps DCGM's GPUs and field values to devices. A GPU whose
// entity status is Lost is lost; another status that is not OK is
// unusable. A field with DCGM_ST_NOT_SUPPORTED or a blank/not-supported
// sentinel is N/A; another error status, or a not-found/not-permitted
// sentinel, is a read error.
func dcgmDevices(raw []dcgm.GPU, what Read) []Device {
	devs := make([]Device, 0, len(raw))
	for _, g := range raw {
		d := Device{Index: int(g.ID), UUID: g.UUID}
		if id, ok := NormalizeBusID(g.BusID); ok {
			d.BusID = id
		}
		switch {
		case g.Status == dcgm.EntityStatusLost:
			d.Lost, d.Err = true, "DCGM entity status Lost"
		case g.Status != dcgmStatusEntityOK:
			d.Err = fmt.Sprintf("DCGM entity status %d", g.Status)
		case g.Err != nil:
			d.ReadErr = g.Err.Error()
		}
		if what != ReadList && d.Usable() && g.Err == nil {
			readDCGMFields(&d, g.Values, what)
		}
		devs = append(devs, d)
	}
	return devs
}

func readDCGMFields(d *Device, vals map[uint16]dcgm.Value, what Read) {
	var errs []string
	if what == ReadRecovery {
		readDCGMVerdict(d, vals, &errs, what)
		d.ReadErr = joinErr(d.ReadErr, strings.Join(errs, "; "))
		return
	}
	get := func(id uint16) (int64, bool) {
		v, ok := vals[id]
		switch {
		case !ok:
			errs = append(errs, fmt.Sprintf("field %d: no value", id))
		case v.Status == dcgmStatusGPUIsLost:
			d.Lost, d.Err = true, fmt.Sprintf("field %d: GPU is lost", id)
		case v.Status == dcgmStatusNotSupported:
		case v.Status != dcgmStatusOK:
			errs = append(errs, fmt.Sprintf("field %d: DCGM status %d", id, v.Status))
		case v.Int64 == dcgmInt64NotFound || v.Int64 == dcgmInt64NotPermissioned:
			errs = append(errs, fmt.Sprintf("field %d: not found or not permitted", id))
		case v.Int64 >= dcgmInt64Blank || v.Int64 < 0:
			// Blank or not supported: N/A for this GPU.
		default:
			return v.Int64, true
		}
		return 0, false
	}
	count := func(id uint16) Count {
		v, ok := get(id)
		return Count{Value: uint64(v), Known: ok}
	}
	flag := func(id uint16) Flag {
		v, ok := get(id)
		return Flag{Value: v != 0, Known: ok}
	}
	d.VolatileDBE = count(fieldECCDBEVolatile)
	sbe, dbe := count(fieldRetiredSBE), count(fieldRetiredDBE)
	if sbe.Known && dbe.Known {
		d.RetiredPages = Count{Value: sbe.Value + dbe.Value, Known: true}
	}
	d.RetiredPagesPending = flag(fieldRetiredPending)
	d.RemappedUncorrectable = count(fieldRemapUncorrectable)
	d.RowRemapFailed = flag(fieldRowRemapFailed)
	d.RowRemapPending = flag(fieldRowRemapPending)
	readDCGMVerdict(d, vals, &errs, what)
	d.ReadErr = joinErr(d.ReadErr, strings.Join(errs, "; "))
}

// readDCGMVerdict reads the driver's verdict (issue 19), with the signal
// names the NVML backend uses. A value DCGM reports not supported, blank,
// or for a field the host engine does not know (an older DCGM) puts the
// signal in d.Unsupported; another error status, a not-found or
// not-permitted sentinel, or no value at all is a read error naming the
// signal; GPU_IS_LOST marks the GPU lost.
func readDCGMVerdict(d *Device, vals map[uint16]dcgm.Value, errs *[]string, what Read) {
	get := func(name string, id uint16) (int64, bool) {
		v, ok := vals[id]
		switch {
		case !ok:
			*errs = append(*errs, fmt.Sprintf("%s: field %d: no value", name, id))
		case v.Status == dcgmStatusGPUIsLost:
			if !d.Lost {
				d.Lost, d.Err = true, fmt.Sprintf("%s: field %d: GPU is lost", name, id)
			}
		case v.Status == dcgmStatusNotSupported || v.Status == dcgm.StatusUnknownField:
			d.Unsupported = append(d.Unsupported, name)
		case v.Status != dcgmStatusOK:
			*errs = append(*errs, fmt.Sprintf("%s: field %d: DCGM status %d", name, id, v.Status))
		case v.Int64 == dcgmInt64NotFound || v.Int64 == dcgmInt64NotPermissioned:
			*errs = append(*errs, fmt.Sprintf("%s: field %d: not found or not permitted", name, id))
		case v.Int64 >= dcgmInt64Blank || v.Int64 < 0:
			d.Unsupported = append(d.Unsupported, name)
		default:
			return v.Int64, true
		}
		return 0, false
	}
	if v, ok := get(signalRecoveryAction, fieldRecoveryAction); ok {
		d.RecoveryAction = Recovery{Action: gpuaction.Action(v), Known: true}
	}
	if what == ReadRecovery {
		return
	}
	if v, ok := get(signalUnrepairableMemory, fieldMemoryUnrepairable); ok {
		d.UnrepairableMemory = Flag{Value: v != 0, Known: true}
	}
	if v, ok := get(signalSRAMThreshold, fieldSRAMExceeded); ok {
		d.SRAMThresholdExceeded = Flag{Value: v != 0, Known: true}
	}
	d.Unsupported = append(d.Unsupported, signalRepairStatus)
	if v, ok := get(signalRowRemapHistogram, fieldBankRemapNone); ok {
		d.BanksWithoutSpareRows = Count{Value: uint64(v), Known: true}
	}
}
