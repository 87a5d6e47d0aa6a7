package gpu

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParseNvidiaSmi feeds the three parsers (--query-gpu,
// --query-remapped-rows, -q -d ECC) arbitrary output: they must not
// panic, must return either devices or an error, and every device they
// return must have a normalised bus ID (or none) and a reason when unusable.
func FuzzParseNvidiaSmi(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("..", "testdata", "gpu", "*.txt"))
	if err != nil {
		f.Fatal(err)
	}
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, 0)
		f.Add(b, 15)
	}
	f.Fuzz(func(t *testing.T, out []byte, exit int) {
		for i, parse := range []func([]byte, int) ([]Device, error){ParseQueryGPU, ParseRemappedRows, ParseQueryECC} {
			isECC := i == 2
			devs, err := parse(out, exit)
			if err != nil {
				if devs != nil {
					t.Fatalf("devices and an error: %v", err)
				}
				continue
			}
			for _, d := range devs {
				// The -q -d ECC log names every device by its bus ID.
				if d.BusID != "" || isECC {
					if n, ok := NormalizeBusID(d.BusID); !ok || n != d.BusID {
						t.Fatalf("bus ID %q not normalised", d.BusID)
					}
				}
				if d.Lost && d.Err == "" {
					t.Fatalf("lost device without a reason: %+v", d)
				}
				if strings.ContainsAny(d.UUID, "\r\n") {
					t.Fatalf("UUID with a line break: %q", d.UUID)
				}
			}
		}
	})
}
