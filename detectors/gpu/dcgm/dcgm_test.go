package dcgm

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// fakeEngine creates field groups as a host engine does: it refuses a
// group with any field outside its table (DcgmFieldGroupManager::
// AddFieldGroup, DCGM_ST_BADPARAM), or every group when broken.
type fakeEngine struct {
	knows   func(uint16) bool
	broken  bool
	created [][]uint16
	open    map[string]bool
}

var errBadParam = errors.New("error creating DCGM fields group: Bad parameter passed to function")

func (e *fakeEngine) create(name string, fields []uint16) (string, error) {
	e.created = append(e.created, slices.Clone(fields))
	if e.broken {
		return "", errors.New("error creating DCGM fields group: The connection to the host engine is not valid any longer")
	}
	for _, f := range fields {
		if !e.knows(f) {
			return "", errBadParam
		}
	}
	if e.open[name] {
		return "", fmt.Errorf("duplicate field group %q", name)
	}
	e.open[name] = true
	return name, nil
}

func (e *fakeEngine) destroy(name string) { delete(e.open, name) }

func TestCreateKnown(t *testing.T) {
	fields := []uint16{311, 390, 391, 392, 393, 395, 396, 1523, 1507, 346, 389}
	for _, tc := range []struct {
		desc    string
		knows   func(uint16) bool
		broken  bool
		unknown []uint16
		creates int
		err     string
	}{
		{desc: "DCGM 4.6 knows every field: one create", knows: func(uint16) bool { return true }, creates: 1},
		{desc: "an engine without the recovery action and unrepairable memory",
			knows: func(f uint16) bool { return f < 1500 }, unknown: []uint16{1523, 1507}, creates: 1 + len(fields) + 1},
		{desc: "a broken connection is the original error, not unknown fields",
			broken: true, knows: func(uint16) bool { return true }, creates: 1 + len(fields), err: "connection to the host engine"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			e := &fakeEngine{knows: tc.knows, broken: tc.broken, open: map[string]bool{}}
			fg, unknown, err := createKnown("kubemedic-detect-1", fields, e.create, e.destroy)
			require.Len(t, e.created, tc.creates)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				require.Nil(t, unknown)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.unknown, unknown)
			require.Equal(t, "kubemedic-detect-1", fg)
			require.Equal(t, map[string]bool{"kubemedic-detect-1": true}, e.open, "every probe group destroyed")
			var want []uint16
			for _, f := range fields {
				if !slices.Contains(tc.unknown, f) {
					want = append(want, f)
				}
			}
			require.Equal(t, want, e.created[len(e.created)-1], "the group has the known fields")
		})
	}
}

func TestCreateKnownAllUnknownIsTheError(t *testing.T) {
	e := &fakeEngine{knows: func(uint16) bool { return false }, open: map[string]bool{}}
	_, unknown, err := createKnown("g", []uint16{1523, 1507}, e.create, e.destroy)
	require.ErrorIs(t, err, errBadParam)
	require.Nil(t, unknown)
	_, _, err = createKnown("g", []uint16{1523}, e.create, e.destroy)
	require.ErrorIs(t, err, errBadParam)
	require.Len(t, e.created, 4, "one field is not probed again")
}
