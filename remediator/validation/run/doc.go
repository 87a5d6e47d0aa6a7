// Package run is kubemedic-validate, the node-side program of the active
// GPU test (Main): in a pod that holds every GPU of a cordoned node, it
// lists the GPUs (nvidia-smi), runs one tool — DCGM's diagnostics
// (`dcgmi diag -r 2 -j`), NCCL's all-reduce (`all_reduce_perf -b 8 -e 8G
// -f 2 -g <GPUs>`) or nvbandwidth — under a timeout in a process group of
// its own (internal/procgroup), reads its output with the tool's parser
// (dcgmdiag, nccltests, nvbandwidth), holds it to the floors of the GPU
// model (validation.Floor, a template's --floor first), and writes the
// report (validation.Encode, at most 4096 bytes) to the termination log
// for the remediator's gate, and a summary for people to stdout.
//
// Exit status: 0 pass, 1 fail, 2 no answer (bad usage included: a
// template that cannot run the test tests nothing).
//
// What must hold: it never reads or writes the API server; no answer is
// never a pass — a tool that cannot start, times out (its whole process
// group is killed), leaves output that is truncated, over 16 MiB or
// unparseable, no GPU visible, a GPU nvidia-smi cannot open, and a pass
// from a tool that exited non-zero are NoAnswer; whatever the tool's
// children left running is killed before the report is written, so they
// do not hold the GPUs for the next test.
package run
