package notify

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTokenFromFileOrEnv(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	const env = "KUBEMEDIC_TEST_SLACK_TOKEN"

	t.Run("the file wins over the environment, trimmed", func(t *testing.T) {
		t.Setenv(env, "xoxb-from-env")
		got, err := TokenFromFileOrEnv(write("token", "xoxb-from-file\n"), env)
		require.NoError(t, err)
		require.Equal(t, "xoxb-from-file", got)
	})
	t.Run("no file: the environment, trimmed", func(t *testing.T) {
		t.Setenv(env, " xoxb-from-env\n")
		got, err := TokenFromFileOrEnv("", env)
		require.NoError(t, err)
		require.Equal(t, "xoxb-from-env", got)
	})
	t.Run("neither: no token and no error", func(t *testing.T) {
		t.Setenv(env, "")
		got, err := TokenFromFileOrEnv("", env)
		require.NoError(t, err)
		require.Empty(t, got)
	})
	t.Run("a missing file is an error callers can recognise", func(t *testing.T) {
		missing := filepath.Join(dir, "absent")
		_, err := TokenFromFileOrEnv(missing, env)
		require.ErrorIs(t, err, fs.ErrNotExist)
		require.ErrorContains(t, err, missing)
	})
	t.Run("an empty file is an error that does not fall back to the environment", func(t *testing.T) {
		t.Setenv(env, "xoxb-from-env")
		p := write("empty", " \n")
		got, err := TokenFromFileOrEnv(p, env)
		require.EqualError(t, err, "slack token file "+p+" is empty")
		require.Empty(t, got)
	})
	t.Run("errors never carry the token", func(t *testing.T) {
		p := write("unreadable", "xoxb-secret-value")
		require.NoError(t, os.Chmod(p, 0))
		if _, err := os.ReadFile(p); err == nil {
			t.Skip("running as root: a mode 0 file is still readable")
		}
		_, err := TokenFromFileOrEnv(p, env)
		require.Error(t, err)
		require.NotContains(t, err.Error(), "xoxb-secret-value")
	})
}
