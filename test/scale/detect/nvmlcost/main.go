// Command nvmlcost splits one GPU check's cost into its steps on a real
// GPU: the process start before main (the dynamic loader, Go's runtime and
// package inits), loading libnvidia-ml.so.1, nvmlInit_v2, each NVML call
// that the gpu and gpu-memory checks make, each of the five reads that
// issue 19 adds, and nvmlShutdown. It prints one line per step: the CPU
// time (user+system, all threads, from getrusage) and the wall time of the
// step, and the call's NVML return.
//
//	go build -o nvmlcost ./test/scale/detect/nvmlcost && ./nvmlcost
//
// It makes the calls the way go-nvml makes them for the checks, so its
// steps add up to what kubemedic-detect spends on NVML; what is left of a
// check's cost over the floor (test/scale/detect/floor) is then Go and
// the check's own work. hack/device-measure-gpu.sh runs it many times and
// takes the median of each step. Needs cgo and an NVIDIA driver.
//
// -mode=fields reads the counters and the recovery action in one
// GetFieldValues instead of one call each, and -shutdown=false leaves
// nvmlShutdown to the process exit: the two ways found to cost less.
package main

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>
static void *open_nvml(void) { return dlopen("libnvidia-ml.so.1", RTLD_LAZY | RTLD_GLOBAL); }
*/
import "C"

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

type step struct {
	cpu0  time.Duration
	wall0 time.Time
}

func begin() step { return step{cpuNow(), time.Now()} }

// end prints "step <name> <cpu µs> <wall µs> <return>".
func (s step) end(name string, ret any) {
	cpu, wall := cpuNow()-s.cpu0, time.Since(s.wall0)
	fmt.Printf("step %-34s %8d %8d %v\n", name, cpu.Microseconds(), wall.Microseconds(), ret)
}

// mem prints "mem <when> VmHWM RssAnon RssFile" from /proc/self/status:
// what the peak RSS is made of at that point.
func mem(when string) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return
	}
	f := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok {
			f[k] = strings.TrimSpace(v)
		}
	}
	fmt.Printf("mem  %-34s VmHWM %s, RssAnon %s, RssFile %s\n", when, f["VmHWM"], f["RssAnon"], f["RssFile"])
}

var (
	mode     = flag.String("mode", "calls", "calls: each signal through its own NVML call, as the checks read them; fields: the counters and the recovery action in one GetFieldValues")
	shutdown = flag.Bool("shutdown", true, "call nvmlShutdown before exiting (false: leave it to the process exit)")
)

func main() {
	flag.Parse()
	// CPU spent from exec to here: loader, cgo and Go runtime start, and
	// every package init.
	fmt.Printf("step %-34s %8d %8d %v\n", "start (exec to main)", cpuNow().Microseconds(), 0, "-")
	mem("at main")

	s := begin()
	h := C.open_nvml()
	if h == nil {
		s.end("dlopen libnvidia-ml.so.1", "not found")
		os.Exit(1)
	}
	s.end("dlopen libnvidia-ml.so.1", "ok")

	lib := nvml.New()
	s = begin()
	ret := lib.Init() // go-nvml's own dlopen finds it loaded; then nvmlInit_v2
	s.end("Init (nvmlInit_v2)", ret)
	if ret != nvml.SUCCESS {
		os.Exit(1)
	}
	mem("after Init")
	s = begin()
	n, ret := lib.DeviceGetCount()
	s.end("DeviceGetCount", ret)

	for i := 0; i < n; i++ {
		p := fmt.Sprintf("gpu%d ", i)
		s = begin()
		d, ret := lib.DeviceGetHandleByIndex(i)
		s.end(p+"GetHandleByIndex", ret)
		if ret != nvml.SUCCESS {
			continue
		}
		s = begin()
		_, ret = d.GetPciInfo()
		s.end(p+"GetPciInfo", ret)
		s = begin()
		_, ret = d.GetUUID()
		s.end(p+"GetUUID", ret)

		if *mode == "fields" {
			readFields(d, p)
		} else {
			readCalls(d, p)
		}
	}

	if !*shutdown {
		fmt.Printf("step %-34s %8d %8d %v\n", "total (exec to exit)", cpuNow().Microseconds(), 0, "-")
		return
	}
	s = begin()
	ret = lib.Shutdown()
	s.end("Shutdown", ret)
	mem("after Shutdown")
	fmt.Printf("step %-34s %8d %8d %v\n", "total (exec to exit)", cpuNow().Microseconds(), 0, "-")
}

