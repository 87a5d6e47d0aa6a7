package gpu

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/detectors/gpu/dcgm"
	"github.com/kubemedic/kubemedic/detectors/gpuaction"
)

// dcgmHealthy is a healthy Hopper as DCGM 4.6 reports it: no page
// retirement, row remapping clean, and the driver's verdict readable and
// healthy (recovery action None, no unrepairable memory, SRAM below its
// threshold, no bank without spare rows).
func dcgmHealthy() map[uint16]dcgm.Value {
	return map[uint16]dcgm.Value{
		fieldECCDBEVolatile: {Int64: 0}, fieldRetiredSBE: {Int64: dcgmInt64Blank + 2}, fieldRetiredDBE: {Int64: dcgmInt64Blank + 2},
		fieldRetiredPending: {Status: dcgmStatusNotSupported}, fieldRemapUncorrectable: {Int64: 0},
		fieldRowRemapFailed: {Int64: 0}, fieldRowRemapPending: {Int64: 0},
		fieldRecoveryAction: {Int64: 0}, fieldMemoryUnrepairable: {Int64: 0}, fieldSRAMExceeded: {Int64: 0}, fieldBankRemapNone: {Int64: 0},
	}
}

func TestDCGMDevices(t *testing.T) {
	pending := dcgmHealthy()
	pending[fieldRowRemapPending] = dcgm.Value{Int64: 1}
	pending[fieldECCDBEVolatile] = dcgm.Value{Int64: 2}
	volta := dcgmHealthy()
	volta[fieldRetiredSBE], volta[fieldRetiredDBE], volta[fieldRetiredPending] = dcgm.Value{Int64: 40}, dcgm.Value{Int64: 21}, dcgm.Value{Int64: 1}
	volta[fieldRowRemapFailed], volta[fieldRowRemapPending], volta[fieldRemapUncorrectable] = dcgm.Value{Int64: dcgmInt64Blank}, dcgm.Value{Status: dcgmStatusNotSupported}, dcgm.Value{Int64: dcgmInt64Blank + 2}
	badField := dcgmHealthy()
	badField[fieldRowRemapFailed] = dcgm.Value{Status: -14}
	delete(badField, fieldRowRemapPending)
	lostField := dcgmHealthy()
	lostField[fieldECCDBEVolatile] = dcgm.Value{Status: dcgmStatusGPUIsLost}

	raw := []dcgm.GPU{
		{ID: 0, BusID: "00000000:07:00.0", UUID: "GPU-0", Status: dcgmStatusEntityOK, Values: dcgmHealthy()},
		{ID: 1, BusID: "00000000:0F:00.0", Status: dcgmStatusEntityOK, Values: pending},
		{ID: 2, BusID: "00000000:47:00.0", Status: dcgm.EntityStatusLost},
		{ID: 3, BusID: "00000000:4E:00.0", Status: 3},
		{ID: 4, BusID: "00000000:87:00.0", Status: dcgmStatusEntityOK, Values: volta},
		{ID: 5, BusID: "00000000:90:00.0", Status: dcgmStatusEntityOK, Values: badField},
		{ID: 6, BusID: "00000000:B7:00.0", Status: dcgmStatusEntityOK, Values: lostField},
		{ID: 7, BusID: "00000000:BD:00.0", Status: dcgmStatusEntityOK, Err: errors.New("read fields: timeout")},
	}
	devs := dcgmDevices(raw, ReadMemory)
	require.Equal(t, Device{Index: 0, BusID: "0000:07:00.0", UUID: "GPU-0", VolatileDBE: Count{0, true},
		RemappedUncorrectable: Count{0, true}, RowRemapFailed: Flag{false, true}, RowRemapPending: Flag{false, true},
		RecoveryAction: Recovery{gpuaction.None, true}, UnrepairableMemory: Flag{false, true}, SRAMThresholdExceeded: Flag{false, true},
		BanksWithoutSpareRows: Count{0, true}, Unsupported: []string{"repair status"}}, devs[0])
	require.Equal(t, Flag{true, true}, devs[1].RowRemapPending)
	require.Equal(t, Count{2, true}, devs[1].VolatileDBE)
	require.True(t, devs[2].Lost)
	require.Equal(t, "0000:47:00.0", devs[2].BusID)
	require.False(t, devs[3].Lost)
	require.False(t, devs[3].Usable())
	require.Equal(t, Count{61, true}, devs[4].RetiredPages)
	require.Equal(t, Flag{true, true}, devs[4].RetiredPagesPending)
	require.Equal(t, Flag{}, devs[4].RowRemapFailed)
	require.Empty(t, devs[4].ReadErr)
	require.Equal(t, "field 395: DCGM status -14; field 396: no value", devs[5].ReadErr)
	require.True(t, devs[6].Lost)
	require.Equal(t, "read fields: timeout", devs[7].ReadErr)

	require.Equal(t, "RetiredPageLimit: 60+ retired pages on 0000:87:00.0; replace GPU",
		DecideMemory("dcgm", devs, Thresholds{DBE: 1, RetiredPages: 60}).Line())
	r, _ := DecideLost(LostInput{Backend: "dcgm", Devices: dcgmDevices(raw, ReadList), Expected: 8})
	require.Equal(t, "GPUFellOffBus: GPU 0000:47:00.0 is lost (fell off the bus); reboot required", r.Line())
}

