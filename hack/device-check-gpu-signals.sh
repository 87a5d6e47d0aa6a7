#!/bin/bash
# device-check-gpu-signals.sh: on a GPU machine, run the gpu, gpu-memory and
# gpu-recovery checks on the NVML and nvidia-smi backends with --verbose
# (an unsupported signal is logged; none logged means every signal was
# read), and capture the nvidia-smi outputs the fixtures stand for.
#
# Build here (cgo), then send with the device tool's carry:
#   mkdir -p bin/dev-final && CGO_ENABLED=1 go build -o bin/dev-final/kubemedic-detect ./cmd/kubemedic-detect
#   run: OUT=$OUT KUBEMEDIC_DETECT=bin/dev-final/kubemedic-detect bash hack/device-check-gpu-signals.sh   (carry bin/dev-final)
set -u
D=${KUBEMEDIC_DETECT:-bin/dev-final/kubemedic-detect}
O=${OUT:-/tmp}
nvidia-smi --query-gpu=index,pci.bus_id,uuid,gpu_recovery_action,ecc.errors.uncorrected.aggregate.sram.thresholdExceeded,remapped_rows.histogram.none --format=csv > "$O/query-verdict.txt" 2>&1; echo "query rc=$?"
nvidia-smi -q -d ECC > "$O/nvidia-smi-q-d-ECC.txt" 2>&1; echo "q -d ECC rc=$?"
nvidia-smi -q -x -d ECC > "$O/nvidia-smi-q-x-d-ECC.txt" 2>&1; echo "q -x -d ECC rc=$?"
for b in nvml nvidia-smi; do
  for c in gpu gpu-memory gpu-recovery; do
    echo "== $c --backend=$b"
    extra=""; [ "$c" = gpu ] && extra="--expected-gpus=$(nvidia-smi -L | wc -l)"
    "$D" $c --backend=$b --verbose --root=/ $extra 2>"$O/$c-$b.log"; echo "rc=$?"
    grep -i "support\|error\|warn" "$O/$c-$b.log" | head -5
  done
done
cat "$O/query-verdict.txt"; grep -i "repair\|unrepairable\|sram" "$O/nvidia-smi-q-d-ECC.txt" | head -12; head -3 "$O/nvidia-smi-q-x-d-ECC.txt"
