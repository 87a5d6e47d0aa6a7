package devicetaint

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	resourcev1 "k8s.io/api/resource/v1"
	resourcev1beta2 "k8s.io/api/resource/v1beta2"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

const badUUID = "GPU-8f2c1d3e-0a4b-4c5d-9e6f-7a8b9c0d1e2f"

// dev is a device with the given attributes; a string value makes a string
// attribute, an int64 an int one.
func dev(name string, attrs map[string]any) resourcev1.Device {
	d := resourcev1.Device{Name: name, Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{}}
	for k, v := range attrs {
		switch v := v.(type) {
		case string:
			d.Attributes[resourcev1.QualifiedName(k)] = resourcev1.DeviceAttribute{StringValue: ptr.To(v)}
		case int64:
			d.Attributes[resourcev1.QualifiedName(k)] = resourcev1.DeviceAttribute{IntValue: ptr.To(v)}
		}
	}
	return d
}

func slice(node, driver, pool string, gen int64, devices ...resourcev1.Device) resourcev1.ResourceSlice {
	s := resourcev1.ResourceSlice{Spec: resourcev1.ResourceSliceSpec{
		Driver:  driver,
		Pool:    resourcev1.ResourcePool{Name: pool, Generation: gen, ResourceSliceCount: 1},
		Devices: devices,
	}}
	if node != "" {
		s.Spec.NodeName = ptr.To(node)
	}
	return s
}

// gpus returns n devices gpu-0..gpu-n-1 whose attribute attr is the UUID
// GPU-0000...-00<i>, except device bad, whose UUID is uuid.
func gpus(n int, attr string, bad int, uuid string) []resourcev1.Device {
	out := make([]resourcev1.Device, n)
	for i := range n {
		u := fmt.Sprintf("GPU-00000000-0000-0000-0000-0000000000%02d", i)
		if i == bad {
			u = uuid
		}
		out[i] = dev(fmt.Sprintf("gpu-%d", i), map[string]any{attr: u, "gpu.nvidia.com/index": int64(i)})
	}
	return out
}

