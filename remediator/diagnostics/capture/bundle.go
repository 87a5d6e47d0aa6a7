package capture

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/kubemedic/kubemedic/detectors/host"
	"github.com/kubemedic/kubemedic/policies/v1alpha1"
	"github.com/kubemedic/kubemedic/remediator/diagnostics"
)

// Capture is one capture on a node.
type Capture struct {
	Root      host.Root
	Node      string
	Operation string
	Trigger   *diagnostics.Trigger
	Parts     []Part
	// Spool is where bundles wait for the store, on the node's disk.
	Spool string
	// Now is the clock.
	Now func() time.Time
	// NoChroot runs the host's tools without chrooting into Root: for a
	// root that is a plain directory of fakes (tests, the demo).
	NoChroot bool
	// GPU is the UUID of the GPU the operation is about; "" when none.
	GPU string
}

// Run collects every part into a scratch directory beside the spool,
// writes the bundle into the spool, and returns its manifest and spooled
// bundle. Parts fail alone; Run fails only when no bundle can be written.
func (c *Capture) Run(ctx context.Context) (*diagnostics.Manifest, Spooled, error) {
	if err := os.MkdirAll(c.Spool, 0o700); err != nil {
		return nil, Spooled{}, fmt.Errorf("spool %s: %w", c.Spool, err)
	}
	scratch, err := os.MkdirTemp(c.Spool, ".capture-")
	if err != nil {
		return nil, Spooled{}, fmt.Errorf("spool %s: %w", c.Spool, err)
	}
	defer os.RemoveAll(scratch)
	m := &diagnostics.Manifest{Node: c.Node, Operation: c.Operation, Trigger: c.Trigger, Created: c.Now().UTC(), GPU: c.GPU}
	if id, err := c.Root.BootID(); err == nil {
		m.BootID = id
	}
	for _, p := range c.Parts {
		r := runPart(ctx, p, c.Root, scratch, c.NoChroot)
		m.Parts = append(m.Parts, r)
		if p.Name == "gpu-list" && !r.Failed() && r.File != "" {
			m.GPUs = parseGPUList(filepath.Join(scratch, r.File))
		}
	}
	sp, err := writeBundle(m, scratch, c.Spool, diagnostics.Key(c.Node, c.Operation))
	return m, sp, err
}

// parseGPUList reads nvidia-smi's index, pci.bus_id, uuid, serial CSV;
// lines it cannot read are left out (the file is in the bundle).
func parseGPUList(path string) []diagnostics.GPU {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.TrimLeadingSpace = true
	r.FieldsPerRecord = -1
	var out []diagnostics.GPU
	for {
		rec, err := r.Read()
		if err != nil {
			break
		}
		if len(rec) != 4 || !strings.HasPrefix(rec[2], "GPU-") {
			continue
		}
		out = append(out, diagnostics.GPU{Index: rec[0], BusID: rec[1], UUID: rec[2], Serial: rec[3]})
	}
	return out
}

// Spooled is a bundle in the spool: the .tar.gz and the sidecar that
// says under which key and SHA-256 it goes to the store.
type Spooled struct {
	Path   string   `json:"-"`
	Key    string   `json:"key"`
	Size   int64    `json:"size"`
	SHA256 string   `json:"sha256"`
	Files  []string `json:"files"`
	// GPU is the UUID of the GPU the capture is about, stored with the
	// object; "" when the operation named none.
	GPU string `json:"gpu,omitempty"`
}

const (
	bundleExt  = ".tar.gz"
	sidecarExt = ".json"
)

// spoolName is the bundle's file in the spool: its key with "/" as "__".
func spoolName(key string) string {
	return strings.ReplaceAll(strings.TrimSuffix(key, bundleExt), "/", "__") + bundleExt
}

// writeBundle writes manifest.json and the part files of dir as one
// .tar.gz into the spool, fsynced and renamed into place so that a crash
// or a reboot leaves either the whole bundle or none, then its sidecar.
func writeBundle(m *diagnostics.Manifest, dir, spool, key string) (Spooled, error) {
	var names []string
	for _, p := range m.Parts {
		if p.File == "" {
			continue
		}
		fi, err := os.Stat(filepath.Join(dir, p.File))
		if err != nil {
			continue
		}
		sum, err := fileSHA256(filepath.Join(dir, p.File))
		if err != nil {
			return Spooled{}, err
		}
		m.Files = append(m.Files, diagnostics.File{Name: p.File, Size: fi.Size(), SHA256: sum})
		names = append(names, p.File)
	}
	mb, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return Spooled{}, err
	}
	final := filepath.Join(spool, spoolName(key))
	tmp := final + ".part"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return Spooled{}, fmt.Errorf("write bundle: %w", err)
	}
	h := sha256.New()
	gz := gzip.NewWriter(io.MultiWriter(f, h))
	tw := tar.NewWriter(gz)
	prefix := strings.TrimSuffix(filepath.Base(key), bundleExt) + "/"
	add := func(name string, size int64, r io.Reader) error {
		return diagnostics.AddTar(tw, prefix+name, m.Created, size, r)
	}
	werr := add(diagnostics.ManifestFile, int64(len(mb)), strings.NewReader(string(mb)))
	for _, fl := range m.Files {
		if werr != nil {
			break
		}
		var pf *os.File
		if pf, werr = os.Open(filepath.Join(dir, fl.Name)); werr == nil {
			werr = add(fl.Name, fl.Size, pf)
			pf.Close()
		}
	}
	for _, e := range []error{werr, tw.Close(), gz.Close(), f.Sync(), f.Close()} {
		if e != nil {
			_ = os.Remove(tmp)
			return Spooled{}, fmt.Errorf("write bundle %s: %w", tmp, e)
		}
	}
	fi, err := os.Stat(tmp)
	if err != nil {
		return Spooled{}, err
	}
	sp := Spooled{Path: final, Key: key, Size: fi.Size(), SHA256: hex.EncodeToString(h.Sum(nil)), Files: append([]string{diagnostics.ManifestFile}, names...), GPU: m.GPU}
	sb, _ := json.Marshal(sp)
	// The sidecar first: a bundle without one is unusable, and the
	// sidecar of a missing bundle is removed by the next flush.
	if err := writeFileSync(strings.TrimSuffix(final, bundleExt)+sidecarExt, sb); err != nil {
		_ = os.Remove(tmp)
		return Spooled{}, err
	}
	if err := os.Rename(tmp, final); err != nil {
		return Spooled{}, fmt.Errorf("write bundle: %w", err)
	}
	syncDir(spool)
	return sp, nil
}

