package harness

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

const (
	// KwokNodeAnnotation marks the nodes kwok manages; CreateGPUNodes sets it.
	KwokNodeAnnotation = "kwok.x-k8s.io/node"
	// KwokNodeAnnotationValue is the value of KwokNodeAnnotation kwok selects.
	KwokNodeAnnotationValue = "fake"

	// kwokStagesFile is the file in BinDir with kwok's node-fast,
	// node-heartbeat-with-lease and pod-fast Stages.
	kwokStagesFile = "kwok-stages.yaml"
	// kwokHeartbeatStage is the Stage whose delay is the node heartbeat period.
	kwokHeartbeatStage = "node-heartbeat-with-lease"
	// kwokStartTimeout bounds how long kwok may take to serve /healthz.
	kwokStartTimeout = 30 * time.Second
	// kwokStopTimeout is how long kwok gets after SIGTERM before SIGKILL.
	kwokStopTimeout = 5 * time.Second
)

// StartKwok starts kwok against the Env's API server, for an Env created
// without Options.Kwok, and returns once kwok serves its health endpoint. It
// does nothing when kwok already runs. ctx bounds the start only.
func (e *Env) StartKwok(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return errors.New("start kwok: env is stopped")
	}
	if e.kwok != nil {
		return nil
	}
	if err := checkBinaries(e.BinDir, "kwok", kwokStagesFile); err != nil {
		return err
	}
	stages, err := e.kwokStages()
	if err != nil {
		return err
	}
	stagesPath := filepath.Join(e.tmpDir, kwokStagesFile)
	if err := os.WriteFile(stagesPath, stages, 0o644); err != nil {
		return fmt.Errorf("write kwok stages: %w", err)
	}
	port, err := freePort()
	if err != nil {
		return fmt.Errorf("pick a port for kwok: %w", err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	workDir := filepath.Join(e.tmpDir, "kwok-work")
	if err := os.MkdirAll(workDir, 0o755); err != nil {
		return fmt.Errorf("create kwok work dir: %w", err)
	}

	p, err := startProcess(filepath.Join(e.BinDir, "kwok"), filepath.Join(e.tmpDir, "kwok.log"),
		// kwok otherwise also loads ~/.kwok/kwok.yaml, a developer's own config.
		[]string{"KWOK_WORKDIR=" + workDir},
		"--kubeconfig="+e.Kubeconfig,
		"--config="+stagesPath,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector="+KwokNodeAnnotation+"="+KwokNodeAnnotationValue,
		// Each node gets its own pod CIDR from CreateGPUNodes; this one only
		// serves nodes without.
		"--cidr=10.128.0.0/16",
		// Without this flag the kwok binary keeps no node leases at all
		// (only kwokctl passes it); 40 s is the kubelet's default.
		"--node-lease-duration-seconds=40",
		// The server is only used as a readiness signal (/healthz).
		"--server-address="+addr,
	)
	if err != nil {
		return fmt.Errorf("start kwok: %w", err)
	}
	e.logf("harness: starting kwok (pid %d, log %s)", p.cmd.Process.Pid, p.logPath)
	begin := time.Now()
	if err := p.waitHTTPOK(ctx, "http://"+addr+"/healthz", kwokStartTimeout); err != nil {
		return errors.Join(fmt.Errorf("start kwok: %w", err), p.stop())
	}
	e.logf("harness: kwok up in %s", time.Since(begin).Round(time.Millisecond))
	e.kwok = p
	return nil
}

// KwokPID returns the process id of kwok, or 0 when it does not run.
func (e *Env) KwokPID() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.kwok == nil {
		return 0
	}
	return e.kwok.cmd.Process.Pid
}

// kwokErr returns an error with the end of kwok's log when kwok started and
// has exited since, and nil otherwise.
func (e *Env) kwokErr() error {
	e.mu.Lock()
	p := e.kwok
	e.mu.Unlock()
	if p == nil {
		return nil
	}
	select {
	case <-p.done:
		return fmt.Errorf("kwok exited: %v%s", p.waitErr, p.logTail())
	default:
		return nil
	}
}

// kwokStages returns the stages file of BinDir with the heartbeat delay of
// Options.KwokHeartbeat and the extra Options.KwokStages.
func (e *Env) kwokStages() ([]byte, error) {
	path := filepath.Join(e.BinDir, kwokStagesFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read kwok stages: %w", err)
	}
	var out bytes.Buffer
	found := false
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read kwok stages %s: %w", path, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		if e.opts.KwokHeartbeat > 0 {
			var obj map[string]any
			if err := yaml.Unmarshal(doc, &obj); err != nil {
				return nil, fmt.Errorf("parse kwok stages %s: %w", path, err)
			}
			meta, _ := obj["metadata"].(map[string]any)
			spec, _ := obj["spec"].(map[string]any)
			if obj["kind"] == "Stage" && meta["name"] == kwokHeartbeatStage && spec != nil {
				ms := e.opts.KwokHeartbeat.Milliseconds()
				// kwok picks the delay uniformly in [duration, jitter).
				spec["delay"] = map[string]any{
					"durationMilliseconds":       ms,
					"jitterDurationMilliseconds": ms + ms/10 + 1,
				}
				if doc, err = yaml.Marshal(obj); err != nil {
					return nil, fmt.Errorf("write stage %s: %w", kwokHeartbeatStage, err)
				}
				found = true
			}
		}
		out.WriteString("---\n")
		out.Write(doc)
		if !bytes.HasSuffix(doc, []byte("\n")) {
			out.WriteString("\n")
		}
	}
	if e.opts.KwokHeartbeat > 0 && !found {
		return nil, fmt.Errorf("kwok stages %s: no Stage %s to set the heartbeat of", path, kwokHeartbeatStage)
	}
	for _, s := range e.opts.KwokStages {
		out.WriteString("---\n")
		out.WriteString(s)
		out.WriteString("\n")
	}
	return out.Bytes(), nil
}

// process is a child process in its own process group that gets SIGKILL when
// the test binary dies.
type process struct {
	cmd     *exec.Cmd
	logPath string
	logFile *os.File
	done    chan struct{} // closed once Wait returned
	waitErr error         // set before done is closed
}

func startProcess(path, logPath string, extraEnv []string, args ...string) (*process, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("create log: %w", err)
	}
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), extraEnv...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, err
	}
	p := &process{cmd: cmd, logPath: logPath, logFile: logFile, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// waitHTTPOK polls url until it answers 200, the process exits, ctx ends or
// timeout passes.
func (p *process) waitHTTPOK(ctx context.Context, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if resp, err := client.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.done:
			return fmt.Errorf("exited before serving %s: %v%s", url, p.waitErr, p.logTail())
		case <-ctx.Done():
			return fmt.Errorf("no answer from %s: %w%s", url, ctx.Err(), p.logTail())
		case <-tick.C:
		}
	}
}

// stop sends SIGTERM to the process group, SIGKILL after kwokStopTimeout, and
// waits for the process to be reaped.
func (p *process) stop() error {
	pgid := p.cmd.Process.Pid
	select {
	case <-p.done:
		return nil
	default:
	}
	if err := syscall.Kill(-pgid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal process group %d: %w", pgid, err)
	}
	select {
	case <-p.done:
	case <-time.After(kwokStopTimeout):
		if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("kill process group %d: %w", pgid, err)
		}
		<-p.done
	}
	// Children that ignored SIGTERM must not outlive their leader.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	return nil
}

func (p *process) logTail() string {
	if tail := logTail(p.logPath, 20); tail != "" {
		return "\n--- last lines of " + filepath.Base(p.logPath) + " ---\n" + tail
	}
	return ""
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
