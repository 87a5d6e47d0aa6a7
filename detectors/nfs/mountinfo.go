package nfs

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// Mount is one line of /proc/<pid>/mountinfo (proc(5)).
type Mount struct {
	ID, Parent   int
	Major, Minor int
	// Root is the path within the file system that is mounted here.
	Root string
	// MountPoint is where it is mounted, in the reader's mount namespace.
	MountPoint string
	Options    string
	// Optional are the optional fields ("shared:1", "master:2", ...).
	Optional []string
	FSType   string
	// Source is e.g. "server:/export" for NFS.
	Source       string
	SuperOptions string
}

// ParseMountinfo parses a mountinfo file. name is only used in errors. A
// line that does not parse is an error naming the file and line: a broken
// mountinfo must make the check Unknown, not hide a mount.
func ParseMountinfo(name string, b []byte) ([]Mount, error) {
	var mounts []Mount
	for n := 1; len(b) > 0; n++ {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		if len(line) == 0 {
			continue
		}
		m, err := parseMountinfoLine(string(line))
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, n, err)
		}
		mounts = append(mounts, m)
	}
	return mounts, nil
}

func parseMountinfoLine(line string) (Mount, error) {
	f := strings.Split(line, " ")
	sep := -1
	for i := 6; i < len(f); i++ {
		if f[i] == "-" {
			sep = i
			break
		}
	}
	if len(f) < 10 || sep < 0 || len(f) != sep+4 {
		return Mount{}, fmt.Errorf("want 6 fields, optional fields, \"-\" and 3 fields; got %d fields", len(f))
	}
	var m Mount
	var err error
	if m.ID, err = strconv.Atoi(f[0]); err != nil {
		return Mount{}, fmt.Errorf("mount ID %q: not a number", f[0])
	}
	if m.Parent, err = strconv.Atoi(f[1]); err != nil {
		return Mount{}, fmt.Errorf("parent ID %q: not a number", f[1])
	}
	maj, min, ok := strings.Cut(f[2], ":")
	if !ok {
		return Mount{}, fmt.Errorf("major:minor %q: no colon", f[2])
	}
	if m.Major, err = strconv.Atoi(maj); err != nil {
		return Mount{}, fmt.Errorf("major:minor %q: not numbers", f[2])
	}
	if m.Minor, err = strconv.Atoi(min); err != nil {
		return Mount{}, fmt.Errorf("major:minor %q: not numbers", f[2])
	}
	if m.Root, err = unescape(f[3]); err != nil {
		return Mount{}, fmt.Errorf("root: %w", err)
	}
	if m.MountPoint, err = unescape(f[4]); err != nil {
		return Mount{}, fmt.Errorf("mount point: %w", err)
	}
	if !strings.HasPrefix(m.MountPoint, "/") {
		return Mount{}, fmt.Errorf("mount point %q is not absolute", m.MountPoint)
	}
	m.Options = f[5]
	if sep > 6 {
		m.Optional = f[6:sep]
	}
	if m.FSType, err = unescape(f[sep+1]); err != nil {
		return Mount{}, fmt.Errorf("fstype: %w", err)
	}
	if m.FSType == "" {
		return Mount{}, fmt.Errorf("empty fstype")
	}
	if m.Source, err = unescape(f[sep+2]); err != nil {
		return Mount{}, fmt.Errorf("source: %w", err)
	}
	if m.SuperOptions, err = unescape(f[sep+3]); err != nil {
		return Mount{}, fmt.Errorf("super options: %w", err)
	}
	return m, nil
}

// unescape undoes the kernel's octal escapes (mangle() in fs/proc_namespace.c
// escapes space, tab, newline and backslash as \040, \011, \012, \134).
func unescape(s string) (string, error) {
	if s == "" {
		return "", fmt.Errorf("empty field")
	}
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		if i+4 > len(s) {
			return "", fmt.Errorf("%q: truncated escape", s)
		}
		v, err := strconv.ParseUint(s[i+1:i+4], 8, 8)
		if err != nil {
			return "", fmt.Errorf("%q: bad escape %q", s, s[i:i+4])
		}
		b.WriteByte(byte(v))
		i += 3
	}
	return b.String(), nil
}

// FstabEntry is one line of /etc/fstab (fstab(5)).
type FstabEntry struct {
	Source, MountPoint, FSType string
	Options                    []string
}

// NoAuto says whether the entry is not mounted at boot.
func (e FstabEntry) NoAuto() bool {
	for _, o := range e.Options {
		if o == "noauto" {
			return true
		}
	}
	return false
}

// ParseFstab parses /etc/fstab: comments and blank lines are skipped, a
// line with fewer than 3 fields is an error naming the file and line. Fields
// use the same octal escapes as mountinfo.
func ParseFstab(name string, b []byte) ([]FstabEntry, error) {
	var out []FstabEntry
	for n, line := range strings.Split(string(b), "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) < 3 {
			return nil, fmt.Errorf("%s:%d: want at least source, mount point and type; got %d fields", name, n+1, len(f))
		}
		var e FstabEntry
		var err error
		if e.Source, err = unescape(f[0]); err != nil {
			return nil, fmt.Errorf("%s:%d: source: %w", name, n+1, err)
		}
		if e.MountPoint, err = unescape(f[1]); err != nil {
			return nil, fmt.Errorf("%s:%d: mount point: %w", name, n+1, err)
		}
		e.FSType = f[2]
		if len(f) > 3 {
			e.Options = strings.Split(f[3], ",")
		}
		out = append(out, e)
	}
	return out, nil
}
