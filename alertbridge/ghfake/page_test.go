package ghfake_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/alertbridge/ghclient"
	"github.com/kubemedic/kubemedic/alertbridge/ghfake"
)

// TestPage checks that the page lists issues newest first with their
// comments, shows a closed issue as closed with its reason, escapes HTML,
// and is served at /_page without counting as an API call.
func TestPage(t *testing.T) {
	f, clk := newFake(t)
	f.AddRepo("acme/other")
	older := f.AddIssue(repo, "GPU lost on gpu-node-1", "Node <b>gpu-node-1</b> lost a GPU & <script>alert(1)</script>", "kubemedic", "gpu-lost")
	clk.Step(time.Minute)
	f.AddComment(repo, older, "kubemedic[bot]", "Cordoned <i>gpu-node-1</i>")
	clk.Step(time.Minute)
	f.CloseIssue(repo, older, ghclient.ReasonNotPlanned)
	f.AddIssue(repo, "Idle GPU in ml/trainer-0", "Idle for 2h.")

	page := call(t, http.MethodGet, strings.TrimSuffix(f.URL(), "/")+ghfake.PagePath, "")
	require.Equal(t, http.StatusOK, page.status)
	require.Equal(t, "text/html; charset=utf-8", page.header.Get("Content-Type"))
	html := string(page.body)

	require.Contains(t, html, `<meta http-equiv="refresh" content="3">`)
	require.Contains(t, html, "<h2>acme/gpu-alerts</h2>")
	require.Contains(t, html, "<h2>acme/other</h2>")
	newerAt := strings.Index(html, "#2 Idle GPU in ml/trainer-0")
	olderAt := strings.Index(html, "#1 GPU lost on gpu-node-1")
	require.Positive(t, newerAt, html)
	require.Greater(t, olderAt, newerAt, "newest issue first")

	older1 := html[olderAt:]
	older1 = older1[:strings.Index(older1, "</div>\n</div>")]
	require.Contains(t, html, "<div class=\"issue closed\">\n<h3>#1 GPU lost on gpu-node-1</h3>")
	require.Contains(t, older1, "closed as not planned")
	require.Contains(t, older1, "opened 2026-11-21 10:00:00Z by octocat")
	require.Contains(t, older1, "closed 2026-11-21 10:02:00Z")
	require.Contains(t, older1, `<span class="label">kubemedic</span><span class="label">gpu-lost</span>`)
	require.Contains(t, older1, "kubemedic[bot] commented 2026-11-21 10:01:00Z")
	require.Contains(t, html, "<div class=\"issue open\">\n<h3>#2 Idle GPU in ml/trainer-0</h3>")
	require.Contains(t, html, "<pre>Idle for 2h.</pre>")

	// Bodies and comments are text, never markup.
	require.Contains(t, older1, "<pre>Node &lt;b&gt;gpu-node-1&lt;/b&gt; lost a GPU &amp; &lt;script&gt;alert(1)&lt;/script&gt;</pre>")
	require.Contains(t, older1, "<pre>Cordoned &lt;i&gt;gpu-node-1&lt;/i&gt;</pre>")
	require.NotContains(t, html, "<script>")
	require.NotContains(t, html, "<b>gpu-node-1")

	require.Empty(t, f.Calls(), "the page is not an API call")
	require.Equal(t, http.StatusMethodNotAllowed, call(t, http.MethodPut, strings.TrimSuffix(f.URL(), "/")+ghfake.PagePath, "").status)

	// The handler also works mounted elsewhere, e.g. on the demo's server.
	rec := httptest.NewRecorder()
	f.Page().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/github", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	require.Contains(t, rec.Body.String(), "#2 Idle GPU in ml/trainer-0")
}

func TestPageWithoutRepositories(t *testing.T) {
	f := ghfake.New()
	t.Cleanup(f.Close)
	page := call(t, http.MethodGet, strings.TrimSuffix(f.URL(), "/")+ghfake.PagePath, "")
	require.Equal(t, http.StatusOK, page.status)
	require.Contains(t, string(page.body), "No repositories.")
}

// TestPageCloseAndReopen: the page's buttons close and reopen an issue as a
// person would; a bad form is 400, an unknown issue 404, and neither is an
// API call.
func TestPageCloseAndReopen(t *testing.T) {
	f, _ := newFake(t)
	f.AddRepo("acme/gpu-oncall")
	n := f.AddIssue("acme/gpu-oncall", "KubemedicNodeQuarantined on gpu-node-1", "body")
	page := strings.TrimSuffix(f.URL(), "/") + ghfake.PagePath
	form := "application/x-www-form-urlencoded"
	post := func(body string) int {
		// The default client follows the 303 to the page: 200.
		return call(t, http.MethodPost, page, body, "Content-Type", form).status
	}

	require.Contains(t, string(call(t, http.MethodGet, page, "").body), `<button name="action" value="close">Close issue</button>`)
	require.Equal(t, http.StatusOK, post("repo=acme/gpu-oncall&number=1&action=close"))
	iss, ok := f.Issue("acme/gpu-oncall", n)
	require.True(t, ok)
	require.Equal(t, ghclient.StateClosed, iss.State)
	require.Equal(t, ghclient.ReasonCompleted, iss.StateReason)
	require.Contains(t, string(call(t, http.MethodGet, page, "").body), `value="reopen">Reopen issue</button>`)

	require.Equal(t, http.StatusOK, post("repo=acme/gpu-oncall&number=1&action=reopen"))
	iss, _ = f.Issue("acme/gpu-oncall", n)
	require.Equal(t, ghclient.StateOpen, iss.State)

	require.Equal(t, http.StatusBadRequest, post("repo=acme/gpu-oncall&number=1&action=delete"))
	require.Equal(t, http.StatusBadRequest, post("repo=acme/gpu-oncall&number=x&action=close"))
	require.Equal(t, http.StatusNotFound, post("repo=acme/gpu-oncall&number=7&action=close"))
	require.Empty(t, f.Calls(), "people's clicks are not API calls")
}