func TestDCGMBackend(t *testing.T) {
	var gotAddr string
	var gotFields []uint16
	b := &DCGM{Addr: "127.0.0.1:5555", read: func(addr string, fields []uint16) ([]dcgm.GPU, error) {
		gotAddr, gotFields = addr, fields
		return []dcgm.GPU{{ID: 0, BusID: "00000000:07:00.0", Status: dcgmStatusEntityOK, Values: dcgmHealthy()}}, nil
	}}
	devs, err := b.Devices(context.Background(), ReadList)
	require.NoError(t, err)
	require.Len(t, devs, 1)
	require.Equal(t, "127.0.0.1:5555", gotAddr)
	require.Empty(t, gotFields)
	_, err = b.Devices(context.Background(), ReadMemory)
	require.NoError(t, err)
	require.Equal(t, []uint16{311, 390, 391, 392, 393, 395, 396, 1523, 1507, 346, 389}, gotFields)
	// gpu-recovery asks for the recovery action alone, and a missing
	// memory field is then no read error.
	devs, err = b.Devices(context.Background(), ReadRecovery)
	require.NoError(t, err)
	require.Equal(t, []uint16{1523}, gotFields)
	require.Equal(t, Recovery{gpuaction.None, true}, devs[0].RecoveryAction)
	only := dcgmDevices([]dcgm.GPU{{ID: 0, BusID: "00000000:07:00.0", Status: dcgmStatusEntityOK,
		Values: map[uint16]dcgm.Value{fieldRecoveryAction: {Status: dcgmStatusOK, Int64: 2}}}}, ReadRecovery)
	require.Empty(t, only[0].ReadErr)
	require.Empty(t, only[0].Unsupported)
	require.Equal(t, Recovery{gpuaction.NodeReboot, true}, only[0].RecoveryAction)
	require.False(t, only[0].UnrepairableMemory.Known)
}

func TestDCGMRealLibraryAbsent(t *testing.T) {
	// Without libdcgm.so.4 (or a host engine) go-dcgm's Init must fail
	// cleanly.
	_, err := (&DCGM{Addr: "127.0.0.1:1"}).Devices(context.Background(), ReadMemory)
	if err == nil {
		t.Skip("a DCGM host engine answers on 127.0.0.1:1")
	}
	require.ErrorContains(t, err, "dcgm: connect to 127.0.0.1:1")
}

