// Package dcgmdiag reads DCGM's diagnostics as `dcgmi diag -r 2 -j` prints
// them (Parse) and judges them per GPU (Judge) into a validation.Report.
//
// Two document shapes are read, both from real output (testdata/SOURCES.md):
//   - DCGM 3: {"DCGM GPU Diagnostic": {"test_categories": [{"category",
//     "tests": [{"name", "results": [{"gpu_ids": "0,1,..." or 0, "status":
//     "PASS", "warnings", "info"}]}]}], "version"}}, tests may be null;
//   - DCGM 4: {"DCGM Diagnostic": {"test_categories": [... "results":
//     [{"entity_group": "GPU", "entity_group_id": 1, "entity_id": 0,
//     "status": "Pass", "warnings": [{"warning", "error_id", ...}], "info"}],
//     "test_summary": {"status"}]}], "runtime_error"}, "entity_groups":
//     [{"entity_group": "GPU", "entities": [{"entity_id", "serial_num",
//     "device_id"}]}], "metadata": {"version", "Driver Version Detected"}}.
//
// dcgmi may print lines before the document ("Successfully ran diagnostic
// for group.", warnings) and after it; the document is the JSON value that
// starts the first line beginning with '{'.
//
// What must hold: output without a document, a document cut short (a
// truncated JSON), a result without a status or a GPU, and a status kubemedic
// does not know are errors or no answer, never a pass; a GPU that DCGM did
// not test, or that no test passed on, is no answer; DCGM's GPU ids become
// UUIDs by the board's serial number when DCGM 4 gives it, else by the
// index (DCGM numbers GPUs in NVML's order, as nvidia-smi does).
package dcgmdiag
