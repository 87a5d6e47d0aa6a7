package localcluster

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// S3Binary is the S3-compatible store the diagnostics tests use, in the
// testbin directory: versitygw (Apache 2.0), whose posix backend keeps
// each bucket as a directory and each object as a file. hack/testbin.sh
// builds it from its Go module. Not the MinIO server, which is AGPL.
const S3Binary = "versitygw"

// s3ReadyTimeout bounds versitygw's start.
const s3ReadyTimeout = 30 * time.Second

// S3 is a real versitygw process on a 127.0.0.1 port, with one bucket,
// its objects under Dir/data and their metadata under Dir/meta (sidecar
// files, so the file system needs no extended attributes).
type S3 struct {
	// Endpoint is host:port, as an S3 client takes it (plain HTTP).
	Endpoint string
	Bucket   string
	// AccessKey and SecretKey are the root user's.
	AccessKey, SecretKey string
	Dir                  string
	port                 int
	proc                 *Process
}

// NewS3 runs versitygw with bucket in dir (which must exist) and waits,
// within ctx, until it answers HTTP. The caller stops it with Stop.
func NewS3(ctx context.Context, dir, bucket string) (*S3, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	s := &S3{Endpoint: "127.0.0.1:" + strconv.Itoa(port), Bucket: bucket, AccessKey: "kubemedic-test", SecretKey: "kubemedic-test-secret-0123456789", Dir: dir, port: port}
	for _, d := range []string{filepath.Join(dir, "data", bucket), filepath.Join(dir, "meta")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	return s, s.Start(ctx)
}

// Start starts versitygw again after Stop, on the same port and with the
// same objects: a store that was down and is back.
func (s *S3) Start(ctx context.Context) error {
	bin, err := Binary(S3Binary)
	if err != nil {
		return err
	}
	p, err := StartProcess(context.Background(), ProcessSpec{
		Name: S3Binary, Path: bin,
		Args: []string{"--access", s.AccessKey, "--secret", s.SecretKey, "--port", s.Endpoint, "--quiet",
			"posix", "--sidecar", filepath.Join(s.Dir, "meta"), filepath.Join(s.Dir, "data")},
		LogPath: filepath.Join(s.Dir, S3Binary+".log"),
	})
	if err != nil {
		return err
	}
	s.proc = p
	ctx, cancel := context.WithTimeout(ctx, s3ReadyTimeout)
	defer cancel()
	for {
		// Any HTTP answer (an unsigned request gets 403) means it serves.
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.Endpoint+"/", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			_ = p.Stop()
			return fmt.Errorf("versitygw on %s did not answer within %s%s", s.Endpoint, s3ReadyTimeout, p.LogTail(20))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Down reports whether nothing listens on the store's port now.
func (s *S3) Down() bool {
	c, err := net.DialTimeout("tcp", s.Endpoint, 200*time.Millisecond)
	if err != nil {
		return true
	}
	c.Close()
	return false
}

// ObjectPath is where the posix backend keeps an object: a file.
func (s *S3) ObjectPath(key string) string { return filepath.Join(s.Dir, "data", s.Bucket, key) }

// LogTail returns the last lines of versitygw's log.
func (s *S3) LogTail() string { return s.proc.LogTail(20) }

// Stop stops versitygw and waits for it to exit; the objects stay.
func (s *S3) Stop() error {
	if s.proc == nil {
		return nil
	}
	return s.proc.Stop()
}
