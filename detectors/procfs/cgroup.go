package procfs

import (
	"bytes"
	"fmt"
	"strings"
)

// PodUID finds the UID of the Kubernetes pod a process belongs to in its
// /proc/<pid>/cgroup file. The file has one "hierarchy-ID:controllers:path"
// line per hierarchy: many under cgroup v1, one "0::/path" under v2. The
// kubelet names a pod's cgroup after its UID, in one of these forms (after
// any prefix: a cgroup root such as kind's /kubelet, a container runtime's
// service, a container engine's cgroup):
//
//	cgroupfs driver: /kubepods/besteffort/pod<uid>/<container>
//	                 /kubepods/pod<uid>/<container> (guaranteed QoS)
//	systemd driver:  /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid_with_underscores>.slice/cri-containerd-<id>.scope
//	                 /kubepods.slice/kubepods-pod<uid>.slice/crio-<id>.scope (guaranteed QoS)
//	                 /kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod<uid>.slice/... (kind)
//	                 /system.slice/containerd.service/kubepods-besteffort-pod<uid>.slice:cri-containerd:<id> (runtime and kubelet disagree on the driver)
//
// The UID is returned with '-' for systemd's '_'. It is a UUID, or 32 hex
// digits for a static pod (the kubelet's hash of the manifest). When pods
// nest (a kind cluster in a pod), the outermost pod is the one this node's
// kubelet knows, so it is returned. A cgroup v2 path of a removed cgroup
// ends in " (deleted)", which is ignored.
//
// ok is false for a process that is in no pod. err is set for a line that
// is not "ID:controllers:path", or for lines naming different pods.
func PodUID(cgroupFile []byte) (uid string, ok bool, err error) {
	rest := cgroupFile
	for lineNo := 1; len(rest) > 0; lineNo++ {
		var line []byte
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i], rest[i+1:]
		} else {
			line, rest = rest, nil
		}
		if len(line) == 0 {
			continue
		}
		i := bytes.IndexByte(line, ':')
		if i < 0 {
			return "", false, fmt.Errorf("parse cgroup: line %d: want ID:controllers:path", lineNo)
		}
		j := bytes.IndexByte(line[i+1:], ':')
		if j < 0 {
			return "", false, fmt.Errorf("parse cgroup: line %d: want ID:controllers:path", lineNo)
		}
		if _, ok := parseUint(line[:i], 1<<31); !ok {
			return "", false, fmt.Errorf("parse cgroup: line %d: hierarchy ID %q is not a number", lineNo, trunc(line[:i]))
		}
		path := line[i+1+j+1:]
		if len(path) == 0 || path[0] != '/' {
			return "", false, fmt.Errorf("parse cgroup: line %d: path %q is not absolute", lineNo, trunc(path))
		}
		path = bytes.TrimSuffix(path, []byte(" (deleted)"))
		u, found := podUIDInPath(path)
		if !found {
			continue
		}
		if uid != "" && u != uid {
			return "", false, fmt.Errorf("parse cgroup: line %d: pod %s, but an earlier line has pod %s", lineNo, u, uid)
		}
		uid = u
	}
	return uid, uid != "", nil
}

// podUIDInPath returns the outermost pod UID in a cgroup path.
func podUIDInPath(path []byte) (string, bool) {
	var parent, grandparent []byte
	rest := path
	for len(rest) > 0 {
		var c []byte
		if i := bytes.IndexByte(rest, '/'); i >= 0 {
			c, rest = rest[:i], rest[i+1:]
		} else {
			c, rest = rest, nil
		}
		if len(c) == 0 {
			continue
		}
		if uid, ok := cgroupfsPod(c, parent, grandparent); ok {
			return uid, true
		}
		if uid, ok := systemdPod(c); ok {
			return uid, true
		}
		grandparent, parent = parent, c
	}
	return "", false
}

// cgroupfsPod matches "pod<uid>" under "kubepods" or
// "kubepods/{besteffort,burstable}".
func cgroupfsPod(c, parent, grandparent []byte) (string, bool) {
	uid, ok := bytes.CutPrefix(c, []byte("pod"))
	if !ok || !validUID(uid) {
		return "", false
	}
	switch string(parent) {
	case "kubepods":
	case "besteffort", "burstable":
		if string(grandparent) != "kubepods" {
			return "", false
		}
	default:
		return "", false
	}
	return string(uid), true
}

// systemdPod matches "<prefix>-pod<uid_with_underscores>.slice", where the
// prefix is kubepods[-besteffort|-burstable], possibly after
// "<cgroup-root>-" (kind's "kubelet-kubepods-..."). A ":runtime:id" suffix
// (cgroupsPath in systemd form taken literally) is ignored.
func systemdPod(c []byte) (string, bool) {
	if i := bytes.IndexByte(c, ':'); i >= 0 {
		c = c[:i]
	}
	name, ok := bytes.CutSuffix(c, []byte(".slice"))
	if !ok {
		return "", false
	}
	i := bytes.LastIndex(name, []byte("-pod"))
	if i < 0 {
		return "", false
	}
	prefix, raw := name[:i], name[i+len("-pod"):]
	qos := [][]byte{[]byte("kubepods"), []byte("kubepods-besteffort"), []byte("kubepods-burstable")}
	known := false
	for _, q := range qos {
		if bytes.Equal(prefix, q) || bytes.HasSuffix(prefix, q) && prefix[len(prefix)-len(q)-1] == '-' {
			known = true
			break
		}
	}
	if !known {
		return "", false
	}
	// systemd separates slice levels with '-', so the kubelet escapes the
	// UID's dashes as '_': a '-' here is not a pod UID.
	if bytes.IndexByte(raw, '-') >= 0 {
		return "", false
	}
	uid := strings.ReplaceAll(string(raw), "_", "-")
	if !validUID([]byte(uid)) {
		return "", false
	}
	return uid, true
}

// validUID accepts a lower-case UUID (8-4-4-4-12 hex digits), the form of
// API server UIDs, or 32 lower-case hex digits, the form of static pods'.
func validUID(b []byte) bool {
	switch len(b) {
	case 32:
		for _, c := range b {
			if !isHex(c) {
				return false
			}
		}
		return true
	case 36:
		for i, c := range b {
			if i == 8 || i == 13 || i == 18 || i == 23 {
				if c != '-' {
					return false
				}
			} else if !isHex(c) {
				return false
			}
		}
		return true
	}
	return false
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' }
