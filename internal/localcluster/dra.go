package localcluster

import (
	"context"
	"fmt"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// GPUBus is the PCI bus ID of a simulated node's i-th GPU, as the kernel
// log and the detectors' conditions write it (4-digit domain; nvidia-smi
// and NVML print an 8-digit one).
func GPUBus(i int) string { return fmt.Sprintf("0000:%02x:00.0", 0x18+8*i) }

// CreateGPUResourceSlice publishes what a DRA driver would for node: one
// ResourceSlice of driver, pool named after the node, with one device per
// UUID, named gpu-<i>, with the string attributes uuid and pcieBusID (GPUBus
// with NVML's 8-digit domain) and the int attribute index, as NVIDIA's DRA
// driver publishes its GPUs.
func (e *Cluster) CreateGPUResourceSlice(ctx context.Context, node, driver string, uuids []string) (*resourcev1.ResourceSlice, error) {
	s := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-" + driver},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:   driver,
			NodeName: ptr.To(node),
			Pool:     resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
		},
	}
	for i, u := range uuids {
		s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{
			Name: fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
				"uuid":      {StringValue: ptr.To(u)},
				"pcieBusID": {StringValue: ptr.To("0000" + GPUBus(i))},
				"index":     {IntValue: ptr.To(int64(i))},
			},
		})
	}
	if err := e.Client.Create(ctx, s); err != nil {
		return nil, fmt.Errorf("create ResourceSlice %s: %w", s.Name, err)
	}
	return s, nil
}
