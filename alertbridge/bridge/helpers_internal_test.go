package bridge

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/alertbridge/config"
	"github.com/kubemedic/kubemedic/alertbridge/ghclient"
	"github.com/kubemedic/kubemedic/alertbridge/journal"
	"github.com/kubemedic/kubemedic/test/testsupport"
)

const internalConfig = `
defaultRepo: acme/gpu-oncall
reopenWindow: 1h
stormGuard: {maxNewIssues: 2, window: 10m}
`

// newTestBridge builds a Bridge with a real journal in a temp dir. gh may be
// nil for tests that make no GitHub call; an in-memory stand-in is used then.
func newTestBridge(t *testing.T, cfgYAML string, gh ghclient.Client) (*Bridge, *testsupport.SyncBuffer) {
	t.Helper()
	cfg, err := config.Parse("internal-test.yaml", []byte(cfgYAML))
	require.NoError(t, err)
	j, err := journal.Open(t.TempDir(), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = j.Close() })
	if gh == nil {
		gh = &memGitHub{}
	}
	logs := &testsupport.SyncBuffer{}
	b, err := New(Options{
		Config: cfg, Journal: j, GitHub: gh, Auth: Auth{Insecure: true},
		Log: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	require.NoError(t, err)
	return b, logs
}

// memGitHub is an in-memory ghclient.Client for tests that need exact control
// over when a call returns.
type memGitHub struct {
	// Client makes memGitHub a ghclient.Client whatever methods are added; the
	// bridge paths these tests drive call only those defined below.
	ghclient.Client

	mu      sync.Mutex
	next    int
	created []ghclient.NewIssue
	edits   []ghclient.Edit
	// onEdit, when set, runs during EditIssue, before it returns.
	onEdit func(repo string, number int)
}

func (m *memGitHub) ListIssues(context.Context, string, ghclient.IssueState, time.Time, ...string) ([]ghclient.Issue, error) {
	return nil, nil
}

func (m *memGitHub) CreateIssue(_ context.Context, repo string, in ghclient.NewIssue) (ghclient.Issue, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.next++
	m.created = append(m.created, in)
	return ghclient.Issue{Repo: repo, Number: m.next, Title: in.Title, Body: in.Body, State: ghclient.StateOpen, Labels: in.Labels}, nil
}

func (m *memGitHub) EditIssue(_ context.Context, repo string, number int, e ghclient.Edit) (ghclient.Issue, error) {
	m.mu.Lock()
	m.edits = append(m.edits, e)
	onEdit := m.onEdit
	m.mu.Unlock()
	if onEdit != nil {
		onEdit(repo, number)
	}
	is := ghclient.Issue{Repo: repo, Number: number, State: ghclient.StateOpen}
	if e.Body != nil {
		is.Body = *e.Body
	}
	if e.State != nil {
		is.State = *e.State
	}
	return is, nil
}

func (m *memGitHub) CreateComment(context.Context, string, int, string) error { return nil }

func (m *memGitHub) ListComments(context.Context, string, int, time.Time) ([]ghclient.Comment, error) {
	return nil, nil
}
