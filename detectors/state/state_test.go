package state

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type sample struct {
	Seen map[string]int `json:"seen"`
}

func TestSaveLoadRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	s, err := Open(context.Background(), dir, "xid")
	require.NoError(t, err)
	var v sample
	found, err := s.Load(&v)
	require.NoError(t, err)
	require.False(t, found)
	require.NoError(t, s.Save(sample{Seen: map[string]int{"0000:3b:00.0": 79}}))
	require.NoError(t, s.Close())

	s, err = Open(context.Background(), dir, "xid")
	require.NoError(t, err)
	defer s.Close()
	found, err = s.Load(&v)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, 79, v.Seen["0000:3b:00.0"])
	leftovers, _ := filepath.Glob(filepath.Join(dir, "*.tmp*"))
	require.Empty(t, leftovers)
}

func TestLockWaitsForTheOtherInvocation(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(context.Background(), dir, "nfs")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = Open(ctx, dir, "nfs")
	require.ErrorContains(t, err, "another invocation holds it")
	require.NoError(t, s.Close())
	s2, err := Open(context.Background(), dir, "nfs")
	require.NoError(t, err)
	require.NoError(t, s2.Close())
}

func TestCorruptStateNamesTheFile(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "dstate.json"), []byte("{not json"), 0o644))
	s, err := Open(context.Background(), dir, "dstate")
	require.NoError(t, err)
	defer s.Close()
	var v sample
	_, err = s.Load(&v)
	require.ErrorContains(t, err, filepath.Join(dir, "dstate.json"))
}

func TestNoStateDir(t *testing.T) {
	_, err := Open(context.Background(), "", "x")
	require.ErrorContains(t, err, "--state-dir")
}
