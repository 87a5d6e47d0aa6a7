package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/kubemedic/kubemedic/remediator/diagnostics"
)

// Config says where bundles are kept. Credentials are not part of it:
// they come from a Secret (see Credentials).
type Config struct {
	// Endpoint is host[:port] of the S3-compatible store.
	Endpoint string
	// Bucket holds the bundles; it is never made public.
	Bucket string
	// Region of the bucket; "" lets the client ask the store.
	Region string
	// Insecure uses plain HTTP (a store inside the cluster without TLS).
	Insecure bool
}

// Credentials are the store's access key pair, read from a Secret's keys
// (or files) and never logged.
type Credentials struct {
	AccessKey, SecretKey string
}

// String hides the secret: a Credentials value that reaches a log line
// shows only the access key.
func (c Credentials) String() string { return "access key " + c.AccessKey + ", secret key (hidden)" }

// Store is a bucket of an S3-compatible store, through minio-go.
type Store struct {
	cfg    Config
	client *minio.Client
}

// New makes a client for cfg; it does not contact the store.
func New(cfg Config, cred Credentials) (*Store, error) {
	if cfg.Endpoint == "" || cfg.Bucket == "" {
		return nil, errors.New("diagnostics store: endpoint and bucket are required")
	}
	if cred.AccessKey == "" || cred.SecretKey == "" {
		return nil, errors.New("diagnostics store: the credentials have no access key or no secret key")
	}
	c, err := minio.New(cfg.Endpoint, &minio.Options{
		Creds:  credentials.NewStaticV4(cred.AccessKey, cred.SecretKey, ""),
		Secure: !cfg.Insecure,
		Region: cfg.Region,
	})
	if err != nil {
		return nil, fmt.Errorf("diagnostics store %s: %w", cfg.Endpoint, err)
	}
	return &Store{cfg: cfg, client: c}, nil
}

// Put uploads a bundle under key with its SHA-256 (and the GPU's UUID,
// when gpu is not "") as metadata, then asks the store for it back: it
// returns nil only when the store holds an object of this size whose
// recorded SHA-256 is sum.
func (s *Store) Put(ctx context.Context, key string, r io.Reader, size int64, sum, gpu string) error {
	return s.PutWith(ctx, key, r, size, sum, map[string]string{diagnostics.MetaGPU: gpu})
}

// PutWith is Put with more user metadata (empty values are left out).
func (s *Store) PutWith(ctx context.Context, key string, r io.Reader, size int64, sum string, more map[string]string) error {
	meta := map[string]string{diagnostics.MetaSHA256: sum}
	for k, v := range more {
		if v != "" {
			meta[k] = v
		}
	}
	_, err := s.client.PutObject(ctx, s.cfg.Bucket, key, r, size, minio.PutObjectOptions{
		ContentType:  "application/gzip",
		UserMetadata: meta,
	})
	if err != nil {
		return fmt.Errorf("put %s: %w", s.where(key), err)
	}
	return s.Verify(ctx, key, size, sum)
}

// Verify returns nil when the store holds key with this size and SHA-256;
// an error that IsNotFound when it holds no such key.
func (s *Store) Verify(ctx context.Context, key string, size int64, sum string) error {
	info, err := s.client.StatObject(ctx, s.cfg.Bucket, key, minio.StatObjectOptions{})
	if err != nil {
		if minio.ToErrorResponse(err).Code == minio.NoSuchKey {
			return fmt.Errorf("%s: %w", s.where(key), ErrNotFound)
		}
		return fmt.Errorf("stat %s: %w", s.where(key), err)
	}
	if info.Size != size {
		return fmt.Errorf("%s: the store holds %d bytes, the bundle has %d", s.where(key), info.Size, size)
	}
	if got := info.UserMetadata[diagnostics.MetaSHA256]; got != sum {
		return fmt.Errorf("%s: the store records sha256 %q, the bundle's is %s", s.where(key), got, sum)
	}
	return nil
}

// ErrNotFound: the store holds no object under the key.
var ErrNotFound = errors.New("no such object")

