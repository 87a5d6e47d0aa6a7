// Package dcgm is kubemedic's thin adaptor over go-dcgm: it connects to a
// running nv-hostengine, lists the GPUs with their entity status, and reads
// the latest values of the fields it is given, by number. It returns raw
// values and makes no health decision; package gpu maps them to devices.
//
// It must never start a host engine (Embedded or StartHostengine mode): a
// one-shot check would pay the start-up cost and race the node's own
// nv-hostengine.
package dcgm

import (
	"fmt"
	"os"

	"github.com/NVIDIA/go-dcgm/pkg/dcgm"
)

// EntityStatusLost is DCGM's status for a GPU that NVML reports lost
// (DcgmEntityStatusLost).
const EntityStatusLost = uint(dcgm.EntityStatusLost)

// Value is one field value as DCGM returned it.
type Value struct {
	// Status is the DCGM return code for this field (0 DCGM_ST_OK).
	Status int
	// Int64 is the value; DCGM's blank sentinels are passed through.
	Int64 int64
}

// GPU is one GPU DCGM knows about.
type GPU struct {
	ID    uint
	BusID string
	UUID  string
	// Status is the DCGM entity status (dcgm.EntityStatus).
	Status uint
	// Values holds the requested fields by number; nil when they could
	// not be read, with Err saying why.
	Values map[uint16]Value
	Err    error
}

// Read connects to the host engine at addr (host:port), lists the GPUs and
// reads fields for each GPU whose status is OK. Init failure (libdcgm.so.4
// missing, host engine unreachable) is an error.
func Read(addr string, fields []uint16) ([]GPU, error) {
	cleanup, err := dcgm.Init(dcgm.Standalone, addr, "0")
	if err != nil {
		return nil, fmt.Errorf("dcgm: connect to %s: %w", addr, err)
	}
	defer cleanup()

	ids, err := dcgm.GetEntityGroupEntities(dcgm.FE_GPU)
	if err != nil {
		return nil, fmt.Errorf("dcgm: list GPUs: %w", err)
	}
	gpus := make([]GPU, 0, len(ids))
	var ok []uint
	for _, id := range ids {
		g := GPU{ID: id, Status: uint(dcgm.GetGPUStatus(id))}
		if info, err := dcgm.GetDeviceInfo(id); err == nil {
			g.BusID, g.UUID = info.PCI.BusID, info.UUID
		} else if g.Status == uint(dcgm.EntityStatusOk) {
			g.Err = fmt.Errorf("device attributes: %w", err)
		}
		if g.Status == uint(dcgm.EntityStatusOk) && g.Err == nil {
			ok = append(ok, id)
		}
		gpus = append(gpus, g)
	}
	if len(ok) == 0 || len(fields) == 0 {
		return gpus, nil
	}

	short := make([]dcgm.Short, len(fields))
	for i, f := range fields {
		short[i] = dcgm.Short(f)
	}
	name := fmt.Sprintf("kubemedic-detect-%d", os.Getpid())
	fg, err := dcgm.FieldGroupCreate(name, short)
	if err != nil {
		return nil, fmt.Errorf("dcgm: create field group: %w", err)
	}
	defer func() { _ = dcgm.FieldGroupDestroy(fg) }()
	group, err := dcgm.CreateGroup(name)
	if err != nil {
		return nil, fmt.Errorf("dcgm: create GPU group: %w", err)
	}
	defer func() { _ = dcgm.DestroyGroup(group) }()
	for _, id := range ok {
		if err := dcgm.AddToGroup(group, id); err != nil {
			return nil, fmt.Errorf("dcgm: add GPU %d to group: %w", id, err)
		}
	}
	// Watching makes the host engine sample the fields now
	// (WatchFieldsWithGroup waits for one update), so a one-shot read sees
	// current values even when nothing else watches them.
	if err := dcgm.WatchFieldsWithGroup(fg, group); err != nil {
		return nil, fmt.Errorf("dcgm: watch fields: %w", err)
	}
	defer func() { _ = dcgm.UnwatchFields(fg, group) }()

	for i := range gpus {
		g := &gpus[i]
		if g.Status != uint(dcgm.EntityStatusOk) || g.Err != nil {
			continue
		}
		vals, err := dcgm.GetLatestValuesForFields(g.ID, short)
		if err != nil {
			g.Err = fmt.Errorf("read fields: %w", err)
			continue
		}
		g.Values = make(map[uint16]Value, len(vals))
		for _, v := range vals {
			g.Values[uint16(v.FieldID)] = Value{Status: v.Status, Int64: v.Int64()}
		}
	}
	return gpus, nil
}
