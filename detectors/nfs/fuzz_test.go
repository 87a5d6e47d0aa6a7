package nfs

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// FuzzParseMountinfo checks that the parser never panics and that what it
// accepts survives a round trip through the kernel's escaping.
func FuzzParseMountinfo(f *testing.F) {
	files, err := filepath.Glob(filepath.Join(testdata, "mountinfo-*.txt"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no mountinfo fixtures in %s: %v", testdata, err)
	}
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ms, err := ParseMountinfo("mountinfo", b)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "mountinfo:") {
				t.Fatalf("error does not name the file and line: %v", err)
			}
			return
		}
		var lines []string
		for _, m := range ms {
			if !strings.HasPrefix(m.MountPoint, "/") || m.FSType == "" {
				t.Fatalf("accepted %+v", m)
			}
			lines = append(lines, formatMountinfo(m))
		}
		again, err := ParseMountinfo("again", []byte(strings.Join(lines, "\n")))
		if err != nil {
			t.Fatalf("re-parse %q: %v", lines, err)
		}
		if !reflect.DeepEqual(ms, again) {
			t.Fatalf("round trip:\n%+v\n%+v", ms, again)
		}
	})
}

// formatMountinfo writes a Mount the way the kernel does (show_mountinfo).
func formatMountinfo(m Mount) string {
	fields := []string{fmt.Sprint(m.ID), fmt.Sprint(m.Parent), fmt.Sprintf("%d:%d", m.Major, m.Minor),
		escape(m.Root), escape(m.MountPoint), m.Options}
	fields = append(fields, m.Optional...)
	fields = append(fields, "-", escape(m.FSType), escape(m.Source), escape(m.SuperOptions))
	return strings.Join(fields, " ")
}

func escape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case ' ', '\t', '\n', '\\':
			fmt.Fprintf(&b, "\\%03o", c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
