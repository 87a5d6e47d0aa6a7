package diagnostics

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// ClusterKey is the object key of an operation's must-gather, beside its
// node bundle: <node>/<operation>-cluster.tar.gz.
func ClusterKey(node, operation string) string { return node + "/" + operation + "-cluster.tar.gz" }

// GatheredFile is one file of a must-gather, or why it could not be read.
type GatheredFile struct {
	Name string
	Data []byte
	// Err is why the file is missing or partial (a forbidden read, a pod
	// without logs); the manifest records it as a failed part.
	Err error
}

// MustGather is what the remediator read of the API server for one
// operation's capture.
type MustGather struct {
	Node      string
	Operation string
	// GPU is the UUID of the GPU the operation is about; "" when none.
	GPU     string
	Created time.Time
	Files   []GatheredFile
}

// Build writes the must-gather as one .tar.gz, manifest.json first (each
// file's size and sha256, each read that failed), and returns it with its
// sha256 and file names.
func (m *MustGather) Build() (data []byte, sum string, files []string, err error) {
	man := Manifest{Node: m.Node, Operation: m.Operation, Created: m.Created.UTC()}
	var kept []GatheredFile
	for _, f := range m.Files {
		r := PartResult{Name: f.Name, File: f.Name}
		if f.Err != nil {
			r.Error = Truncate(f.Err.Error(), 256)
		}
		man.Parts = append(man.Parts, r)
		if len(f.Data) > 0 {
			s := sha256.Sum256(f.Data)
			man.Files = append(man.Files, File{Name: f.Name, Size: int64(len(f.Data)), SHA256: hex.EncodeToString(s[:])})
			kept = append(kept, f)
		}
	}
	mb, err := json.MarshalIndent(man, "", "  ")
	if err != nil {
		return nil, "", nil, err
	}
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	prefix := strings.TrimSuffix(m.Operation, "/") + "-cluster/"
	if err := AddTar(tw, prefix+ManifestFile, man.Created, int64(len(mb)), bytes.NewReader(mb)); err != nil {
		return nil, "", nil, err
	}
	files = []string{ManifestFile}
	for _, f := range kept {
		if err := AddTar(tw, prefix+f.Name, man.Created, int64(len(f.Data)), bytes.NewReader(f.Data)); err != nil {
			return nil, "", nil, fmt.Errorf("must-gather %s: %w", f.Name, err)
		}
		files = append(files, f.Name)
	}
	if err := tw.Close(); err != nil {
		return nil, "", nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, "", nil, err
	}
	s := sha256.Sum256(buf.Bytes())
	return buf.Bytes(), hex.EncodeToString(s[:]), files, nil
}

// Failed lists the reads that failed, for a message.
func (m *MustGather) Failed() []string {
	var out []string
	for _, f := range m.Files {
		if f.Err != nil {
			out = append(out, f.Name+": "+Truncate(f.Err.Error(), 200))
		}
	}
	return out
}