func writeFileSync(path string, b []byte) error {
	tmp := path + ".part"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, werr := f.Write(b)
	for _, e := range []error{werr, f.Sync(), f.Close()} {
		if e != nil {
			_ = os.Remove(tmp)
			return fmt.Errorf("write %s: %w", path, e)
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// syncDir makes a rename in dir durable; an error is ignored (some file
// systems do not sync directories).
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Uploader puts bundles into the store; *Store is one.
type Uploader interface {
	Exists(ctx context.Context, key string, size int64, sum string) (bool, error)
	Put(ctx context.Context, key string, r io.Reader, size int64, sum, gpu string) error
}

// Spool lists the bundles waiting in dir, oldest first. A sidecar whose
// bundle is gone (a crash between the two writes) is removed; a bundle
// whose sidecar is unreadable is kept and reported.
func Spool(dir string) ([]Spooled, []error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, []error{fmt.Errorf("spool %s: %w", dir, err)}
	}
	var out []Spooled
	var errs []error
	type aged struct {
		s  Spooled
		at time.Time
	}
	var list []aged
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, sidecarExt) || strings.HasPrefix(name, ".") {
			continue
		}
		side := filepath.Join(dir, name)
		bundle := strings.TrimSuffix(side, sidecarExt) + bundleExt
		fi, err := os.Stat(bundle)
		if errors.Is(err, os.ErrNotExist) {
			_ = os.Remove(side)
			continue
		}
		b, rerr := os.ReadFile(side)
		var s Spooled
		if rerr == nil {
			rerr = json.Unmarshal(b, &s)
		}
		if rerr != nil || s.Key == "" || !diagnostics.ValidSHA256(s.SHA256) {
			errs = append(errs, fmt.Errorf("spool %s: sidecar unreadable (%v); the bundle stays", side, rerr))
			continue
		}
		s.Path = bundle
		list = append(list, aged{s, fi.ModTime()})
	}
	sort.SliceStable(list, func(i, j int) bool { return list[i].at.Before(list[j].at) })
	for _, a := range list {
		out = append(out, a.s)
	}
	return out, errs
}

// Flush uploads every bundle in the spool, oldest first, and removes one
// only once the store holds it with the same SHA-256: a bundle the store
// holds already is not uploaded again. It returns the keys now stored and
// the errors of those that stay.
func Flush(ctx context.Context, dir string, up Uploader) ([]string, []error) {
	list, errs := Spool(dir)
	var stored []string
	for _, s := range list {
		if err := upload(ctx, s, up); err != nil {
			errs = append(errs, err)
			continue
		}
		_ = os.Remove(s.Path)
		_ = os.Remove(strings.TrimSuffix(s.Path, bundleExt) + sidecarExt)
		stored = append(stored, s.Key)
	}
	syncDir(dir)
	return stored, errs
}

func upload(ctx context.Context, s Spooled, up Uploader) error {
	if sum, err := fileSHA256(s.Path); err != nil {
		return err
	} else if sum != s.SHA256 {
		return fmt.Errorf("spool %s: sha256 %s, its sidecar says %s; kept for a person to look at", s.Path, sum, s.SHA256)
	}
	ok, err := up.Exists(ctx, s.Key, s.Size, s.SHA256)
	if err != nil {
		return fmt.Errorf("upload %s: %w", s.Key, err)
	}
	if ok {
		return nil
	}
	f, err := os.Open(s.Path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := up.Put(ctx, s.Key, f, s.Size, s.SHA256, s.GPU); err != nil {
		return fmt.Errorf("upload %s: %w", s.Key, err)
	}
	return nil
}

// NewReport is the report of a capture: its result from the parts, and
// whether the store holds the bundle.
func NewReport(m *diagnostics.Manifest, sp Spooled, stored bool, storeErr error, flushed int) diagnostics.Report {
	r := diagnostics.Report{Key: sp.Key, Size: sp.Size, SHA256: sp.SHA256, Files: sp.Files, Stored: stored, Flushed: flushed}
	ok := 0
	for _, p := range m.Parts {
		switch {
		case p.Failed():
			r.FailedParts = append(r.FailedParts, p.Why())
		case p.Skipped == "":
			ok++
		}
	}
	r.Result = v1alpha1.DiagnosticsCaptured
	if len(r.FailedParts) > 0 {
		r.Result = v1alpha1.DiagnosticsPartial
	}
	r.Message = fmt.Sprintf("%d of %d parts captured", ok, len(m.Parts))
	if n := len(m.Parts) - ok - len(r.FailedParts); n > 0 {
		r.Message += fmt.Sprintf(" (%d not on this node)", n)
	}
	switch {
	case stored:
		r.Message += "; stored"
	case storeErr != nil:
		r.Message += "; not stored yet, the bundle waits in the node's spool: " + diagnostics.Truncate(storeErr.Error(), 512)
	default:
		r.Message += "; not stored (no store configured), the bundle waits in the node's spool"
	}
	return r
}
