package v1alpha1

import "testing"

func TestEffectiveReason(t *testing.T) {
	for _, tc := range []struct {
		desc, typ, reason, message, want string
	}{
		{"prefix wins over the NPD rule reason", ConditionGPUXidError, DetectReason, "XidRebootRequired: Xid 79 on 0000:3b:00.0: fell off the bus", ReasonXidRebootRequired},
		{"direct reason kept without prefix", ConditionGPUXidError, ReasonXidResetRequired, "Xid 46 on 0000:3b:00.0", ReasonXidResetRequired},
		{"prefix of another condition type is ignored", ConditionGPUXidError, DetectReason, "MountHung: /data", DetectReason},
		{"unknown condition type keeps its reason", "Ready", "KubeletReady", "MountHung: x", "KubeletReady"},
		{"no space after colon is not a prefix", ConditionNFSMountUnhealthy, DetectReason, "MountHung:/data", DetectReason},
		{"empty message", ConditionNFSMountUnhealthy, "NFSOK", "", "NFSOK"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if got := EffectiveReason(tc.typ, tc.reason, tc.message); got != tc.want {
				t.Errorf("EffectiveReason(%q, %q, %q) = %q, want %q", tc.typ, tc.reason, tc.message, got, tc.want)
			}
		})
	}
}
