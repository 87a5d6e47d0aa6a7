package gpu

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/spf13/pflag"

	"github.com/kubemedic/kubemedic/detectors/kube"
	"github.com/kubemedic/kubemedic/detectors/plugin"
)

// GPUCountLabel is the node label GPU feature discovery sets to the number
// of GPUs; the gpu check expects that many when --expected-gpus is 0.
const GPUCountLabel = "nvidia.com/gpu.count"

// backendOptions are the flags both checks share.
type backendOptions struct {
	backend    string
	dcgmAddr   string
	smiPath    string
	smiTimeout time.Duration
}

func bindBackendFlags(fs *pflag.FlagSet) *backendOptions {
	o := &backendOptions{}
	fs.StringVar(&o.backend, "backend", "auto", "auto|nvml|dcgm|nvidia-smi; auto is dcgm when --dcgm-address is set, else NVML, falling back to nvidia-smi when NVML's library is not found")
	fs.StringVar(&o.dcgmAddr, "dcgm-address", "", "nv-hostengine address (host:port) for the dcgm backend")
	fs.StringVar(&o.smiPath, "nvidia-smi", "nvidia-smi", "nvidia-smi binary: a path, or a name looked up on PATH and then in the driver's usual directories under --root")
	fs.DurationVar(&o.smiTimeout, "nvidia-smi-timeout", 8*time.Second, "kill nvidia-smi, and report Unknown, after this long")
	return o
}

// backends are the backends to try in order; a later one is tried only
// when the one before it failed because its library is not installed.
func (o *backendOptions) backends(env *plugin.Env) ([]Backend, error) {
	// ECCSection: gpu-memory also runs `nvidia-smi -q -d ECC` for
	// channel/TPC repair pending and unrepairable memory; gpu and
	// gpu-recovery read no such signal (gpu.Read) and never run it.
	smi := &SMI{Path: o.smiPath, Timeout: o.smiTimeout, Root: env.Root, ECCSection: true}
	nv := &NVML{Lib: nvml.New()}
	switch o.backend {
	case "auto":
		if o.dcgmAddr != "" {
			return []Backend{&DCGM{Addr: o.dcgmAddr}}, nil
		}
		return []Backend{nv, smi}, nil
	case "nvml":
		return []Backend{nv}, nil
	case "dcgm":
		if o.dcgmAddr == "" {
			return nil, errors.New("--backend=dcgm needs --dcgm-address")
		}
		return []Backend{&DCGM{Addr: o.dcgmAddr}}, nil
	case "nvidia-smi":
		return []Backend{smi}, nil
	}
	return nil, fmt.Errorf("--backend: %q is not auto, nvml, dcgm or nvidia-smi", o.backend)
}

// listDevices asks the backends in turn; see backends. The error names
// every backend tried.
func listDevices(ctx context.Context, env *plugin.Env, bs []Backend, what Read) ([]Device, string, error) {
	var errs []string
	for _, b := range bs {
		env.Log.Debug("Listing GPUs", "backend", b.Name())
		devs, err := b.Devices(ctx, what)
		if err == nil {
			return devs, b.Name(), nil
		}
		env.Log.Warn("GPU backend failed", "backend", b.Name(), "err", err)
		errs = append(errs, err.Error())
		if !isLibraryNotFound(err) {
			break
		}
	}
	return nil, "", errors.New(strings.Join(errs, "; "))
}

// Command is the "gpu" check: condition GPULost.
func Command() *plugin.Command {
	return &plugin.Command{
		Name:    "gpu",
		Summary: "GPULost: a GPU fell off the bus, or fewer GPUs than expected",
		Bind: func(fs *pflag.FlagSet) plugin.Runner {
			bo := bindBackendFlags(fs)
			expected := fs.Int("expected-gpus", 0, "GPUs this node should have (0: the node's "+GPUCountLabel+" label)")
			ko := kube.BindFlags(fs)
			return func(ctx context.Context, env *plugin.Env) plugin.Result {
				kc := kube.New(*ko)
				return runLost(ctx, env, bo, *expected, kc.NodeLabels)
			}
		},
	}
}

type labelsFunc func(ctx context.Context, node string) (map[string]string, error)

func runLost(ctx context.Context, env *plugin.Env, bo *backendOptions, expected int, labels labelsFunc) plugin.Result {
	bs, err := bo.backends(env)
	if err != nil {
		return plugin.Unknown("gpu: %v", err)
	}
	return checkLost(ctx, env, bs, expected, labels)
}

func checkLost(ctx context.Context, env *plugin.Env, bs []Backend, expected int, labels labelsFunc) plugin.Result {
	devs, name, err := listDevices(ctx, env, bs, ReadList)
	if err != nil {
		return plugin.Unknown("gpu: %v", err)
	}
	in := LostInput{Backend: name, Devices: devs, Expected: expected}
	driver, present, err := DriverBusIDs(env.Root)
	if err != nil {
		env.Log.Warn("Reading the driver's GPU list failed", "err", err)
	}
	if present {
		in.Driver = driver
	}
	if in.Expected <= 0 {
		in.Expected, in.ExpectedErr = expectedFromLabel(ctx, env.Node, labels)
	}
	r, warning := DecideLost(in)
	if warning != "" {
		env.Log.Warn("More GPUs than expected", "detail", warning)
	}
	return r
}

// expectedFromLabel reads the node's GPUCountLabel; 0 and the reason when
// it cannot.
func expectedFromLabel(ctx context.Context, node string, labels labelsFunc) (int, string) {
	if node == "" {
		return 0, "--expected-gpus unset and no --node"
	}
	l, err := labels(ctx, node)
	if err != nil {
		return 0, fmt.Sprintf("read node labels: %v", err)
	}
	v, ok := l[GPUCountLabel]
	if !ok {
		return 0, fmt.Sprintf("node %s has no %s label", node, GPUCountLabel)
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n <= 0 {
		return 0, fmt.Sprintf("node %s label %s=%q is not a positive number", node, GPUCountLabel, v)
	}
	return n, ""
}

// MemoryCommand is the "gpu-memory" check: condition GPUMemoryUnhealthy.
func MemoryCommand() *plugin.Command {
	return &plugin.Command{
		Name:    "gpu-memory",
		Summary: "GPUMemoryUnhealthy: row remap failed/pending, retired pages, volatile DBE",
		Bind: func(fs *pflag.FlagSet) plugin.Runner {
			bo := bindBackendFlags(fs)
			th := Thresholds{}
			fs.Uint64Var(&th.DBE, "dbe-threshold", 1, "volatile uncorrected ECC errors at or above this are VolatileDBE (0: off)")
			fs.Uint64Var(&th.RetiredPages, "retired-pages-limit", DefaultRetiredPagesLimit, "retired pages (SBE+DBE) at or above this are RetiredPageLimit (0: off); NVIDIA retires at most 64, DCGM flags 60")
			return func(ctx context.Context, env *plugin.Env) plugin.Result {
				bs, err := bo.backends(env)
				if err != nil {
					return plugin.Unknown("gpu-memory: %v", err)
				}
				return checkMemory(ctx, env, bs, th)
			}
		},
	}
}

func checkMemory(ctx context.Context, env *plugin.Env, bs []Backend, th Thresholds) plugin.Result {
	devs, name, err := listDevices(ctx, env, bs, ReadMemory)
	if err != nil {
		return plugin.Unknown("gpu-memory: %v", err)
	}
	logUnsupported(env, devs)
	return DecideMemory(name, devs, th)
}