func TestFind(t *testing.T) {
	const node = "gpu-node-000"
	tests := []struct {
		desc    string
		slices  []resourcev1.ResourceSlice
		uuid    string
		want    Device
		wantErr []string
	}{{
		desc:   "found by a domain-prefixed attribute",
		slices: []resourcev1.ResourceSlice{slice(node, "gpu.nvidia.com", node, 1, gpus(8, "gpu.nvidia.com/uuid", 3, badUUID)...)},
		uuid:   badUUID,
		want:   Device{Driver: "gpu.nvidia.com", Pool: node, Name: "gpu-3"},
	}, {
		desc:   "found by a bare attribute",
		slices: []resourcev1.ResourceSlice{slice(node, "gpu.example.com", node, 1, gpus(8, "uuid", 7, badUUID)...)},
		uuid:   badUUID,
		want:   Device{Driver: "gpu.example.com", Pool: node, Name: "gpu-7"},
	}, {
		desc:   "the device lacks the GPU- prefix, the query has it",
		slices: []resourcev1.ResourceSlice{slice(node, "gpu.example.com", node, 1, gpus(8, "uuid", 2, strings.TrimPrefix(badUUID, "GPU-"))...)},
		uuid:   badUUID,
		want:   Device{Driver: "gpu.example.com", Pool: node, Name: "gpu-2"},
	}, {
		desc:   "the query lacks the prefix and differs in case",
		slices: []resourcev1.ResourceSlice{slice(node, "gpu.example.com", node, 1, gpus(8, "uuid", 5, badUUID)...)},
		uuid:   strings.ToUpper(strings.TrimPrefix(badUUID, "GPU-")),
		want:   Device{Driver: "gpu.example.com", Pool: node, Name: "gpu-5"},
	}, {
		desc: "another node's slice is ignored",
		slices: []resourcev1.ResourceSlice{
			slice("gpu-node-001", "gpu.example.com", "gpu-node-001", 1, gpus(8, "uuid", 1, badUUID)...),
			slice(node, "gpu.example.com", node, 1, gpus(8, "uuid", 4, badUUID)...),
		},
		uuid: badUUID,
		want: Device{Driver: "gpu.example.com", Pool: node, Name: "gpu-4"},
	}, {
		desc:    "only on another node",
		slices:  []resourcev1.ResourceSlice{slice("gpu-node-001", "gpu.example.com", "gpu-node-001", 1, gpus(8, "uuid", 1, badUUID)...)},
		uuid:    badUUID,
		wantErr: []string{"no device", node, badUUID, "looked at 0 of 1 ResourceSlices"},
	}, {
		desc:    "not found",
		slices:  []resourcev1.ResourceSlice{slice(node, "gpu.example.com", node, 1, gpus(8, "uuid", -1, "")...)},
		uuid:    badUUID,
		wantErr: []string{"no device", node, badUUID, "looked at 1 of 1 ResourceSlices"},
	}, {
		desc:    "no slices",
		uuid:    badUUID,
		wantErr: []string{"no device", node, "looked at 0 of 0"},
	}, {
		desc: "two matches",
		slices: []resourcev1.ResourceSlice{
			slice(node, "gpu.example.com", node, 1, gpus(8, "uuid", 1, badUUID)...),
			slice(node, "other.example.com", node, 1, gpus(2, "other.example.com/uuid", 0, strings.ToLower(badUUID))...),
		},
		uuid:    badUUID,
		wantErr: []string{"2 devices", node, badUUID, "gpu.example.com/" + node + "/gpu-1", "other.example.com/" + node + "/gpu-0", "looked at 2 of 2"},
	}, {
		desc:    "a non-string uuid attribute does not match",
		slices:  []resourcev1.ResourceSlice{slice(node, "gpu.example.com", node, 1, dev("gpu-0", map[string]any{"uuid": int64(8)}))},
		uuid:    "8",
		wantErr: []string{"no device"},
	}, {
		desc:    "an attribute merely ending in uuid does not match",
		slices:  []resourcev1.ResourceSlice{slice(node, "gpu.example.com", node, 1, dev("gpu-0", map[string]any{"gpu.example.com/parentuuid": badUUID}))},
		uuid:    badUUID,
		wantErr: []string{"no device"},
	}, {
		desc: "a stale generation of the pool is ignored",
		slices: []resourcev1.ResourceSlice{
			slice(node, "gpu.example.com", node, 1, gpus(8, "uuid", 6, badUUID)...),
			slice(node, "gpu.example.com", node, 2, gpus(8, "uuid", 6, badUUID)...),
		},
		uuid: badUUID,
		want: Device{Driver: "gpu.example.com", Pool: node, Name: "gpu-6"},
	}, {
		desc: "per-device node selection",
		slices: func() []resourcev1.ResourceSlice {
			s := slice("", "gpu.example.com", "rack-1", 1, gpus(2, "uuid", 1, badUUID)...)
			s.Spec.PerDeviceNodeSelection = ptr.To(true)
			s.Spec.Devices[0].NodeName = ptr.To("gpu-node-001")
			s.Spec.Devices[1].NodeName = ptr.To(node)
			return []resourcev1.ResourceSlice{s}
		}(),
		uuid: badUUID,
		want: Device{Driver: "gpu.example.com", Pool: "rack-1", Name: "gpu-1"},
	}, {
		desc:    "empty UUID",
		slices:  []resourcev1.ResourceSlice{slice(node, "gpu.example.com", node, 1, gpus(8, "uuid", -1, "")...)},
		uuid:    "GPU-",
		wantErr: []string{"empty UUID"},
	}}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			got, err := Find(tt.slices, node, tt.uuid)
			if tt.wantErr != nil {
				require.Error(t, err)
				for _, s := range tt.wantErr {
					require.ErrorContains(t, err, s)
				}
				return
			}
			require.NoError(t, err)
			tt.want.UUID = badUUID
			require.Equal(t, tt.want, got, "the device, with its GPU's UUID as NVML prints it")
		})
	}
}

// busGPUs returns n devices gpu-0..gpu-n-1 with a uuid and a bus ID
// attribute attr: device i is on bus 0000:<0x10+i>:00.0 and is GPU
// gpuAt(i).
func busGPUs(n int, attr string) []resourcev1.Device {
	out := make([]resourcev1.Device, n)
	for i := range n {
		out[i] = dev(fmt.Sprintf("gpu-%d", i), map[string]any{"uuid": gpuAt(i), attr: fmt.Sprintf("00000000:%02X:00.0", 0x10+i)})
	}
	return out
}

func gpuAt(i int) string { return fmt.Sprintf("GPU-00000000-0000-4000-8000-0000000000%02d", i) }

