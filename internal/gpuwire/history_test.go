package gpuwire_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/internal/gpuwire"
	"github.com/kubemedic/kubemedic/internal/gpuwire/gpuwiretest"
	"github.com/kubemedic/kubemedic/test/testsupport"
)

// TestBusRegexIsTheTemplates reads the reset-gpu template's GPU_BUS_ID
// messageRegex from the example templates: GPUFromMessage must name the GPU
// the reset acts on.
func TestBusRegexIsTheTemplates(t *testing.T) {
	require.Equal(t, testsupport.ResetGPUBusRegex(t).String(), gpuwire.BusRe.String())
}

func TestGPUFromMessage(t *testing.T) {
	for _, tc := range []struct {
		desc, msg, bus, uuid string
	}{
		{desc: "xid message from the detector", msg: "XidRebootRequired: Xid 79 on 0000:3b:00.0: fell off the bus; reboot required", bus: "0000:3b:00.0"},
		{desc: "nvidia-smi 8-digit upper-case domain", msg: "VolatileDBE: 2 volatile DBEs on 00000000:3B:00.0", bus: "0000:3b:00.0"},
		{desc: "domain above ffff keeps its digits", msg: "on 00010000:3b:00.1", bus: "10000:3b:00.1"},
		{desc: "first bus ID wins, as in the template", msg: "Xid 48 on 0000:3b:00.0 (+1 GPUs) 0000:86:00.0", bus: "0000:3b:00.0"},
		{desc: "bus and UUID", msg: "RowRemapFailed: GPU-0F1E2D3C-4B5A-6978-8A9B-0C1D2E3F4A5B on 0000:af:00.0; replace GPU", bus: "0000:af:00.0", uuid: gpuwiretest.UUIDA},
		{desc: "UUID only", msg: "GPUFellOffBus: " + gpuwiretest.UUIDB + " is lost", uuid: gpuwiretest.UUIDB},
		{desc: "function digit above 7 is no bus ID", msg: "on 0000:3b:00.8"},
		{desc: "3-digit domain is no bus ID", msg: "on 000:3b:00.0"},
		{desc: "bus ID inside a longer word is not taken", msg: "x0000:3b:00.0"},
		{desc: "short UUID is no UUID", msg: "GPU-0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5"},
		{desc: "no GPU", msg: "GPUCountMismatch: 7 GPUs visible, 8 expected"},
		{desc: "empty", msg: ""},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			bus, uuid := gpuwire.GPUFromMessage(tc.msg)
			require.Equal(t, tc.bus, bus, "bus")
			require.Equal(t, tc.uuid, uuid, "uuid")
		})
	}
}