func TestDCGMVerdictValues(t *testing.T) {
	var raw []dcgm.GPU
	for a := range 5 {
		v := dcgmHealthy()
		v[fieldRecoveryAction] = dcgm.Value{Int64: int64(a)}
		raw = append(raw, dcgm.GPU{ID: uint(a), Status: dcgmStatusEntityOK, Values: v})
	}
	faulty := dcgmHealthy()
	faulty[fieldMemoryUnrepairable], faulty[fieldSRAMExceeded], faulty[fieldBankRemapNone] = dcgm.Value{Int64: 1}, dcgm.Value{Int64: 1}, dcgm.Value{Int64: 3}
	raw = append(raw, dcgm.GPU{ID: 5, Status: dcgmStatusEntityOK, Values: faulty})

	devs := dcgmDevices(raw, ReadMemory)
	for i, want := range []gpuaction.Action{gpuaction.None, gpuaction.GPUReset, gpuaction.NodeReboot, gpuaction.DrainP2P, gpuaction.DrainAndReset} {
		require.Equal(t, Recovery{want, true}, devs[i].RecoveryAction, "GPU %d", i)
	}
	require.Equal(t, Flag{true, true}, devs[5].UnrepairableMemory)
	require.Equal(t, Flag{true, true}, devs[5].SRAMThresholdExceeded)
	require.Equal(t, Count{3, true}, devs[5].BanksWithoutSpareRows)
	for i, d := range devs {
		require.Empty(t, d.ReadErr, "GPU %d", i)
		require.Equal(t, []string{signalRepairStatus}, d.Unsupported, "GPU %d: DCGM has no repair status field", i)
		require.Equal(t, Flag{}, d.ChannelRepairPending)
		require.Equal(t, Flag{}, d.TPCRepairPending)
	}
	require.Empty(t, dcgmDevices(raw, ReadList)[5].Unsupported, "nothing read without memory")
}

// TestDCGMVerdictStatuses sets one verdict field on GPU 0 and checks that
// its signal is Known, Unsupported, a read error, or the GPU lost.
func TestDCGMVerdictStatuses(t *testing.T) {
	signals := []struct {
		name  string
		id    uint16
		known func(Device) bool
	}{
		{signalRecoveryAction, fieldRecoveryAction, func(d Device) bool { return d.RecoveryAction.Known }},
		{signalUnrepairableMemory, fieldMemoryUnrepairable, func(d Device) bool { return d.UnrepairableMemory.Known }},
		{signalSRAMThreshold, fieldSRAMExceeded, func(d Device) bool { return d.SRAMThresholdExceeded.Known }},
		{signalRowRemapHistogram, fieldBankRemapNone, func(d Device) bool { return d.BanksWithoutSpareRows.Known }},
	}
	for _, sig := range signals {
		for _, tc := range []struct {
			desc        string
			val         *dcgm.Value // nil: no value
			known       bool
			unsupported bool
			readErr     string // after "<signal>: field <id>: "
			lost        bool
			status      string
		}{
			{desc: "value", val: &dcgm.Value{Int64: 0}, known: true, status: "OK"},
			{desc: "status not supported", val: &dcgm.Value{Status: dcgmStatusNotSupported}, unsupported: true, status: "OK"},
			{desc: "field unknown to the host engine", val: &dcgm.Value{Status: dcgm.StatusUnknownField}, unsupported: true, status: "OK"},
			{desc: "blank", val: &dcgm.Value{Int64: dcgmInt64Blank}, unsupported: true, status: "OK"},
			{desc: "not supported sentinel", val: &dcgm.Value{Int64: dcgmInt64Blank + 2}, unsupported: true, status: "OK"},
			{desc: "no data", val: &dcgm.Value{Status: -14}, readErr: "DCGM status -14", status: "Unknown"},
			{desc: "not permitted sentinel", val: &dcgm.Value{Int64: dcgmInt64NotPermissioned}, readErr: "not found or not permitted", status: "Unknown"},
			{desc: "no value", readErr: "no value", status: "Unknown"},
			{desc: "GPU lost", val: &dcgm.Value{Status: dcgmStatusGPUIsLost}, lost: true, status: "Unknown"},
		} {
			t.Run(sig.name+"/"+tc.desc, func(t *testing.T) {
				v := dcgmHealthy()
				if tc.val != nil {
					v[sig.id] = *tc.val
				} else {
					delete(v, sig.id)
				}
				devs := dcgmDevices([]dcgm.GPU{
					{ID: 0, BusID: "00000000:07:00.0", Status: dcgmStatusEntityOK, Values: v},
					{ID: 1, BusID: "00000000:0F:00.0", Status: dcgmStatusEntityOK, Values: dcgmHealthy()},
				}, ReadMemory)
				d := devs[0]
				require.Equal(t, tc.known, sig.known(d), "Known")
				want := []string{signalRepairStatus}
				if tc.unsupported {
					want = append(want, sig.name)
				}
				require.ElementsMatch(t, want, d.Unsupported)
				if tc.readErr != "" {
					require.Equal(t, fmt.Sprintf("%s: field %d: %s", sig.name, sig.id, tc.readErr), d.ReadErr)
				} else {
					require.Empty(t, d.ReadErr)
				}
				require.Equal(t, tc.lost, d.Lost)
				if tc.lost {
					require.Equal(t, fmt.Sprintf("%s: field %d: GPU is lost", sig.name, sig.id), d.Err)
				}
				require.Equal(t, tc.status, DecideMemory("dcgm", devs, Thresholds{DBE: 1, RetiredPages: 60}).Status.String())
			})
		}
	}
}

