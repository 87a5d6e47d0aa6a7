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
	"slices"

	"github.com/NVIDIA/go-dcgm/pkg/dcgm"
)

// EntityStatusLost is DCGM's status for a GPU that NVML reports lost
// (DcgmEntityStatusLost).
const EntityStatusLost = uint(dcgm.EntityStatusLost)

// StatusUnknownField is the Value.Status Read gives a field the host engine
// does not know (DCGM_ST_UNKNOWN_FIELD, dcgm_structs.h:358): a host engine
// older than the field. It is not a read error: the field is not supported
// there.
const StatusUnknownField = -13

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
// missing, host engine unreachable) is an error. A field the host engine
// does not know is not read, and each read GPU's Values has it with
// StatusUnknownField.
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

	name := fmt.Sprintf("kubemedic-detect-%d", os.Getpid())
	fg, unknown, err := createKnown(name, fields, createFieldGroup, func(h dcgm.FieldHandle) { _ = dcgm.FieldGroupDestroy(h) })
	if err != nil {
		return nil, fmt.Errorf("dcgm: create field group: %w", err)
	}
	defer func() { _ = dcgm.FieldGroupDestroy(fg) }()
	short := make([]dcgm.Short, 0, len(fields))
	for _, f := range fields {
		if !slices.Contains(unknown, f) {
			short = append(short, dcgm.Short(f))
		}
	}
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
		g.Values = make(map[uint16]Value, len(fields))
		for _, v := range vals {
			g.Values[uint16(v.FieldID)] = Value{Status: v.Status, Int64: v.Int64()}
		}
		for _, f := range unknown {
			g.Values[f] = Value{Status: StatusUnknownField}
		}
	}
	return gpus, nil
}

func createFieldGroup(name string, fields []uint16) (dcgm.FieldHandle, error) {
	short := make([]dcgm.Short, len(fields))
	for i, f := range fields {
		short[i] = dcgm.Short(f)
	}
	return dcgm.FieldGroupCreate(name, short)
}

// createKnown creates a field group of fields, leaving out those the host
// engine does not know, and returns them as unknown. A host engine refuses
// a whole field group when one ID is not in its own field table
// (DcgmFieldGroupManager::AddFieldGroup answers DCGM_ST_BADPARAM), so a
// field newer than the node's DCGM (the recovery action, 1523, is in
// DCGM 4.x only) would otherwise lose every other field's evidence. On
// that refusal each field is tried alone, once; only an old host engine
// pays for it. When no field passes alone, the refusal was not about a
// field (the connection, the group limit) and its error is returned.
func createKnown[H any](name string, fields []uint16, create func(string, []uint16) (H, error), destroy func(H)) (fg H, unknown []uint16, err error) {
	fg, err = create(name, fields)
	if err == nil || len(fields) < 2 {
		return fg, nil, err
	}
	known := make([]uint16, 0, len(fields))
	for _, f := range fields {
		probe, perr := create(name+"-probe", []uint16{f})
		if perr != nil {
			unknown = append(unknown, f)
			continue
		}
		destroy(probe)
		known = append(known, f)
	}
	if len(known) == 0 || len(unknown) == 0 {
		return fg, nil, err
	}
	fg, err = create(name, known)
	if err != nil {
		return fg, nil, err
	}
	return fg, unknown, nil
}
