package localcluster

import (
	"context"
	"fmt"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// CreateGPUResourceSlice publishes what a DRA driver would for node: one
// ResourceSlice of driver, pool named after the node, with one device per
// UUID, named gpu-<i>, with the string attribute uuid and the int attribute
// index, as NVIDIA's DRA driver publishes its GPUs.
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
				"uuid":  {StringValue: ptr.To(u)},
				"index": {IntValue: ptr.To(int64(i))},
			},
		})
	}
	if err := e.Client.Create(ctx, s); err != nil {
		return nil, fmt.Errorf("create ResourceSlice %s: %w", s.Name, err)
	}
	return s, nil
}
