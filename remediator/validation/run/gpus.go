package run

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/kubemedic/kubemedic/internal/gpuwire"
	"github.com/kubemedic/kubemedic/internal/procgroup"
	"github.com/kubemedic/kubemedic/internal/smicsv"
	"github.com/kubemedic/kubemedic/remediator/validation"
)

// smiQuery lists the GPUs: what maps a tool's device numbers to UUIDs.
var smiQuery = []string{"--query-gpu=index,uuid,name,pci.bus_id,serial", smicsv.Format}

// smiTimeout bounds nvidia-smi, within the run's timeout: a lost GPU
// can hang it.
const smiTimeout = time.Minute

// listGPUs runs nvidia-smi and reads its list.
func listGPUs(ctx context.Context, smi string) ([]validation.GPU, error) {
	ctx, cancel := context.WithTimeout(ctx, smiTimeout)
	defer cancel()
	var out bytes.Buffer
	cmd := procgroup.Command(ctx, 2*time.Second, smi, smiQuery...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	procgroup.KillGroup(cmd)
	exit := 0
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return nil, fmt.Errorf("nvidia-smi: no answer in %s", smiTimeout)
	case errors.As(err, &ee):
		exit = ee.ExitCode()
	case err != nil:
		return nil, fmt.Errorf("nvidia-smi: %w", err)
	}
	return parseGPUs(out.Bytes(), exit)
}

// parseGPUs reads the answer to smiQuery. A GPU nvidia-smi cannot open
// is an error: it cannot be tested, and it has no UUID to report.
func parseGPUs(out []byte, exit int) ([]validation.GPU, error) {
	rows, err := smicsv.Parse(out, exit, 5, false)
	if err != nil {
		return nil, fmt.Errorf("nvidia-smi %s: %w", smiQuery[0], err)
	}
	var gpus []validation.GPU
	for _, r := range rows {
		if h := r.HandleErr; h != nil {
			return nil, fmt.Errorf("nvidia-smi cannot open the GPU at %s: %s", h.BusID, h.Err)
		}
		f := r.Fields
		idx, err := strconv.Atoi(f[0])
		if err != nil || idx < 0 {
			return nil, fmt.Errorf("nvidia-smi: index %q in %q", f[0], smicsv.Clip(r.Line))
		}
		uuid := gpuwire.NormalizeUUID(f[1])
		if uuid == "" {
			return nil, fmt.Errorf("nvidia-smi: GPU %d's UUID %q is not a GPU UUID", idx, f[1])
		}
		bus, ok := smicsv.NormalizeBusID(f[3])
		if !ok {
			return nil, fmt.Errorf("nvidia-smi: GPU %d's bus ID %q is not a PCI address", idx, f[3])
		}
		serial := f[4]
		if strings.HasPrefix(serial, "[") {
			// [N/A], [Not Supported]
			serial = ""
		}
		gpus = append(gpus, validation.GPU{Index: idx, UUID: uuid, Name: f[2], BusID: bus, Serial: serial})
	}
	return gpus, nil
}
