package xid

import (
	"testing"

	"github.com/kubemedic/kubemedic/detectors/gpuaction"
	"github.com/stretchr/testify/require"
)

func TestClassify(t *testing.T) {
	cases := map[string]struct {
		xids    []int
		named   gpuaction.Action
		unknown UnknownPolicy
		want    Severity
	}{
		"ignore and app errors":         {[]int{13, 31, 43, 45, 61, 63, 68, 92, 94}, 0, UnknownReset, SevNone},
		"reset":                         {[]int{46, 62, 64, 95, 109, 119, 120, 136, 140, 143, 155, 156, 157, 158}, 0, UnknownIgnore, SevReset},
		"48 workflow is a reset":        {[]int{48}, 0, UnknownIgnore, SevReset},
		"NVLink workflow is a reset":    {[]int{74, 144, 145, 146, 147, 148, 149, 150}, 0, UnknownIgnore, SevReset},
		"fallen off the bus":            {[]int{79}, 0, UnknownIgnore, SevReboot},
		"unknown ignored by default":    {[]int{14, 1, 999, 65535}, 0, UnknownIgnore, SevNone},
		"unknown reset when asked":      {[]int{14, 1, 999, 65535}, 0, UnknownReset, SevReset},
		"154 none":                      {[]int{154}, gpuaction.None, UnknownReset, SevNone},
		"154 reset":                     {[]int{154}, gpuaction.GPUReset, UnknownIgnore, SevReset},
		"154 drain and reset":           {[]int{154}, gpuaction.DrainAndReset, UnknownIgnore, SevReset},
		"154 drain p2p":                 {[]int{154}, gpuaction.DrainP2P, UnknownIgnore, SevReset},
		"154 bus reset: a reboot":       {[]int{154}, gpuaction.BusReset, UnknownIgnore, SevReboot},
		"154 system reboot":             {[]int{154}, gpuaction.SystemReboot, UnknownIgnore, SevReboot},
		"154 IMEX domain: not the node": {[]int{154}, gpuaction.RecoverIMEXDomain, UnknownReset, SevNone},
		"154 reboot":                    {[]int{154}, gpuaction.NodeReboot, UnknownIgnore, SevReboot},
		"154 unknown action ignored":    {[]int{154}, gpuaction.Unknown, UnknownIgnore, SevNone},
		"154 unknown action reset":      {[]int{154}, gpuaction.Unknown, UnknownReset, SevReset},
		"named action only counts 154":  {[]int{13}, gpuaction.NodeReboot, UnknownIgnore, SevNone},
	}
	for desc, tc := range cases {
		t.Run(desc, func(t *testing.T) {
			for _, x := range tc.xids {
				sev, meaning := Classify(x, tc.named, tc.unknown)
				require.Equal(t, tc.want, sev, "Xid %d", x)
				require.NotEmpty(t, meaning, "Xid %d", x)
			}
		})
	}
}

func TestCatalogMeaningsAreShort(t *testing.T) {
	for x, e := range catalog {
		require.LessOrEqual(t, len(e.Meaning), 16, "Xid %d", x)
		require.NotEqual(t, Unknown, e.Action, "Xid %d", x)
	}
	for _, r := range append(gpuaction.ByRank(), gpuaction.None, gpuaction.Unknown) {
		_, meaning := Classify(154, r, UnknownReset)
		require.LessOrEqual(t, len(meaning), 21, "154 %s", r)
	}
}
