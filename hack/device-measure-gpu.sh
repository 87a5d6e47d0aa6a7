#!/usr/bin/env bash
# device-measure-gpu.sh: on a machine with an NVIDIA GPU and driver, measure
# kubemedic-detect's GPU checks against the C floor (issue 19, "Measure"):
# CPU time (user+system) and peak RSS of whole invocations, median and p90
# over N interleaved rounds, and the ratio of each to the floor's median;
# then where a check's extra cost goes.
#
#   hack/device-measure-gpu.sh [label=path/to/kubemedic-detect ...]
#
# Default binary: now=bin/device/kubemedic-detect. Give several (for
# example base=... new=...) to compare builds in the same run: their rounds
# are interleaved with the floor's. Environment:
#   N       rounds (default 30); each round runs every command once, the
#           order rotated by one each round
#   BIN     directory of prebuilt helpers (default bin/device): floor,
#           rusage and nvmlcost are used from there when no C compiler or
#           Go is present to build them
#   OUT     directory for the log and raw samples (default: a temporary one)
#   SMI_BACKEND  0 leaves out the binaries' --backend=nvidia-smi rows (default
#           1); the nvidia-smi invocations alone are measured either way
#   SMI_ALONE  0 leaves out the nvidia-smi invocations measured alone
#           (default 1)
#   NVMLCOST_MODES  the nvmlcost modes measured (default "calls fields"; ""
#           leaves nvmlcost out)
#   DIAG    0 leaves out the slow diagnostics after the table: inittrace,
#           LD_DEBUG, strace, ltrace, perf (default 1)
#
# kubemedic-detect needs cgo. A GPU machine without Go gets it built
# elsewhere: CGO_ENABLED=1 go build -o bin/device/kubemedic-detect
#   ./cmd/kubemedic-detect, and likewise ./test/scale/detect/nvmlcost; the
# floor and rusage programs are C (test/scale/detect/floor/README.md).
#
# Measured with rusage (test/scale/detect/floor/rusage.c), wait4's numbers
# for the command and its waited-for children, as GNU time's %U %S %M: the
# nvidia-smi backend's child is counted in its check.
set -uo pipefail

cd "$(dirname "$0")/.."
N=${N:-30}
BIN=${BIN:-bin/device}
OUT=${OUT:-$(mktemp -d)}
SMI_BACKEND=${SMI_BACKEND:-1}
NVMLCOST_MODES=${NVMLCOST_MODES:-calls fields}
DIAG=${DIAG:-1}
mkdir -p "$OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
exec > >(tee "$OUT/log") 2>&1

say() { printf '\n## %s\n' "$*"; }
have() { command -v "$1" >/dev/null 2>&1; }

say "machine"
date -u +%FT%TZ
uname -srm
nproc
nvidia-smi --query-gpu=name,driver_version,persistence_mode,pci.bus_id --format=csv,noheader 2>&1 || echo "nvidia-smi failed"
ldconfig -p 2>/dev/null | grep -m1 'libnvidia-ml.so.1' || echo "libnvidia-ml.so.1 not in ldconfig's cache"
for t in cc go /usr/bin/time strace ltrace perf; do
	if have "$t"; then echo "tool $t: $(command -v "$t")"; else echo "tool $t: absent"; fi
done

say "build"
build_c() { # name source [flags]
	local name=$1 src=$2; shift 2
	if have cc; then
		cc -O2 -o "$work/$name" "$src" "$@" && echo "$name: built with $(cc --version | head -1)" && return
	fi
	[ -x "$BIN/$name" ] || { echo "$name: no C compiler and no $BIN/$name"; exit 1; }
	cp "$BIN/$name" "$work/$name" && echo "$name: prebuilt $BIN/$name"
}
build_c floor test/scale/detect/floor/floor.c -ldl
build_c rusage test/scale/detect/floor/rusage.c
if have go; then
	CGO_ENABLED=1 go build -o "$work/nvmlcost" ./test/scale/detect/nvmlcost && echo "nvmlcost: built"
