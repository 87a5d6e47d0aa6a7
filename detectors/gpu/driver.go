package gpu

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"

	"github.com/kubemedic/kubemedic/detectors/host"
)

// driverGPUsDir has one directory per GPU the NVIDIA kernel driver has
// probed, named by its PCI bus ID ("0000:3b:00.0"). It outlives the GPU
// falling off the bus, so it tells which bus ID a lost or missing GPU had.
const driverGPUsDir = "/proc/driver/nvidia/gpus"

// DriverBusIDs lists the normalised bus IDs under <root>/proc/driver/nvidia/gpus.
// present is false when the directory does not exist (no driver loaded, or
// /proc not mounted from the host); that is not an error.
func DriverBusIDs(root host.Root) (ids []string, present bool, err error) {
	entries, err := os.ReadDir(root.Path(driverGPUsDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read %s: %w", root.Path(driverGPUsDir), err)
	}
	for _, e := range entries {
		if id, ok := NormalizeBusID(e.Name()); ok {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids, true, nil
}