// readCalls makes the calls the checks make: gpu-memory's reads today,
// then the five issue 19 adds, each its own NVML call; then
// GetTotalEccErrors again, to tell a first-call cost from the call's own.
func readCalls(d nvml.Device, p string) {
	// gpu-memory's reads today.
	var ret nvml.Return
	s := begin()
	_, ret = d.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC)
	s.end(p+"GetTotalEccErrors", ret)
	s = begin()
	_, ret = d.GetRetiredPagesPendingStatus()
	s.end(p+"GetRetiredPagesPendingStatus", ret)
	s = begin()
	_, ret = d.GetRetiredPages(nvml.PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS)
	s.end(p+"GetRetiredPages(SBE)", ret)
	s = begin()
	_, ret = d.GetRetiredPages(nvml.PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR)
	s.end(p+"GetRetiredPages(DBE)", ret)
	s = begin()
	_, _, _, _, ret = d.GetRemappedRows()
	s.end(p+"GetRemappedRows", ret)

	// The five reads issue 19 adds.
	s = begin()
	fv := []nvml.FieldValue{{FieldId: nvml.FI_DEV_GET_GPU_RECOVERY_ACTION}}
	ret = d.GetFieldValues(fv)
	s.end(p+"GetFieldValues(230)", fmt.Sprintf("%v/%v value=%d", ret, nvml.Return(fv[0].NvmlReturn), fv[0].Value[0]))
	readNoFieldSignals(d, p)
	s = begin()
	_, ret = d.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC)
	s.end(p+"GetTotalEccErrors (again)", ret)
}

// readNoFieldSignals times the four reads of issue 19 that have no field
// value: unrepairable flag, SRAM status, repair status, remapper histogram.
func readNoFieldSignals(d nvml.Device, p string) {
	s := begin()
	um, ret := d.GetUnrepairableMemoryFlag_v1()
	s.end(p+"GetUnrepairableMemoryFlag_v1", fmt.Sprintf("%v %+v", ret, um))
	s = begin()
	sr, ret := d.GetSramEccErrorStatus()
	s.end(p+"GetSramEccErrorStatus", fmt.Sprintf("%v threshold=%d", ret, sr.BThresholdExceeded))
	s = begin()
	rs, ret := d.GetRepairStatus()
	s.end(p+"GetRepairStatus", fmt.Sprintf("%v channel=%d tpc=%d", ret, rs.BChannelRepairPending, rs.BTpcRepairPending))
	s = begin()
	hv, ret := d.GetRowRemapperHistogram()
	s.end(p+"GetRowRemapperHistogram", fmt.Sprintf("%v %+v", ret, hv))
}

// memFields are the counters gpu-memory reads, and the recovery action,
// as NVML field values: one call for all of them.
var memFields = []uint32{
	nvml.FI_DEV_ECC_DBE_VOL_TOTAL,
	nvml.FI_DEV_RETIRED_PENDING,
	nvml.FI_DEV_RETIRED_SBE,
	nvml.FI_DEV_RETIRED_DBE,
	nvml.FI_DEV_REMAPPED_UNC,
	nvml.FI_DEV_REMAPPED_PENDING,
	nvml.FI_DEV_REMAPPED_FAILURE,
	nvml.FI_DEV_GET_GPU_RECOVERY_ACTION,
}

// readFields reads the same signals with one GetFieldValues for every
// counter and the recovery action, then the four reads that have no field
// (unrepairable flag, SRAM status, repair status, remapper histogram).
func readFields(d nvml.Device, p string) {
	fv := make([]nvml.FieldValue, len(memFields))
	for i, id := range memFields {
		fv[i].FieldId = id
	}
	s := begin()
	ret := d.GetFieldValues(fv)
	rets := make([]string, len(fv))
	for i, v := range fv {
		rets[i] = fmt.Sprintf("%d:%v", v.FieldId, nvml.Return(v.NvmlReturn))
	}
	s.end(p+"GetFieldValues(8 fields)", fmt.Sprintf("%v %s", ret, strings.Join(rets, " ")))
	readNoFieldSignals(d, p)
	s = begin()
	_, ret = d.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC)
	s.end(p+"GetTotalEccErrors (after fields)", ret)
}