func TestDCGMVerdictOldGenerationsAndEngines(t *testing.T) {
	// An A100: no unrepairable-memory flag (Hopper+).
	a100 := dcgmHealthy()
	a100[fieldMemoryUnrepairable] = dcgm.Value{Int64: dcgmInt64Blank + 2}
	// A V100: page retirement, no row remapping, no histogram, no SRAM
	// threshold.
	v100 := dcgmHealthy()
	v100[fieldRetiredSBE], v100[fieldRetiredDBE], v100[fieldRetiredPending] = dcgm.Value{Int64: 0}, dcgm.Value{Int64: 0}, dcgm.Value{Int64: 0}
	v100[fieldRowRemapFailed], v100[fieldRowRemapPending], v100[fieldRemapUncorrectable] = dcgm.Value{Int64: dcgmInt64Blank}, dcgm.Value{Status: dcgmStatusNotSupported}, dcgm.Value{Int64: dcgmInt64Blank + 2}
	v100[fieldBankRemapNone] = dcgm.Value{Int64: dcgmInt64Blank + 2}
	v100[fieldSRAMExceeded] = dcgm.Value{Status: dcgmStatusNotSupported}
	v100[fieldMemoryUnrepairable] = dcgm.Value{Int64: dcgmInt64Blank}
	// A host engine older than the recovery action and unrepairable
	// memory fields: the adaptor reads the rest and marks these unknown.
	oldEngine := dcgmHealthy()
	oldEngine[fieldRecoveryAction], oldEngine[fieldMemoryUnrepairable] = dcgm.Value{Status: dcgm.StatusUnknownField}, dcgm.Value{Status: dcgm.StatusUnknownField}
	oldEngine[fieldRowRemapPending] = dcgm.Value{Int64: 1}

	devs := dcgmDevices([]dcgm.GPU{
		{ID: 0, BusID: "00000000:07:00.0", Status: dcgmStatusEntityOK, Values: a100},
		{ID: 1, BusID: "00000000:0F:00.0", Status: dcgmStatusEntityOK, Values: v100},
		{ID: 2, BusID: "00000000:47:00.0", Status: dcgmStatusEntityOK, Values: oldEngine},
	}, ReadMemory)
	require.Equal(t, []string{signalUnrepairableMemory, signalRepairStatus}, devs[0].Unsupported)
	require.Equal(t, Recovery{gpuaction.None, true}, devs[0].RecoveryAction)
	require.Equal(t, Count{0, true}, devs[0].BanksWithoutSpareRows)
	require.Equal(t, []string{signalUnrepairableMemory, signalSRAMThreshold, signalRepairStatus, signalRowRemapHistogram}, devs[1].Unsupported)
	require.Equal(t, Count{0, true}, devs[1].RetiredPages)
	require.Equal(t, []string{signalRecoveryAction, signalUnrepairableMemory, signalRepairStatus}, devs[2].Unsupported)
	require.Equal(t, Flag{false, true}, devs[2].SRAMThresholdExceeded)
	for i, d := range devs {
		require.Empty(t, d.ReadErr, "GPU %d", i)
	}
	// Judged by what they do report: the old engine's pending remap.
	r := DecideMemory("dcgm", devs, Thresholds{DBE: 1, RetiredPages: 60})
	require.Equal(t, "NonOK", r.Status.String())
	require.Contains(t, r.Line(), "RowRemapPending: ")
	require.Contains(t, r.Line(), "0000:47:00.0")
}
