package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// Info is what a running demo tells `kubemedic-demo inject|scenario` in
// other terminals, through the state file next to its kubeconfig.
type Info struct {
	PID             int      `json:"pid"`
	Kubeconfig      string   `json:"kubeconfig"`
	ControlURL      string   `json:"controlURL"`
	GitHubURL       string   `json:"githubURL"`
	GitHubTokenFile string   `json:"githubTokenFile"`
	GitHubRepo      string   `json:"githubRepo"`
	PageURL         string   `json:"pageURL"`
	PrometheusURL   string   `json:"prometheusURL"`
	AlertmanagerURL string   `json:"alertmanagerURL"`
	NPDNodes        []string `json:"npdNodes"`
	SimulatedNodes  []string `json:"simulatedNodes"`
	// DRANodes publish their GPUs through DRA (the exclusion story's).
	DRANodes []string `json:"draNodes,omitempty"`
	Speed    int      `json:"speed"`
	Dir      string   `json:"dir"`
	// SlackButtons: the demo runs the Slack stand-in and the janitor's
	// interactivity endpoint, so that Press can press the buttons of its
	// messages. False with a real Slack workspace.
	SlackButtons bool `json:"slackButtons,omitempty"`
}

// Info describes the world for the state file; kubeconfig is where the
// caller wrote the kubeconfig.
func (w *World) Info(kubeconfig string) Info {
	return Info{PID: os.Getpid(), Kubeconfig: kubeconfig, ControlURL: w.ControlURL,
		GitHubURL: w.githubURL, GitHubTokenFile: w.githubTokenFile, GitHubRepo: w.repo, PageURL: w.PageURL,
		PrometheusURL: w.PrometheusURL, AlertmanagerURL: w.AlertmanagerURL,
		NPDNodes: w.NPDNodes(), SimulatedNodes: w.SimulatedNodes(), DRANodes: append([]string(nil), w.DRANodes...), Speed: w.Speed, Dir: w.opts.Dir,
		SlackButtons: w.Slack != nil && w.interactURL != ""}
}