// TestFindByBus: the xid check names a GPU by its PCI bus ID only; the
// device with that bus ID is found by NVIDIA's pcieBusID or the standard
// pciBusID attribute, whatever the domain width and case, with its UUID.
func TestFindByBus(t *testing.T) {
	const node = "gpu-node-000"
	noUUID := busGPUs(4, "pcieBusID")
	delete(noUUID[2].Attributes, "uuid")
	twice := busGPUs(4, "pcieBusID")
	twice[3] = dev("gpu-3", map[string]any{"uuid": gpuAt(3), "pcieBusID": "0000:12:00.0"})
	for _, tc := range []struct {
		desc    string
		slices  []resourcev1.ResourceSlice
		bus     string
		want    Device
		wantErr []string
	}{
		{desc: "NVIDIA's pcieBusID, 8-digit domain, upper case; the xid check's form",
			slices: []resourcev1.ResourceSlice{slice(node, "gpu.nvidia.com", node, 1, busGPUs(8, "gpu.nvidia.com/pcieBusID")...)},
			bus:    "0000:13:00.0", want: Device{Driver: "gpu.nvidia.com", Pool: node, Name: "gpu-3", UUID: gpuAt(3)}},
		{desc: "the standard attribute resource.kubernetes.io/pciBusID",
			slices: []resourcev1.ResourceSlice{slice(node, "gpu.example.com", node, 1, busGPUs(8, "resource.kubernetes.io/pciBusID")...)},
			bus:    "00000000:15:00.0", want: Device{Driver: "gpu.example.com", Pool: node, Name: "gpu-5", UUID: gpuAt(5)}},
		{desc: "a stale generation is ignored",
			slices: []resourcev1.ResourceSlice{slice(node, "gpu.nvidia.com", node, 1, busGPUs(2, "pcieBusID")...), slice(node, "gpu.nvidia.com", node, 2, busGPUs(8, "pcieBusID")[6:]...)},
			bus:    "0000:16:00.0", want: Device{Driver: "gpu.nvidia.com", Pool: node, Name: "gpu-6", UUID: gpuAt(6)}},
		{desc: "another node's device is not this node's",
			slices: []resourcev1.ResourceSlice{slice("gpu-node-001", "gpu.nvidia.com", "gpu-node-001", 1, busGPUs(8, "pcieBusID")...)},
			bus:    "0000:13:00.0", wantErr: []string{"no device with a pcieBusID or pciBusID attribute 0000:13:00.0 on node " + node, "looked at 0 of 1"}},
		{desc: "no device on that bus",
			slices: []resourcev1.ResourceSlice{slice(node, "gpu.nvidia.com", node, 1, busGPUs(4, "pcieBusID")...)},
			bus:    "0000:3b:00.0", wantErr: []string{"no device with a pcieBusID or pciBusID attribute 0000:3b:00.0"}},
		{desc: "a device without a uuid cannot name the rule",
			slices: []resourcev1.ResourceSlice{slice(node, "gpu.nvidia.com", node, 1, noUUID...)},
			bus:    "0000:12:00.0", wantErr: []string{"device gpu.nvidia.com/" + node + "/gpu-2", "has no uuid attribute"}},
		{desc: "two devices on one bus",
			slices: []resourcev1.ResourceSlice{slice(node, "gpu.nvidia.com", node, 1, twice...)},
			bus:    "0000:12:00.0", wantErr: []string{"2 devices with PCI bus ID 0000:12:00.0", "gpu-2", "gpu-3"}},
		{desc: "an attribute merely ending in the name does not count",
			slices: []resourcev1.ResourceSlice{slice(node, "gpu.nvidia.com", node, 1, busGPUs(4, "parentPcieBusID")...)},
			bus:    "0000:12:00.0", wantErr: []string{"no device"}},
		{desc: "not a bus ID", bus: "GPU-3", wantErr: []string{`"GPU-3" is not a PCI bus ID`}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := FindByBus(tc.slices, node, tc.bus)
			if tc.wantErr != nil {
				for _, s := range tc.wantErr {
					require.ErrorContains(t, err, s)
				}
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestRuleName(t *testing.T) {
	long := strings.Repeat("very-long-node-name.", 20) + "x"
	tests := []struct {
		desc, node, uuid string
	}{
		{"usual", "gpu-node-000", badUUID},
		{"domain node name", "ip-10-0-1-2.ec2.internal", badUUID},
		{"253-character node name", long[:253], badUUID},
		{"odd characters in the UUID", "gpu-node-000", "GPU-ab_cd/ef..gh"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			name := RuleName(tt.node, tt.uuid)
			require.Empty(t, validation.IsDNS1123Subdomain(name), name)
			require.LessOrEqual(t, len(name), 253)
			require.Equal(t, name, RuleName(tt.node, tt.uuid), "deterministic")
			require.Equal(t, name, RuleName(tt.node, strings.ToUpper(strings.TrimPrefix(tt.uuid, "GPU-"))), "any case and prefix")
			require.NotEqual(t, name, RuleName(tt.node+"1", tt.uuid))
			require.NotEqual(t, name, RuleName(tt.node, tt.uuid+"1"))
		})
	}
	require.True(t, strings.HasPrefix(RuleName("gpu-node-000", badUUID), "kubemedic-gpu-node-000-8f2c1d3e-"), RuleName("gpu-node-000", badUUID))
	// Names of long nodes that share their first 240 characters differ.
	require.NotEqual(t, RuleName(long[:252]+"a", badUUID), RuleName(long[:252]+"b", badUUID))
}

func TestRule(t *testing.T) {
	d := Device{Driver: "gpu.example.com", Pool: "gpu-node-000", Name: "gpu-3"}
	r := Rule(d, "gpu-node-000", strings.ToUpper(badUUID), "replace-gpu-x7k2p", "XID 79: GPU has fallen off the bus")
	require.Equal(t, RuleName("gpu-node-000", badUUID), r.Name)
	require.Equal(t, "resource.k8s.io/v1beta2", r.APIVersion)
	require.Equal(t, "DeviceTaintRule", r.Kind)
	require.Equal(t, map[string]string{
		LabelNode:      "gpu-node-000",
		LabelGPUUUID:   badUUID,
		LabelManagedBy: "kubemedic",
	}, r.Labels)
	require.Equal(t, map[string]string{AnnotationOperation: "replace-gpu-x7k2p", AnnotationNode: "gpu-node-000"}, r.Annotations)
	require.Equal(t, &resourcev1beta2.DeviceTaintSelector{Driver: ptr.To(d.Driver), Pool: ptr.To(d.Pool), Device: ptr.To(d.Name)}, r.Spec.DeviceSelector)
	require.Equal(t, resourcev1beta2.DeviceTaint{
		Key:    TaintKey,
		Value:  "XID-79-GPU-has-fallen-off-the-bus",
		Effect: resourcev1beta2.DeviceTaintEffectNoSchedule,
	}, r.Spec.Taint)
	for k, v := range r.Labels {
		require.Empty(t, validation.IsQualifiedName(k), k)
		require.Empty(t, validation.IsValidLabelValue(v), v)
	}
}

func TestLabelValue(t *testing.T) {
	tests := []struct{ desc, in, want string }{
		{"valid stays", "XID_79.fatal-error", "XID_79.fatal-error"},
		{"runs of other characters become one dash", "XID 79: GPU fell off", "XID-79-GPU-fell-off"},
		{"ends are trimmed", " (row remap failure) ", "row-remap-failure"},
		{"empty", "", ""},
		{"nothing valid", "!!!", ""},
		{"truncated to 63", strings.Repeat("a", 100), strings.Repeat("a", 63)},
		{"truncated, then the end trimmed", strings.Repeat("a", 62) + " b", strings.Repeat("a", 62)},
		{"non-ASCII", "température élevée", "temp-rature-lev-e"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			got := LabelValue(tt.in)
			require.Equal(t, tt.want, got)
			require.Empty(t, validation.IsValidLabelValue(got), got)
		})
	}
}

func TestServedByDiscovery(t *testing.T) {
	tests := []struct {
		desc    string
		status  int
		body    string
		want    bool
		wantErr bool
	}{
		{"served", http.StatusOK, `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"resource.k8s.io/v1beta2","resources":[
			{"name":"devicetaintrules","singularName":"devicetaintrule","namespaced":false,"kind":"DeviceTaintRule","verbs":["get","list","create","update","delete"]},
			{"name":"devicetaintrules/status","singularName":"","namespaced":false,"kind":"DeviceTaintRule","verbs":["get","update"]}]}`, true, false},
		{"group version without the resource", http.StatusOK, `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"resource.k8s.io/v1beta2","resources":[
			{"name":"resourceslices","singularName":"resourceslice","namespaced":false,"kind":"ResourceSlice","verbs":["get","list"]}]}`, false, false},
		{"group version not served", http.StatusNotFound, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`, false, false},
		{"discovery fails", http.StatusInternalServerError, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"etcd down","code":500}`, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/apis/resource.k8s.io/v1beta2" {
					http.NotFound(w, r)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tt.status)
				_, _ = w.Write([]byte(tt.body))
			}))
			defer srv.Close()
			dc, err := discovery.NewDiscoveryClientForConfig(&rest.Config{Host: srv.URL})
			require.NoError(t, err)
			got, err := Served(dc)
			if tt.wantErr {
				require.Error(t, err)
				require.False(t, got)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

// TestCheck: a rule follows its GPU when the driver numbers the node's
// devices again, is released when its device is another GPU now or its
// node has been gone for the grace, and stays on missing or ambiguous
// evidence.
func TestCheck(t *testing.T) {
	const node, driver = "gpu-node-000", "gpu.example.com"
	// The rule excludes badUUID as device gpu-3.
	rule := Rule(Device{Driver: driver, Pool: node, Name: "gpu-3"}, node, badUUID, "op", "XidReset")
	longNode := strings.Repeat("rack-17-", 9) + "gpu-node"
	longRule := Rule(Device{Driver: driver, Pool: longNode, Name: "gpu-3"}, longNode, badUUID, "op", "XidReset")
	oldRule := rule.DeepCopy()
	delete(oldRule.Annotations, AnnotationNode)
	newUUID := "GPU-11111111-2222-3333-4444-555555555555"
	cutRule := longRule.DeepCopy()
	delete(cutRule.Annotations, AnnotationNode)
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	goneSince := func(d time.Duration) *resourcev1beta2.DeviceTaintRule {
		r := rule.DeepCopy()
		r.Annotations[AnnotationNodeGoneSince] = now.Add(-d).Format(time.RFC3339)
		return r
	}
	// Two slices of one pool, the GPU in the second.
	half := func(count int64, both bool) []resourcev1.ResourceSlice {
		all := gpus(8, "uuid", 3, newUUID)
		a := slice(node, driver, node, 2, all[:4]...)
		a.Spec.Pool.ResourceSliceCount = count
		out := []resourcev1.ResourceSlice{a}
		if both {
			b := slice(node, driver, node, 2, gpus(8, "uuid", 6, badUUID)[4:]...)
			b.Spec.Pool.ResourceSliceCount = count
			out = append(out, b)
		}
		return out
	}
	foreign := rule.DeepCopy()
	foreign.Spec.DeviceSelector.Device = nil
	noUUID := gpus(8, "uuid", 3, badUUID)
	noUUID[3] = dev("gpu-3", map[string]any{"gpu.nvidia.com/index": int64(3)})
	twice := gpus(8, "uuid", 3, badUUID)
	twice[5] = dev("gpu-5", map[string]any{"uuid": badUUID})
	for _, tc := range []struct {
		desc      string
		rule      *resourcev1beta2.DeviceTaintRule
		slices    []resourcev1.ResourceSlice
		nodeGone  bool
		want      Verdict
		to        string
		why       string
		markGone  bool
		clearGone bool
	}{
		{desc: "the GPU is still the device", rule: rule,
			slices: []resourcev1.ResourceSlice{slice(node, driver, node, 1, gpus(8, "uuid", 3, badUUID)...)},
			want:   Keep, why: "still device"},
		{desc: "renumbered after a reboot: the rule moves with the GPU", rule: rule,
			slices: []resourcev1.ResourceSlice{slice(node, driver, node, 2, gpus(8, "gpu.example.com/uuid", 6, badUUID)...)},
			want:   Move, to: driver + "/" + node + "/gpu-6", why: "is device " + driver + "/" + node + "/gpu-6 now, was " + driver + "/" + node + "/gpu-3"},
		{desc: "an older generation of the pool does not count", rule: rule,
			slices: []resourcev1.ResourceSlice{slice(node, driver, node, 1, gpus(8, "uuid", 3, badUUID)...), slice(node, driver, node, 2, gpus(8, "uuid", 5, badUUID)...)},
			want:   Move, to: driver + "/" + node + "/gpu-5"},
		{desc: "a new card in the slot: the device is another GPU, the rule is released", rule: rule,
			slices: []resourcev1.ResourceSlice{slice(node, driver, node, 2, gpus(8, "uuid", 3, newUUID)...)},
			want:   Release, why: "device " + driver + "/" + node + "/gpu-3 is GPU " + newUUID + " now"},
		{desc: "the node is gone: the rule stays, and when it was first seen gone is recorded", rule: rule, nodeGone: true, want: Unknown, markGone: true,
			why: "node " + node + " does not exist: rule " + rule.Name + " stays 168h0m0s"},
		{desc: "the node gone for less than the grace: the rule stays", rule: goneSince(6 * 24 * time.Hour), nodeGone: true, want: Unknown,
			why: "stays until 2026-11-27T12:00:00Z"},
		{desc: "the node gone for the grace: the rule is released", rule: goneSince(7 * 24 * time.Hour), nodeGone: true, want: Release,
			why: "node " + node + " has been gone since 2026-11-19T12:00:00Z, more than 168h0m0s"},
		{desc: "the node back: the record goes, and the rule is checked by UUID", rule: goneSince(time.Hour),
			slices: []resourcev1.ResourceSlice{slice(node, driver, node, 1, gpus(8, "uuid", 3, badUUID)...)},
			want:   Keep, clearGone: true},
		{desc: "a rule without the node annotation whose label may be a cut name is left alone", rule: cutRule, nodeGone: true, want: Unknown,
			why: "may be a cut node name"},
		{desc: "the GPU not in the slices published so far of a pool of two: unknown, even though its device is another GPU", rule: rule,
			slices: half(2, false), want: Unknown, why: "published in 1 of its 2 ResourceSlices"},
		{desc: "the pool published whole, the GPU in its second slice: moved", rule: rule,
			slices: half(2, true), want: Move, to: driver + "/" + node + "/gpu-6"},
		{desc: "a long node name is read from the annotation, not the cut label", rule: longRule,
			slices: []resourcev1.ResourceSlice{slice(longNode, driver, longNode, 1, gpus(8, "uuid", 2, badUUID)...)},
			want:   Move, to: driver + "/" + longNode + "/gpu-2"},
		{desc: "a rule made before the node annotation uses the label", rule: oldRule,
			slices: []resourcev1.ResourceSlice{slice(node, driver, node, 1, gpus(8, "uuid", 3, badUUID)...)},
			want:   Keep},
		{desc: "no slice published (the driver is not up after a reboot): unknown, never released", rule: rule,
			want: Unknown, why: "publishes no ResourceSlice on node " + node},
		{desc: "only another driver's slices: unknown", rule: rule,
			slices: []resourcev1.ResourceSlice{slice(node, "nic.example.com", node, 1, gpus(2, "uuid", 0, newUUID)...)},
			want:   Unknown},
		{desc: "the GPU is not listed and its device is gone too: the rule selects nothing and stays", rule: rule,
			slices: []resourcev1.ResourceSlice{slice(node, driver, node, 1, gpus(3, "uuid", -1, "")...)},
			want:   Keep, why: "selects no device now"},
		{desc: "the device has no uuid attribute: unknown", rule: rule,
			slices: []resourcev1.ResourceSlice{slice(node, driver, node, 1, noUUID...)},
			want:   Unknown, why: "no uuid attribute"},
		{desc: "two devices claim the GPU: unknown", rule: rule,
			slices: []resourcev1.ResourceSlice{slice(node, driver, node, 1, twice...)},
			want:   Unknown, why: "2 devices"},
		{desc: "another node's slice is not this node's", rule: rule,
			slices: []resourcev1.ResourceSlice{slice(node, driver, node, 1, gpus(8, "uuid", 3, badUUID)...), slice("gpu-node-001", driver, "gpu-node-001", 1, gpus(8, "uuid", 4, badUUID)...)},
			want:   Keep},
		{desc: "a rule not in kubemedic's form is left alone", rule: foreign,
			slices: []resourcev1.ResourceSlice{slice(node, driver, node, 1, gpus(8, "uuid", 3, newUUID)...)},
			want:   Unknown, why: "not kubemedic's form"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got := Check(tc.rule, tc.slices, tc.nodeGone, now)
			require.Equal(t, tc.want, got.Verdict, got.Why)
			require.Equal(t, tc.markGone, got.MarkGone, "MarkGone")
			require.Equal(t, tc.clearGone, got.ClearGone, "ClearGone")
			if tc.to != "" {
				require.Equal(t, tc.to, got.To.String())
				moved := Moved(tc.rule, got.To)
				require.Equal(t, got.To.Name, *moved.Spec.DeviceSelector.Device)
				require.Equal(t, tc.rule.Labels, moved.Labels)
				require.Equal(t, "gpu-3", *tc.rule.Spec.DeviceSelector.Device, "Moved does not change its input")
			}
			require.Contains(t, got.Why, tc.why)
		})
	}
}
