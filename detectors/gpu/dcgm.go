package gpu

import (
	"context"
	"fmt"
	"strings"

	"github.com/kubemedic/kubemedic/detectors/gpu/dcgm"
)

// DCGM field IDs, by number so that they mean the same across go-dcgm
// tags (v1.4601.x has only the legacy names). dcgm_fields.h.
const (
	fieldECCDBEVolatile     uint16 = 311 // DCGM_FI_DEV_ECC_DBE_VOL_TOTAL
	fieldRetiredSBE         uint16 = 390 // DCGM_FI_DEV_RETIRED_SBE
	fieldRetiredDBE         uint16 = 391 // DCGM_FI_DEV_RETIRED_DBE
	fieldRetiredPending     uint16 = 392 // DCGM_FI_DEV_RETIRED_PENDING
	fieldRemapUncorrectable uint16 = 393 // DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS
	fieldRowRemapFailed     uint16 = 395 // DCGM_FI_DEV_ROW_REMAP_FAILURE
	fieldRowRemapPending    uint16 = 396 // DCGM_FI_DEV_ROW_REMAP_PENDING
	dcgmStatusOK                   = 0   // DCGM_ST_OK
	dcgmStatusNotSupported         = -6  // DCGM_ST_NOT_SUPPORTED
	dcgmStatusGPUIsLost            = -18 // DCGM_ST_GPU_IS_LOST
	dcgmStatusEntityOK             = 1   // DcgmEntityStatusOk
)

// DCGM's int64 sentinels (dcgm_fields.h DCGM_FT_INT64_*): BLANK, then
// NOT_FOUND, NOT_SUPPORTED, NOT_PERMISSIONED.
const (
	dcgmInt64Blank           int64 = 0x7ffffffffffffff0
	dcgmInt64NotFound              = dcgmInt64Blank + 1
	dcgmInt64NotPermissioned       = dcgmInt64Blank + 3
)

var dcgmMemoryFields = []uint16{
	fieldECCDBEVolatile, fieldRetiredSBE, fieldRetiredDBE, fieldRetiredPending,
	fieldRemapUncorrectable, fieldRowRemapFailed, fieldRowRemapPending,
}

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
func (b *DCGM) Devices(ctx context.Context, memory bool) ([]Device, error) {
	read := b.read
	if read == nil {
		read = dcgm.Read
	}
	var fields []uint16
	if memory {
		fields = dcgmMemoryFields
	}
	return bounded(ctx, "dcgm", func() ([]Device, error) {
		raw, err := read(b.Addr, fields)
		if err != nil {
			return nil, err
		}
		return dcgmDevices(raw, memory), nil
	})
}

// dcgmDevices maps DCGM's GPUs and field values to devices. A GPU whose
// entity status is Lost is lost; another status that is not OK is
// unusable. A field with DCGM_ST_NOT_SUPPORTED or a blank/not-supported
// sentinel is N/A; another error status, or a not-found/not-permitted
// sentinel, is a read error.
func dcgmDevices(raw []dcgm.GPU, memory bool) []Device {
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
		if memory && d.Usable() && g.Err == nil {
			readDCGMFields(&d, g.Values)
		}
		devs = append(devs, d)
	}
	return devs
}

func readDCGMFields(d *Device, vals map[uint16]dcgm.Value) {
	var errs []string
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
	d.ReadErr = joinErr(d.ReadErr, strings.Join(errs, "; "))
}
