// Package validationtest holds what the tests of the validation packages
// share: a node's GPUs as nvidia-smi lists them in the test pod, and the
// reading of a package's testdata. Test code: no shipped binary links it.
package validationtest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/kubemedic/kubemedic/remediator/validation"
)

// UUID is the i-th GPU's UUID in Node: the real H100's of
// shared/fixtures/nvidia-h100-580.159.04, its last byte i.
func UUID(i int) string { return fmt.Sprintf("GPU-179b83e0-c021-1d8e-a043-c3b3abb37c%02x", i) }

// Node is n GPUs of the model the driver names name, as nvidia-smi lists
// them in the test pod: index i, UUID(i), bus 0000:(18+i):00.0, serial
// 16549220083ii.
func Node(n int, name string) []validation.GPU {
	var gpus []validation.GPU
	for i := range n {
		gpus = append(gpus, validation.GPU{Index: i, UUID: UUID(i), Name: name,
			BusID: fmt.Sprintf("0000:%02x:00.0", 0x18+i), Serial: fmt.Sprintf("16549220083%02d", i)})
	}
	return gpus
}

// Read is the text of testdata/name in the calling test's package.
func Read(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
