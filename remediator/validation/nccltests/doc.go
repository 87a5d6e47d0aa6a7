// Package nccltests reads nccl-tests' all_reduce_perf output (Parse) and
// judges it against the node's all-reduce floor (Judge) into a
// validation.Report.
//
// It reads the table in both shapes found in real output
// (testdata/SOURCES.md): the current one (size, count, type, redop, root,
// then time, algbw, busbw and #wrong out of place and in place) and the
// older one without root and with an error column; NCCL's own INFO and
// WARN lines among the rows are skipped.
//
// What is compared: the bus bandwidth at the largest message size (8 GiB
// with -e 8G), the smaller of out of place and in place. Not "# Avg bus
// bandwidth": it averages every size from 8 bytes up, most of them bound
// by latency, so it depends on -b and -e and says little of the links (a
// real H100 run averages 70.7 GB/s and reaches 338.8 at 8 GiB). busbw is
// nccl-tests' own measure to compare with the hardware's link bandwidth
// (doc/PERFORMANCE.md in NVIDIA/nccl-tests). #wrong values or out-of-bounds
// values fail the node whatever the bandwidth: the GPUs summed wrong.
//
// An all-reduce measures the node, not one GPU: a report below the floor
// fails the node and names no GPU (each GPU's verdict is NoAnswer, which
// counts toward no per-GPU cap); nvbandwidth finds the slow link.
//
// What must hold: output without the table, with a row of the wrong
// shape, or that ends before "# Avg bus bandwidth" (a run cut short) is
// an error, never a pass.
package nccltests