func TestNormalizeBus(t *testing.T) {
	for in, want := range map[string]string{
		"0000:3b:00.0":     "0000:3b:00.0",
		"00000000:3B:00.7": "0000:3b:00.7",
		"0001:3b:00.0":     "0001:3b:00.0",
		"ffffffff:ff:1f.0": "ffffffff:ff:1f.0",
		"0000:3b:00.0 ":    "",
		" 0000:3b:00.0":    "",
		"0000:3b:00":       "",
		"":                 "",
	} {
		require.Equal(t, want, gpuwire.NormalizeBus(in), "NormalizeBus(%q)", in)
	}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		desc string
		in   string
		want gpuwire.History
		err  string
	}{
		{desc: "empty string is an empty history", in: "", want: gpuwire.History{Version: gpuwire.Version}},
		{desc: "no entries", in: `{"v":1}`, want: gpuwire.History{Version: gpuwire.Version}},
		{desc: "empty entries list is no entries", in: `{"v":1,"entries":[]}`, want: gpuwire.History{Version: gpuwire.Version}},
		{
			desc: "fault and operation",
			in: `{"v":1,"entries":[` +
				`{"time":"2026-03-04T12:00:00Z","bus":"0000:3b:00.0","fault":{"condition":"GPUXidError","reason":"XidResetRequired","xid":48}},` +
				`{"time":"2026-03-04T14:00:00+02:00","bus":"0000:3b:00.0","uuid":"` + gpuwiretest.UUIDA + `","op":{"name":"op-1","policy":"gpu","step":1,"operation":"reset-gpu","outcome":"Failed"}}]}`,
			want: gpuwiretest.Hist(gpuwiretest.Fault(gpuwiretest.T0, "0000:3b:00.0", "", 48), gpuwiretest.Op(gpuwiretest.T0, "0000:3b:00.0", gpuwiretest.UUIDA, "op-1", gpuwire.Failed)),
		},
		{desc: "wrong version", in: `{"v":2}`, err: "v: 2, want 1"},
		{desc: "missing version", in: `{"entries":[]}`, err: "v: 0, want 1"},
		{desc: "unknown top-level field", in: `{"v":1,"node":"n0"}`, err: `unknown field "node"`},
		{desc: "unknown entry field", in: `{"v":1,"entries":[{"time":"2026-03-04T12:00:00Z","gpu":"0","fault":{"condition":"GPULost"}}]}`, err: `unknown field "gpu"`},
		{desc: "unknown fault field", in: `{"v":1,"entries":[{"time":"2026-03-04T12:00:00Z","fault":{"condition":"GPULost","sbe":1}}]}`, err: `unknown field "sbe"`},
		{desc: "trailing data", in: `{"v":1} {}`, err: "data after the JSON object"},
		{desc: "not JSON", in: `v=1`, err: "decode kubemedic.io/gpu-history"},
		{desc: "missing time", in: `{"v":1,"entries":[{"fault":{"condition":"GPULost"}}]}`, err: "entries[0].time"},
		{desc: "bus not normalised", in: `{"v":1,"entries":[{"time":"2026-03-04T12:00:00Z","bus":"00000000:3B:00.0","fault":{"condition":"GPULost"}}]}`, err: "entries[0].bus"},
		{desc: "uuid upper case", in: `{"v":1,"entries":[{"time":"2026-03-04T12:00:00Z","uuid":"GPU-0F1E2D3C-4B5A-6978-8A9B-0C1D2E3F4A5B","fault":{"condition":"GPULost"}}]}`, err: "entries[0].uuid"},
		{desc: "neither fault nor op", in: `{"v":1,"entries":[{"time":"2026-03-04T12:00:00Z"}]}`, err: "entries[0].fault, op: exactly one"},
		{desc: "both fault and op", in: `{"v":1,"entries":[{"time":"2026-03-04T12:00:00Z","fault":{"condition":"GPULost"},"op":{"name":"a","operation":"reboot","outcome":"Failed"}}]}`, err: "entries[0].fault, op: exactly one"},
		{desc: "unknown outcome", in: `{"v":1,"entries":[{"time":"2026-03-04T12:00:00Z","op":{"name":"a","operation":"reboot","outcome":"Running"}}]}`, err: `entries[0].op.outcome: "Running"`},
		{desc: "fault without condition", in: `{"v":1,"entries":[{"time":"2026-03-04T12:00:00Z","fault":{"reason":"X"}}]}`, err: "entries[0].fault.condition: required"},
		{desc: "negative xid", in: `{"v":1,"entries":[{"time":"2026-03-04T12:00:00Z","fault":{"condition":"GPUXidError","xid":-1}}]}`, err: "entries[0].fault.xid"},
		{desc: "negative step", in: `{"v":1,"entries":[{"time":"2026-03-04T12:00:00Z","op":{"name":"a","operation":"reboot","outcome":"Failed","step":-1}}]}`, err: "entries[0].op.step"},
		{desc: "over-long name", in: `{"v":1,"entries":[{"time":"2026-03-04T12:00:00Z","op":{"name":"` + strings.Repeat("a", 254) + `","operation":"reboot","outcome":"Failed"}}]}`, err: "entries[0].op.name: 254 bytes"},
		{desc: "control character", in: `{"v":1,"entries":[{"time":"2026-03-04T12:00:00Z","fault":{"condition":"GPULost\n"}}]}`, err: "entries[0].fault.condition"},
		{
			desc: "entries out of order",
			in:   `{"v":1,"entries":[{"time":"2026-03-04T12:00:01Z","fault":{"condition":"GPULost"}},{"time":"2026-03-04T12:00:00Z","fault":{"condition":"GPULost"}}]}`,
			err:  "entries[1].time: 2026-03-04T12:00:00Z is before entries[0]'s",
		},
		{desc: "UTC year past 9999", in: `{"v":1,"entries":[{"time":"9999-12-31T23:00:00-02:00","fault":{"condition":"GPULost"}}]}`, err: "entries[0].time"},
		{desc: "too many entries", in: `{"v":1,"entries":[` + strings.TrimSuffix(strings.Repeat(`{"time":"2026-03-04T12:00:00Z","fault":{"condition":"GPULost"}},`, gpuwire.MaxEntries+1), ",") + `]}`, err: "entries: 65, more than 64"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := gpuwire.Parse(tc.in)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestEncode(t *testing.T) {
	for _, tc := range []struct {
		desc string
		h    gpuwire.History
		want string
		err  string
	}{
		{desc: "zero value is an empty history", h: gpuwire.History{}, want: `{"v":1}`},
		{
			desc: "fault then operation",
			h:    gpuwiretest.Hist(gpuwiretest.Fault(gpuwiretest.T0, "0000:3b:00.0", "", 79), gpuwiretest.Op(gpuwiretest.At(time.Hour), "0000:3b:00.0", gpuwiretest.UUIDA, "op-1", gpuwire.Succeeded)),
			want: `{"v":1,"entries":[` +
				`{"time":"2026-03-04T12:00:00Z","bus":"0000:3b:00.0","fault":{"condition":"GPUXidError","reason":"XidResetRequired","xid":79}},` +
				`{"time":"2026-03-04T13:00:00Z","bus":"0000:3b:00.0","uuid":"` + gpuwiretest.UUIDA + `","op":{"name":"op-1","policy":"gpu","step":1,"operation":"reset-gpu","outcome":"Succeeded"}}]}`,
		},
		{desc: "wrong version", h: gpuwire.History{Version: 3}, err: "v: 3, want 1"},
		{desc: "invalid entry", h: gpuwiretest.Hist(gpuwire.Entry{Time: gpuwiretest.T0}), err: "entries[0].fault, op"},
		{desc: "non-UTC time", h: gpuwiretest.Hist(gpuwiretest.Fault(gpuwiretest.T0.In(time.FixedZone("CET", 3600)), "", "", 0)), err: "entries[0].time"},
		{desc: "out of order", h: gpuwiretest.Hist(gpuwiretest.Fault(gpuwiretest.At(time.Second), "", "", 0), gpuwiretest.Fault(gpuwiretest.T0, "", "", 0)), err: "entries[1].time"},
		{
			desc: "over MaxBytes",
			h: func() gpuwire.History {
				var h gpuwire.History
				for i := range gpuwire.MaxEntries {
					h = gpuwiretest.Hist(append(h.Entries, gpuwire.Entry{Time: gpuwiretest.T0, Fault: &gpuwire.Fault{Condition: strings.Repeat("C", gpuwire.MaxName), Reason: fmt.Sprint(i)}})...)
				}
				return h
			}(),
			err: "more than 16384",
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := tc.h.Encode()
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			back, err := gpuwire.Parse(got)
			require.NoError(t, err)
			if tc.h.Version == 0 {
				tc.h.Version = gpuwire.Version
			}
			require.Equal(t, tc.h, back)
		})
	}
}

func TestGPUKeyString(t *testing.T) {
	require.Equal(t, "node", gpuwire.GPUKey{}.String())
	require.Equal(t, "0000:3b:00.0", gpuwire.GPUKey{Bus: "0000:3b:00.0"}.String())
	require.Equal(t, gpuwiretest.UUIDA, gpuwire.GPUKey{UUID: gpuwiretest.UUIDA}.String())
	require.Equal(t, gpuwiretest.UUIDA+" (0000:3b:00.0)", gpuwire.GPUKey{UUID: gpuwiretest.UUIDA, Bus: "0000:3b:00.0"}.String())
}
