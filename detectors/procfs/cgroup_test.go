package procfs

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPodUID(t *testing.T) {
	const uid = "74c13223-5a00-4e7d-9f2e-3a2d5c1b6a77"
	for _, tc := range []struct {
		file    string
		wantUID string
	}{
		{"v2-systemd-burstable-containerd", uid},
		{"v2-systemd-guaranteed-crio", uid},
		{"v2-systemd-besteffort-conmon", uid},
		{"v2-cgroupfs-besteffort", uid},
		{"v2-cgroupfs-guaranteed", uid},
		{"v2-kind-systemd", uid},
		{"v2-containerd-service-nested", uid},
		{"v2-docker-prefix-cgroupfs", uid},
		{"v2-deleted", uid},
		{"v2-nested-pods", uid},
		{"v2-static-pod", "5a5e7c2f0e1b4c0b8f3e8b8b3e1f4a2c"},
		{"v1-cgroupfs", uid},
		{"v1-systemd", uid},
		{"v2-not-pod-kubelet", ""},
		{"v2-not-pod-session", ""},
		{"v2-not-pod-root", ""},
		{"v1-not-pod-sandbox", ""},
		{"v2-not-pod-qos-slice", ""},
		{"v2-not-pod-no-kubepods", ""},
		{"v2-not-pod-bad-uid", ""},
		{"v2-not-pod-uppercase", ""},
		{"empty", ""},
	} {
		t.Run(tc.file, func(t *testing.T) {
			got, ok, err := PodUID(readFixture(t, "cgroup", tc.file))
			require.NoError(t, err)
			require.Equal(t, tc.wantUID != "", ok)
			require.Equal(t, tc.wantUID, got)
		})
	}
}

func TestPodUIDErrors(t *testing.T) {
	for _, tc := range []struct {
		file    string
		wantErr string
	}{
		{"bad-no-colons", "line 1: want ID:controllers:path"},
		{"bad-relative", `path "relative/path" is not absolute`},
		{"bad-hierarchy", `hierarchy ID "x" is not a number`},
		{"bad-conflict", "line 2: pod 11111111-2222-3333-4444-555555555555, but an earlier line has pod 74c13223-5a00-4e7d-9f2e-3a2d5c1b6a77"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			uid, ok, err := PodUID(readFixture(t, "cgroup", tc.file))
			require.ErrorContains(t, err, tc.wantErr)
			require.False(t, ok)
			require.Empty(t, uid)
		})
	}
}

// FuzzPodUID checks that PodUID never panics, that a UID it returns is
// well formed and appears in the input (with '_' for '-' under systemd),
// and that ok agrees with the UID.
func FuzzPodUID(f *testing.F) {
	fixtureSeeds(f, "cgroup")
	f.Fuzz(func(t *testing.T, b []byte) {
		uid, ok, err := PodUID(b)
		if err != nil {
			if ok || uid != "" {
				t.Fatalf("error %v with uid %q ok %v", err, uid, ok)
			}
			return
		}
		if ok != (uid != "") {
			t.Fatalf("ok %v with uid %q", ok, uid)
		}
		if !ok {
			return
		}
		if !validUID([]byte(uid)) {
			t.Fatalf("invalid uid %q", uid)
		}
		if s := string(b); !strings.Contains(s, "pod"+uid) && !strings.Contains(s, "pod"+strings.ReplaceAll(uid, "-", "_")) {
			t.Fatalf("uid %q not in input %q", uid, s)
		}
	})
}