elif [ -x "$BIN/nvmlcost" ]; then
	cp "$BIN/nvmlcost" "$work/" && echo "nvmlcost: prebuilt $BIN/nvmlcost"
fi
bins=("$@")
if [ ${#bins[@]} -eq 0 ]; then
	if [ ! -x "$BIN/kubemedic-detect" ] && have go; then
		CGO_ENABLED=1 go build -o "$BIN/kubemedic-detect" ./cmd/kubemedic-detect || exit 1
	fi
	bins=("now=$BIN/kubemedic-detect")
fi
for b in "${bins[@]}"; do
	[ -x "${b#*=}" ] || { echo "no kubemedic-detect at ${b#*=}"; exit 1; }
	echo "${b%%=*}: ${b#*=} ($(stat -c %s "${b#*=}") bytes)"
done

gpus=$("$work/floor") || { echo "the floor failed: no usable NVML here"; exit 1; }
echo "floor counts $gpus GPU(s)"

# The commands, in the order of the table: name, then argv.
names=() cmds=()
add() { names+=("$1"); shift; cmds+=("$*"); }
add "floor (C: dlopen, nvmlInit_v2, count, shutdown)" "$work/floor"
for b in "${bins[@]}"; do
	l=${b%%=*} p=${b#*=}
	add "$l: no check (start-up only)" "$p"
	add "$l: gpu --backend=nvml" "$p" gpu --backend=nvml --expected-gpus="$gpus"
	add "$l: gpu-memory --backend=nvml" "$p" gpu-memory --backend=nvml
	add "$l: gpu-recovery --backend=nvml" "$p" gpu-recovery --backend=nvml
	[ "$SMI_BACKEND" = 0 ] && continue
	add "$l: gpu --backend=nvidia-smi" "$p" gpu --backend=nvidia-smi --expected-gpus="$gpus"
	add "$l: gpu-memory --backend=nvidia-smi" "$p" gpu-memory --backend=nvidia-smi
	add "$l: gpu-recovery --backend=nvidia-smi" "$p" gpu-recovery --backend=nvidia-smi
done
# What one nvidia-smi costs alone: each invocation the nvidia-smi backend
# makes or might make. gpu runs the first; gpu-memory the second (the
# verdict fields appended), --query-remapped-rows and, for the repair
# status and unrepairable memory, which no --query-gpu field gives,
# -q -d ECC. -q -x -d ECC is there to show whether this nvidia-smi takes
# it (580 refuses -d with -x), and -q -x is the whole XML.
if have nvidia-smi && [ "${SMI_ALONE:-1}" != 0 ]; then
	qbase=index,pci.bus_id,uuid,ecc.errors.uncorrected.volatile.total,retired_pages.pending,retired_pages.sbe,retired_pages.dbe
	add "nvidia-smi --query-gpu (gpu's fields)" nvidia-smi --query-gpu=$qbase --format=csv,noheader
	add "nvidia-smi --query-gpu (gpu-memory's, verdict fields too)" nvidia-smi \
		--query-gpu=$qbase,gpu_recovery_action,ecc.errors.uncorrected.aggregate.sram.thresholdExceeded,remapped_rows.histogram.none \
		--format=csv,noheader
	add "nvidia-smi --query-remapped-rows" nvidia-smi \
		--query-remapped-rows=gpu_bus_id,remapped_rows.pending,remapped_rows.failure,remapped_rows.uncorrectable --format=csv,noheader
	add "nvidia-smi -q -d ECC" nvidia-smi -q -d ECC
	add "nvidia-smi -q -x -d ECC" nvidia-smi -q -x -d ECC
	add "nvidia-smi -q -x" nvidia-smi -q -x
fi
# The same NVML reads from a Go program with almost no imports
# (test/scale/detect/nvmlcost): every signal gpu-memory will read, each
# through its own call or the counters in one GetFieldValues, with and
# without nvmlShutdown before exit.
if [ -x "$work/nvmlcost" ]; then
	for m in $NVMLCOST_MODES; do
		add "nvmlcost -mode=$m" "$work/nvmlcost" -mode="$m"
		add "nvmlcost -mode=$m, no Shutdown" "$work/nvmlcost" -mode="$m" -shutdown=false
	done
fi

say "one run of each (stdout, exit code)"
for i in "${!cmds[@]}"; do
	# shellcheck disable=SC2086 # the argv is split on purpose
	o=$(${cmds[$i]} 2>"$work/stderr.$i"); c=$?
	o=${o%%$'\n'*}
	printf '%-50s exit %d: %s\n' "${names[$i]}" "$c" "$o"
	[ -s "$work/stderr.$i" ] && sed 's/^/    stderr: /' "$work/stderr.$i" | head -5
done

say "warm-up (3 rounds, not counted)"
for r in 1 2 3; do
	for i in "${!cmds[@]}"; do
		# shellcheck disable=SC2086
		${cmds[$i]} >/dev/null 2>&1
	done
done

say "measure: $N rounds of ${#cmds[@]} commands, interleaved"
k=${#cmds[@]}
for ((r = 0; r < N; r++)); do
	for ((j = 0; j < k; j++)); do
		i=$(((r + j) % k))
		# shellcheck disable=SC2086
		"$work/rusage" "$work/samples.$i" ${cmds[$i]} >/dev/null 2>&1
	done
done

# stats FILE: "cpu_median cpu_p90 rss_median rss_max codes wall_median"
# (ms, MiB).
stats() {
	awk '{cpu[NR] = ($1 + $2) * 1000; rss[NR] = $3 / 1024; codes[$4]++; wall[NR] = $5 * 1000}
	function isort(a, n,   i, j, t) { for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j+1] = a[j]; a[j+1] = t } }
	END {
		n = NR; isort(cpu, n); isort(rss, n); isort(wall, n)
		c = ""; for (x in codes) c = c (c == "" ? "" : ",") x ":" codes[x]
		printf "%.1f %.1f %.1f %.1f %s %.1f\n", cpu[int(n/2)+1], cpu[int(n*9/10)+1], rss[int(n/2)+1], rss[n], c, wall[int(n/2)+1]
	}' "$1"
}
read -r fcpu _ frss _ _ _ < <(stats "$work/samples.0")
say "results (CPU = user+system ms; peak RSS MiB; ratio = median / the floor's median)"
printf '| %s | %s | %s | %s | %s | %s | %s | %s |\n' "command" "CPU median" "CPU p90" "peak RSS median (max)" "CPU / floor" "RSS / floor" "wall median" "exit:runs"
printf '|---|---|---|---|---|---|---|---|\n'
for i in "${!cmds[@]}"; do
	read -r cm cp rm rx codes wm < <(stats "$work/samples.$i")
	printf '| %s | %s ms | %s ms | %s (%s) MiB | %s | %s | %s ms | %s |\n' "${names[$i]}" "$cm" "$cp" "$rm" "$rx" \
		"$(awk -v a="$cm" -v b="$fcpu" 'BEGIN{printf "%.2fx", a/b}')" \
		"$(awk -v a="$rm" -v b="$frss" 'BEGIN{printf "%.2fx", a/b}')" "$wm" "$codes"
done

# steps FILE: the median CPU and wall µs of each step over the runs in FILE.
steps() {
	grep '^step' "$1" | awk '{
		# the name is every field between "step" and the two numbers
		for (f = 2; f <= NF; f++) if ($f ~ /^[0-9]+$/ && $(f+1) ~ /^[0-9]+$/) break
		name = ""; for (g = 2; g < f; g++) name = name (name == "" ? "" : " ") $g
		if (!(name in seen)) { seen[name] = ++order; names[order] = name }
		n[name]++; c[name, n[name]] = $f; w[name, n[name]] = $(f+1)
	}
	END {
		for (o = 1; o <= order; o++) {
			k = names[o]; m = n[k]
			for (i = 1; i <= m; i++) { a[i] = c[k, i]; b[i] = w[k, i] }
			for (i = 2; i <= m; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j+1] = a[j]; a[j+1] = t }
			for (i = 2; i <= m; i++) { t = b[i]; for (j = i - 1; j >= 1 && b[j] > t; j--) b[j+1] = b[j]; b[j+1] = t }
			printf "    %-40s cpu %7d µs  wall %7d µs\n", k, a[int(m/2)+1], b[int(m/2)+1]
		}
	}'
}
for m in $NVMLCOST_MODES; do
	say "where gpu-memory's time goes: NVML step by step, nvmlcost -mode=$m (one run in full, then the median of 20; CPU µs, wall µs)"
	if [ -x "$work/nvmlcost" ]; then
		"$work/nvmlcost" -mode=$m | sed 's/^/    /'
		for r in $(seq 20); do "$work/nvmlcost" -mode=$m >>"$work/nvmlcost.$m" 2>/dev/null; done
		steps "$work/nvmlcost.$m"
	else
		echo "    nvmlcost: not built (no Go and no prebuilt $BIN/nvmlcost)"
	fi
done

b0=${bins[0]#*=}
if [ "$DIAG" = 0 ]; then
	tar -C "$work" -czf "$OUT/raw.tar.gz" --exclude floor --exclude rusage --exclude nvmlcost . 2>/dev/null
	say "done (DIAG=0: no diagnostics): log and raw samples in $OUT"
	exit 0
fi
say "Go package inits (GODEBUG=inittrace=1, gpu-memory --backend=nvml; 10 runs: inits, sum of clock ms, median)"
for r in $(seq 10); do
	GODEBUG=inittrace=1 "$b0" gpu-memory --backend=nvml 2>&1 >/dev/null |
		awk '/^init /{n++; s += $5} END{printf "%d %.3f\n", n, s}'
done | sort -k2 -n | awk '{a[NR] = $0} END{print "    inits and ms (median run): " a[int(NR/2)+1]}'
GODEBUG=inittrace=1 "$b0" gpu-memory --backend=nvml 2>&1 >/dev/null | grep '^init ' | sort -t@ -k2 |
	awk '{print $5, $2}' | sort -rn | head -8 | sed 's/^/    slowest: /'

say "dynamic loader (LD_DEBUG=statistics, one run each)"
for c in "$work/floor" "$b0 gpu-memory --backend=nvml"; do
	echo "    $c:"
	# shellcheck disable=SC2086
	LD_DEBUG=statistics $c 2>&1 >/dev/null | grep -E 'total startup time|time needed for relocation|number of relocations:|objects loaded' | sed 's/^ *[0-9]*: */      /'
done

say "system calls"
if have strace; then
	strace -c -f -S calls -o "$work/strace.floor" "$work/floor" >/dev/null
	strace -c -f -S calls -o "$work/strace.mem" "$b0" gpu-memory --backend=nvml >/dev/null
	echo "    floor:"; head -25 "$work/strace.floor" | sed 's/^/      /'
	echo "    gpu-memory --backend=nvml:"; head -25 "$work/strace.mem" | sed 's/^/      /'
else
	echo "    strace is not installed here: no system-call counts"
fi
if have ltrace; then
	ltrace -c -o "$work/ltrace.mem" "$b0" gpu-memory --backend=nvml >/dev/null 2>&1 && head -20 "$work/ltrace.mem" | sed 's/^/    /'
else
	echo "    ltrace is not installed here"
fi
if have perf; then
	perf stat -r 20 "$b0" gpu-memory --backend=nvml 2>&1 >/dev/null | tail -15 | sed 's/^/    /'
else
	echo "    perf is not installed here"
fi

tar -C "$work" -czf "$OUT/raw.tar.gz" --exclude floor --exclude rusage --exclude nvmlcost . 2>/dev/null
say "done: log and raw samples in $OUT"