// Exists reports whether the store holds key with this size and SHA-256
// already, so that a bundle is never uploaded twice. An object under the
// key with other bytes is an error: nothing overwrites it.
func (s *Store) Exists(ctx context.Context, key string, size int64, sum string) (bool, error) {
	err := s.Verify(ctx, key, size, sum)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, ErrNotFound):
		return false, nil
	}
	return false, err
}

// Get downloads key into w.
func (s *Store) Get(ctx context.Context, key string, w io.Writer) (int64, error) {
	obj, err := s.client.GetObject(ctx, s.cfg.Bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return 0, fmt.Errorf("get %s: %w", s.where(key), err)
	}
	defer obj.Close()
	n, err := io.Copy(w, obj)
	if err != nil {
		return n, fmt.Errorf("get %s: %w", s.where(key), err)
	}
	return n, nil
}

// Link is a presigned GET link to key that works until now+expiry
// (at most diagnostics.MaxLinkExpiry); the bucket stays private.
func (s *Store) Link(ctx context.Context, key string, expiry time.Duration) (*url.URL, error) {
	if expiry <= 0 || expiry > diagnostics.MaxLinkExpiry {
		return nil, fmt.Errorf("link expiry %s: must be more than 0 and at most %s", expiry, diagnostics.MaxLinkExpiry)
	}
	u, err := s.client.PresignedGetObject(ctx, s.cfg.Bucket, key, expiry, nil)
	if err != nil {
		return nil, fmt.Errorf("presign %s: %w", s.where(key), err)
	}
	return u, nil
}

// List lists the objects under prefix (a node's bundles: "<node>/").
// S3's listing carries no user metadata: SHA256 and GPU are empty (Stat
// reads them).
func (s *Store) List(ctx context.Context, prefix string) ([]diagnostics.Object, error) {
	var out []diagnostics.Object
	for o := range s.client.ListObjects(ctx, s.cfg.Bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if o.Err != nil {
			return nil, fmt.Errorf("list %s: %w", s.where(prefix), o.Err)
		}
		out = append(out, diagnostics.Object{Key: o.Key, Size: o.Size, LastModified: o.LastModified})
	}
	return out, nil
}

// Stat reads one object with its recorded SHA-256 and GPU.
func (s *Store) Stat(ctx context.Context, key string) (diagnostics.Object, error) {
	info, err := s.client.StatObject(ctx, s.cfg.Bucket, key, minio.StatObjectOptions{})
	if err != nil {
		if minio.ToErrorResponse(err).Code == minio.NoSuchKey {
			return diagnostics.Object{}, fmt.Errorf("%s: %w", s.where(key), ErrNotFound)
		}
		return diagnostics.Object{}, fmt.Errorf("stat %s: %w", s.where(key), err)
	}
	o := diagnostics.Object{Key: key, Size: info.Size, LastModified: info.LastModified, SHA256: info.UserMetadata[diagnostics.MetaSHA256], GPU: info.UserMetadata[diagnostics.MetaGPU]}
	if f := info.UserMetadata[diagnostics.MetaFiles]; f != "" {
		o.Files = strings.Split(f, ",")
	}
	return o, nil
}

// Delete removes key.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := s.client.RemoveObject(ctx, s.cfg.Bucket, key, minio.RemoveObjectOptions{}); err != nil {
		return fmt.Errorf("delete %s: %w", s.where(key), err)
	}
	return nil
}

func (s *Store) where(key string) string {
	return fmt.Sprintf("s3://%s/%s at %s", s.cfg.Bucket, key, s.cfg.Endpoint)
}

// CredentialsFromFiles reads the key pair from the files a mounted Secret
// puts in dir (accessKey and secretKey).
func CredentialsFromFiles(dir string) (Credentials, error) {
	read := func(name string) (string, error) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return "", fmt.Errorf("diagnostics store credentials: %w", err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	a, err := read(diagnostics.SecretAccessKey)
	if err != nil {
		return Credentials{}, err
	}
	s, err := read(diagnostics.SecretSecretKey)
	if err != nil {
		return Credentials{}, err
	}
	return Credentials{AccessKey: a, SecretKey: s}, nil
}
