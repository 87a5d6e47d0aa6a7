package localcluster

import (
	"context"
	"fmt"
	"hash/fnv"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// GPUBus is the PCI bus ID of a simulated node's i-th GPU, as the kernel
// log and the detectors' conditions write it (4-digit domain; nvidia-smi
// and NVML print an 8-digit one).
func GPUBus(i int) string { return fmt.Sprintf("0000:%02x:00.0", 0x18+8*i) }

// NVIDIA's DRA driver for GPUs (k8s-dra-driver-gpu): the driver name in
// its ResourceSlices and the DeviceClass it installs for whole GPUs.
const (
	NVIDIADRADriver = "gpu.nvidia.com"
	GPUDeviceClass  = "gpu.nvidia.com"
)

// GPUUUID is the UUID of a simulated node's i-th GPU, the same in
// nvidia-smi, on dcgm-exporter and in the node's ResourceSlice.
func GPUUUID(node string, i int) string {
	h := fnv.New32a()
	h.Write([]byte(node))
	return fmt.Sprintf("GPU-%08x-0000-4000-8000-%012x", h.Sum32(), i)
}

// CreateGPUDeviceClass creates the DeviceClass GPUDeviceClass as NVIDIA's
// DRA driver installs it: every device of NVIDIADRADriver whose type
// attribute is "gpu". A class that exists is left alone.
func (e *Cluster) CreateGPUDeviceClass(ctx context.Context) error {
	dc := &resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: GPUDeviceClass},
		Spec: resourcev1.DeviceClassSpec{
			Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
				Expression: fmt.Sprintf("device.driver == %q && device.attributes[%q].type == 'gpu'", NVIDIADRADriver, NVIDIADRADriver),
			}}},
		},
	}
	if err := e.Client.Create(ctx, dc); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create DeviceClass %s: %w", dc.Name, err)
	}
	return nil
}

// CreateGPUResourceSlice publishes what a DRA driver would for node: one
// ResourceSlice of driver, pool named after the node, with one device per
// UUID, named gpu-<i>, with the string attributes uuid and pcieBusID (GPUBus
// with NVML's 8-digit domain), type ("gpu") and productName, the int
// attribute index and the capacity memory, as NVIDIA's DRA driver publishes
// its GPUs.
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
				"uuid":        {StringValue: ptr.To(u)},
				"pcieBusID":   {StringValue: ptr.To("0000" + GPUBus(i))},
				"index":       {IntValue: ptr.To(int64(i))},
				"type":        {StringValue: ptr.To("gpu")},
				"productName": {StringValue: ptr.To("NVIDIA H100 80GB HBM3")},
			},
			Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{
				"memory": {Value: resource.MustParse("80Gi")},
			},
		})
	}
	if err := e.Client.Create(ctx, s); err != nil {
		return nil, fmt.Errorf("create ResourceSlice %s: %w", s.Name, err)
	}
	return s, nil
}
