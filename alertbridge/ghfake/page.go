package ghfake

import (
	"bytes"
	"cmp"
	"html/template"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kubemedic/kubemedic/alertbridge/ghclient"
)

// PagePath is where the Fake's own server serves Page. GitHub has no such
// path, so it shadows nothing the bridge calls, and a request for it is
// not an API call: Calls does not record it and it uses no rate limit.
const PagePath = "/_page"

// pageRefreshSeconds is how often the page reloads itself.
const pageRefreshSeconds = 3

// Page returns a web page for people: every repository's issues, newest
// first, with their number, title, state (and state reason), labels, times,
// body and comments. It reloads itself every few seconds and needs no
// JavaScript. Everything is HTML-escaped. Each issue has a button that
// closes (as completed) or reopens it, as a person on GitHub would: a POST
// of repo, number and action=close|reopen, answered with a redirect to the
// page.
func (f *Fake) Page() http.Handler {
	return http.HandlerFunc(f.servePage)
}

// pageRepo is one repository as the page shows it.
type pageRepo struct {
	Name   string
	Issues []Issue // newest first
}

// pageData is what the template renders.
type pageData struct {
	Refresh int
	Now     time.Time
	Repos   []pageRepo
}

func (f *Fake) pageData() pageData {
	f.mu.Lock()
	defer f.mu.Unlock()
	d := pageData{Refresh: pageRefreshSeconds, Now: f.clock.Now()}
	for name, r := range f.repos {
		pr := pageRepo{Name: name, Issues: make([]Issue, 0, len(r.issues))}
		for _, iss := range slices.Backward(r.issues) {
			pr.Issues = append(pr.Issues, iss.snapshot())
		}
		d.Repos = append(d.Repos, pr)
	}
	slices.SortFunc(d.Repos, func(a, b pageRepo) int { return cmp.Compare(a.Name, b.Name) })
	return d
}

func (f *Fake) servePage(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		f.servePageAction(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD, POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	var b bytes.Buffer
	if err := pageTemplate.Execute(&b, f.pageData()); err != nil {
		http.Error(w, "render page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(b.Bytes())
}

// servePageAction closes or reopens an issue as a person would.
func (f *Fake) servePageAction(w http.ResponseWriter, r *http.Request) {
	repo, action := r.PostFormValue("repo"), r.PostFormValue("action")
	number, err := strconv.Atoi(r.PostFormValue("number"))
	if err != nil || (action != "close" && action != "reopen") {
		http.Error(w, "want repo, number and action=close|reopen", http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	found := f.issue(repo, number) != nil
	f.mu.Unlock()
	if !found {
		http.Error(w, "no issue "+repo+"#"+strconv.Itoa(number), http.StatusNotFound)
		return
	}
	if action == "close" {
		f.CloseIssue(repo, number, ghclient.ReasonCompleted)
	} else {
		f.ReopenIssue(repo, number)
	}
	http.Redirect(w, r, r.URL.Path, http.StatusSeeOther)
}

var pageTemplate = template.Must(template.New("page").Funcs(template.FuncMap{
	"when": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"closed": func(s ghclient.IssueState) bool { return s == ghclient.StateClosed },
	// "not_planned" reads "not planned", as on GitHub.
	"reason": func(r ghclient.StateReason) string { return strings.ReplaceAll(string(r), "_", " ") },
}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="refresh" content="{{.Refresh}}">
<title>GitHub stand-in: issues</title>
<style>
body { font-family: sans-serif; margin: 1.5em; max-width: 60em; }
.issue { border: 1px solid #ccc; border-radius: 6px; padding: 0.5em 1em; margin: 1em 0; }
.open { border-left: 6px solid #1a7f37; }
.closed { border-left: 6px solid #8250df; }
.state { font-weight: bold; }
.label { background: #eee; border-radius: 1em; padding: 0 0.6em; margin-right: 0.3em; font-size: 90%; }
.meta { color: #555; font-size: 90%; }
.comment { border-top: 1px dashed #ccc; margin-top: 0.5em; }
pre { white-space: pre-wrap; word-wrap: break-word; background: #f6f8fa; padding: 0.5em; }
</style>
</head>
<body>
<h1>GitHub stand-in</h1>
<p class="meta">Every repository's issues, newest first, as of {{when .Now}}. This page reloads every {{.Refresh}} seconds.</p>
{{- range .Repos}}
{{- $repo := .Name}}
<h2>{{.Name}}</h2>
{{- if not .Issues}}
<p>No issues.</p>
{{- end}}
{{- range .Issues}}
<div class="issue {{if closed .State}}closed{{else}}open{{end}}">
<h3>#{{.Number}} {{.Title}}</h3>
<p class="meta"><span class="state">{{if closed .State}}closed{{if .StateReason}} as {{reason .StateReason}}{{end}}{{else}}open{{end}}</span>
{{- if .PullRequest}} · pull request{{end}}
 · opened {{when .CreatedAt}}{{if .User}} by {{.User}}{{end}}
{{- if closed .State}} · closed {{when .ClosedAt}}{{end}}
{{- if .Labels}} · {{range .Labels}}<span class="label">{{.}}</span>{{end}}{{end}}</p>
<form method="post"><input type="hidden" name="repo" value="{{$repo}}"><input type="hidden" name="number" value="{{.Number}}">
{{- if closed .State}}<button name="action" value="reopen">Reopen issue</button>{{else}}<button name="action" value="close">Close issue</button>{{end}}</form>
{{- if .Body}}
<pre>{{.Body}}</pre>
{{- end}}
{{- range .Comments}}
<div class="comment">
<p class="meta">{{.User}} commented {{when .CreatedAt}}</p>
<pre>{{.Body}}</pre>
</div>
{{- end}}
</div>
{{- end}}
{{- else}}
<p>No repositories.</p>
{{- end}}
</body>
</html>
`))
