// Package detectors holds the node checks that kubemedic-detect runs as
// node-problem-detector custom plugins: GPU lost, fatal Xid, GPU memory (ECC
// and row remap), processes stuck in D state from deleted pods, NFS mounts
// and network links. One subpackage per fault family; a plugin package for
// the NPD protocol (exit 0 OK, 1 NonOK, 2 Unknown; one line of at most
// plugin.MaxLine = 160 bytes, the max_output_length of every deploy/npd
// config).
//
// A check must never report OK without evidence: a failed read, a timeout or
// unparseable tool output is Unknown. Nothing that can hang may inherit the
// plugin's stdout or stderr.
package detectors
