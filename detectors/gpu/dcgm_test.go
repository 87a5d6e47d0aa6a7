package gpu

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/detectors/gpu/dcgm"
)

func dcgmHealthy() map[uint16]dcgm.Value {
	return map[uint16]dcgm.Value{
		fieldECCDBEVolatile: {Int64: 0}, fieldRetiredSBE: {Int64: dcgmInt64Blank + 2}, fieldRetiredDBE: {Int64: dcgmInt64Blank + 2},
		fieldRetiredPending: {Status: dcgmStatusNotSupported}, fieldRemapUncorrectable: {Int64: 0},
		fieldRowRemapFailed: {Int64: 0}, fieldRowRemapPending: {Int64: 0},
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
	devs := dcgmDevices(raw, true)
	require.Equal(t, Device{Index: 0, BusID: "0000:07:00.0", UUID: "GPU-0", VolatileDBE: Count{0, true},
		RemappedUncorrectable: Count{0, true}, RowRemapFailed: Flag{false, true}, RowRemapPending: Flag{false, true}}, devs[0])
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
	r, _ := DecideLost(LostInput{Backend: "dcgm", Devices: dcgmDevices(raw, false), Expected: 8})
	require.Equal(t, "GPUFellOffBus: GPU 0000:47:00.0 is lost (fell off the bus); reboot required", r.Line())
}

func TestDCGMBackend(t *testing.T) {
	var gotAddr string
	var gotFields []uint16
	b := &DCGM{Addr: "127.0.0.1:5555", read: func(addr string, fields []uint16) ([]dcgm.GPU, error) {
		gotAddr, gotFields = addr, fields
		return []dcgm.GPU{{ID: 0, BusID: "00000000:07:00.0", Status: dcgmStatusEntityOK, Values: dcgmHealthy()}}, nil
	}}
	devs, err := b.Devices(context.Background(), false)
	require.NoError(t, err)
	require.Len(t, devs, 1)
	require.Equal(t, "127.0.0.1:5555", gotAddr)
	require.Empty(t, gotFields)
	_, err = b.Devices(context.Background(), true)
	require.NoError(t, err)
	require.Equal(t, []uint16{311, 390, 391, 392, 393, 395, 396}, gotFields)
}

func TestDCGMRealLibraryAbsent(t *testing.T) {
	// Without libdcgm.so.4 (or a host engine) go-dcgm's Init must fail
	// cleanly.
	_, err := (&DCGM{Addr: "127.0.0.1:1"}).Devices(context.Background(), true)
	if err == nil {
		t.Skip("a DCGM host engine answers on 127.0.0.1:1")
	}
	require.ErrorContains(t, err, "dcgm: connect to 127.0.0.1:1")
}
