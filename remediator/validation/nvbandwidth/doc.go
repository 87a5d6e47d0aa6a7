// Package nvbandwidth reads NVIDIA nvbandwidth's output (Parse), as text
// or as its -j JSON, and judges its copy-engine bandwidths per GPU
// against their floors (Judge) into a validation.Report:
//
//   - host_to_device_memcpy_ce (floor h2d) and device_to_host_memcpy_ce
//     (d2h): a matrix of one CPU row and a column per GPU; a GPU's value
//     is its column;
//   - device_to_device_memcpy_read_ce (d2d): a GPU × GPU matrix (N/A on
//     the diagonal). A link below its floor is blamed on the end whose
//     links are mostly slow (its median is below the floor), and on both
//     ends when neither's is: one bad GPU slows all of its own links, and
//     only one of each of the others'.
//
// Text output is read test by test ("Running <test>.", the matrix's
// description, the column header, the rows, "SUM <test> <GB/s>"); a test
// that ends before its matrix is closed (by a blank line or its SUM line)
// was cut short. The device list ("Device 0: NVIDIA A100-SXM4-80GB
// (00000000:34:00)", v0.7 and later) maps matrix indices to GPUs by bus
// ID; without it, index i is the pod's i-th GPU in PCI order (CUDA's
// order under CUDA_DEVICE_ORDER=PCI_BUS_ID, which kubemedic-validate
// sets).
//
// What must hold: a test that is missing, waived, aborted (an ASSERT, a
// CUDA error) or cut short, a matrix of another size than the pod's GPUs,
// and a cell of N/A where a bandwidth belongs are no answer, never a
// pass; a malformed matrix is an error naming the line.
package nvbandwidth