// WriteInfo writes the state file atomically.
func WriteInfo(path string, info Info) error {
	b, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// ReadInfo reads a state file and checks that its demo still runs.
func ReadInfo(path string) (Info, error) {
	var info Info
	b, err := os.ReadFile(path)
	if err != nil {
		return info, fmt.Errorf("no running demo found (%w); start one with `make demo`", err)
	}
	if err := json.Unmarshal(b, &info); err != nil {
		return info, fmt.Errorf("%s: %w", path, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if !httpOK(ctx, info.ControlURL+"/healthz") {
		return info, fmt.Errorf("the demo of %s (pid %d) does not answer at %s; is it still running?", path, info.PID, info.ControlURL)
	}
	return info, nil
}

// startControl serves POST /inject?fault=F&node=N, POST /idle-notebooks,
// GET /slack?after=N, POST /slack/press?namespace=NS&pod=P&button=B&as=EMAIL
// and GET /healthz on a 127.0.0.1 port.
func (w *World) startControl() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(rw http.ResponseWriter, _ *http.Request) { fmt.Fprintln(rw, "ok") })
	mux.HandleFunc("POST /inject", func(rw http.ResponseWriter, r *http.Request) {
		what, err := w.Inject(r.Context(), r.FormValue("fault"), r.FormValue("node"))
		if httpError(rw, err) {
			return
		}
		w.say("injected %s into node %s: %s", r.FormValue("fault"), r.FormValue("node"), what)
		fmt.Fprintln(rw, what)
	})
	mux.HandleFunc("POST /idle-notebooks", func(rw http.ResponseWriter, r *http.Request) {
		names, err := w.IdleNotebooks(r.Context())
		if err != nil {
			http.Error(rw, err.Error(), http.StatusInternalServerError)
			return
		}
		_ = json.NewEncoder(rw).Encode(names)
	})
	mux.HandleFunc("GET /slack", func(rw http.ResponseWriter, r *http.Request) {
		after, _ := strconv.Atoi(r.FormValue("after"))
		_ = json.NewEncoder(rw).Encode(w.SlackMessages(after))
	})
	mux.HandleFunc("POST /slack/press", func(rw http.ResponseWriter, r *http.Request) {
		p, err := w.Press(r.Context(), PressRequest{Namespace: r.FormValue("namespace"), Pod: r.FormValue("pod"), Button: r.FormValue("button"), As: r.FormValue("as")})
		if httpError(rw, err) {
			return
		}
		_ = json.NewEncoder(rw).Encode(p)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	w.ControlURL = "http://" + ln.Addr().String()
	w.onStop(srv.Close)
	return nil
}

// Client is a running demo seen from another process.
type Client struct{ Info Info }

// Inject asks the demo to inject a fault.
func (c Client) Inject(ctx context.Context, fault, node string) (string, error) {
	return c.post(ctx, "/inject", url.Values{"fault": {fault}, "node": {node}})
}

// IdleNotebooks asks the demo to start two idle notebooks.
func (c Client) IdleNotebooks(ctx context.Context) ([]Notebook, error) {
	body, err := c.post(ctx, "/idle-notebooks", nil)
	if err != nil {
		return nil, err
	}
	var nbs []Notebook
	if err := json.Unmarshal([]byte(body), &nbs); err != nil {
		return nil, fmt.Errorf("the demo's answer to idle-notebooks: %w", err)
	}
	return nbs, nil
}

// Press asks the demo to press a button in its Slack stand-in.
func (c Client) Press(ctx context.Context, req PressRequest) (Pressed, error) {
	q := url.Values{"namespace": {req.Namespace}, "pod": {req.Pod}, "button": {req.Button}, "as": {req.As}}
	body, err := c.doWith(ctx, pressClient, http.MethodPost, "/slack/press", q)
	if err != nil {
		return Pressed{}, err
	}
	var p Pressed
	if err := json.Unmarshal(body, &p); err != nil {
		return Pressed{}, fmt.Errorf("the demo's answer to press: %w", err)
	}
	return p, nil
}

// SlackMessages fetches the Slack messages after seq.
func (c Client) SlackMessages(ctx context.Context, after int) ([]SlackMessage, error) {
	body, err := c.do(ctx, http.MethodGet, "/slack", url.Values{"after": {strconv.Itoa(after)}})
	if err != nil {
		return nil, err
	}
	var out []SlackMessage
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("the demo's Slack log: %w", err)
	}
	return out, nil
}

func (c Client) post(ctx context.Context, path string, q url.Values) (string, error) {
	b, err := c.do(ctx, http.MethodPost, path, q)
	return strings.TrimRight(string(b), "\n"), err
}

// do calls the demo's control server and returns the body of a 200 answer.
func (c Client) do(ctx context.Context, method, path string, q url.Values) ([]byte, error) {
	return c.doWith(ctx, controlClient, method, path, q)
}

func (c Client) doWith(ctx context.Context, hc *http.Client, method, path string, q url.Values) ([]byte, error) {
	u := c.Info.ControlURL + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("the demo (pid %d) at %s: %w", c.Info.PID, c.Info.ControlURL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, u, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(b)))
	}
	return b, nil
}

// controlClient bounds every call to a demo: a state file left by a demo
// that was killed may name a port something else now listens on.
var controlClient = &http.Client{Timeout: 30 * time.Second}

// pressClient waits for a press's two waits (Press) and some.
var pressClient = &http.Client{Timeout: 2*pressWait + 10*time.Second}

// httpError answers err, if any: 400 for a BadRequestError, else 500. It
// reports whether it answered.
func httpError(rw http.ResponseWriter, err error) bool {
	var bad *BadRequestError
	switch {
	case errors.As(err, &bad):
		http.Error(rw, err.Error(), http.StatusBadRequest)
	case err != nil:
		http.Error(rw, err.Error(), http.StatusInternalServerError)
	default:
		return false
	}
	return true
}
