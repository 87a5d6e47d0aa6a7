// Package gpu holds the GPU checks of kubemedic-detect: "gpu" (condition
// GPULost: a GPU fell off the bus, or fewer GPUs than the node should have)
// and "gpu-memory" (condition GPUMemoryUnhealthy: row remap failed or
// pending, retired pages over the limit or pending, volatile uncorrectable
// ECC errors).
//
// A Backend lists the devices with their memory health: NVML (go-nvml),
// DCGM (go-dcgm, through a running nv-hostengine) or the nvidia-smi
// binary. Pure functions (DecideLost, DecideMemory) turn devices into a
// plugin.Result and are table-tested; the commands only wire flags,
// backends and the node's expected GPU count together.
//
// What must hold: a backend failure, a lost GPU or a counter that could not
// be read is never reported OK; the nvidia-smi child never inherits the
// plugin's stdout or stderr and is killed, with its process group, at its
// timeout; NonOK messages name the GPU by its normalised PCI bus ID
// (0000:3b:00.0), first, followed by its UUID when the backend reports a
// well-formed one ("0000:3b:00.0 (GPU-179b83e0-...)"), and do not change
// while the fault lasts.
package gpu
