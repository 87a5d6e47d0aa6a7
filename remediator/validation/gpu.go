package validation

// GPU is one GPU of the node as the test pod sees it: nvidia-smi's list,
// by which a tool's device numbers become UUIDs.
type GPU struct {
	// Index is nvidia-smi's index, in PCI bus order; CUDA numbers devices
	// the same way when CUDA_DEVICE_ORDER=PCI_BUS_ID, which
	// kubemedic-validate sets for its tools.
	Index int
	// UUID is as gpuwire.NormalizeUUID writes it.
	UUID string
	// Name is the driver's name for the model, e.g. "NVIDIA H100 80GB
	// HBM3".
	Name string
	// BusID is the normalised PCI address, e.g. "0000:3b:00.0".
	BusID string
	// Serial is the board's serial number; "" when the GPU does not
	// report one.
	Serial string
}

// ModelName is the model of the node's GPUs, as the driver names it; ok is
// false when they are not all of one model (or there are none), whose
// floors then cannot be told apart.
func ModelName(gpus []GPU) (name string, ok bool) {
	if len(gpus) == 0 {
		return "", false
	}
	name = gpus[0].Name
	for _, g := range gpus[1:] {
		if normName(g.Name) != normName(name) {
			return "mixed: " + name + ", " + g.Name, false
		}
	}
	return name, true
}
