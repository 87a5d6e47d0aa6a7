package localcluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// defaultStopTimeout is how long a process gets after SIGTERM before SIGKILL
// when its ProcessSpec sets none.
const defaultStopTimeout = 5 * time.Second

// ProcessSpec describes a process for StartProcess.
type ProcessSpec struct {
	// Name names the process in errors and progress lines, e.g. "kwok".
	Name string
	// Path of the executable.
	Path string
	// Args are the arguments, without the program name.
	Args []string
	// Env is added to this process' environment; a later entry wins over an
	// earlier one with the same key.
	Env []string
	// Dir is the working directory; empty is this process' own.
	Dir string
	// LogPath receives stdout and stderr; the file is created or truncated.
	// Required: a process whose output is lost cannot explain its exit.
	LogPath string
	// StopTimeout is how long Stop waits after SIGTERM before SIGKILL.
	// Default 5 s.
	StopTimeout time.Duration
}

// Process is a child process supervised by StartProcess: it runs in its own
// process group with a parent-death signal, so that it and its children die
// with this program even when this program is killed, and Stop kills the
// whole group. Methods may be called from several goroutines.
type Process struct {
	name        string
	cmd         *exec.Cmd
	logPath     string
	stopTimeout time.Duration
	done        chan struct{} // closed once the process was reaped
	waitErr     error         // written before done is closed

	stopOnce sync.Once
	stopErr  error // written inside stopOnce
}

// StartProcess starts spec and returns once it has started. The process is
// stopped (SIGTERM to its group, SIGKILL after spec.StopTimeout) when ctx
// ends or Stop is called, whichever comes first; a process meant to outlive
// a request gets a context that lives as long as it should. Done and
// Exited report an exit, early or not.
func StartProcess(ctx context.Context, spec ProcessSpec) (*Process, error) {
	if spec.Name == "" {
		spec.Name = filepath.Base(spec.Path)
	}
	if spec.LogPath == "" {
		return nil, fmt.Errorf("start %s: no log path", spec.Name)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("start %s: %w", spec.Name, err)
	}
	logFile, err := os.Create(spec.LogPath)
	if err != nil {
		return nil, fmt.Errorf("start %s: create log: %w", spec.Name, err)
	}
	cmd := exec.Command(spec.Path, spec.Args...)
	cmd.Env = append(os.Environ(), spec.Env...)
	cmd.Dir = spec.Dir
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", spec.Name, err)
	}
	p := &Process{
		name:        spec.Name,
		cmd:         cmd,
		logPath:     spec.LogPath,
		stopTimeout: spec.StopTimeout,
		done:        make(chan struct{}),
	}
	if p.stopTimeout <= 0 {
		p.stopTimeout = defaultStopTimeout
	}
	go func() {
		p.waitErr = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	if ctx.Done() != nil {
		go func() {
			select {
			case <-ctx.Done():
				_ = p.Stop()
			case <-p.done:
			}
		}()
	}
	return p, nil
}

// Name returns the name the process was started with.
func (p *Process) Name() string { return p.name }

// PID returns the process id, which is also its process group id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// LogPath returns the file that holds the process' stdout and stderr.
func (p *Process) LogPath() string { return p.logPath }

// Done is closed once the process has exited and been reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited returns nil while the process runs, and once it has exited an error
// that says how, with the end of its log. A process that was stopped reads as
// exited too: Exited is for noticing a process that died on its own.
func (p *Process) Exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited: %v%s", p.name, p.exitStatus(), p.LogTail(20))
	default:
		return nil
	}
}

// exitStatus returns how the process ended, once done is closed.
func (p *Process) exitStatus() string {
	if p.waitErr == nil {
		return "exit status 0"
	}
	return p.waitErr.Error()
}

// Stop sends SIGTERM to the process group, SIGKILL after the stop timeout,
// and waits until the process is reaped; then it kills what is left of the
// group, so that no child outlives its leader. It is safe to call more than
// once, from several goroutines, and after the process exited; calls after
// the first return the first one's result.
func (p *Process) Stop() error {
	p.stopOnce.Do(func() { p.stopErr = p.stop() })
	return p.stopErr
}

func (p *Process) stop() error {
	pgid := p.PID()
	select {
	case <-p.done:
	default:
		if err := syscall.Kill(-pgid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("stop %s: signal process group %d: %w", p.name, pgid, err)
		}
		t := time.NewTimer(p.stopTimeout)
		defer t.Stop()
		select {
		case <-p.done:
		case <-t.C:
			if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
				return fmt.Errorf("stop %s: kill process group %d: %w", p.name, pgid, err)
			}
			<-p.done
		}
	}
	// Children that ignored SIGTERM, or outlived a leader that exited on
	// its own, must not stay.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	return nil
}

// WaitHTTPOK polls url until it answers 200 and returns nil then. It returns
// an error, with the end of the log, when the process exits first, ctx ends
// or timeout passes.
func (p *Process) WaitHTTPOK(ctx context.Context, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	if strings.HasPrefix(url, "https://") {
		// kube-scheduler and kube-controller-manager serve their health on
		// loopback with a certificate they sign themselves at start: there
		// is no CA to check it against, and the answer is a readiness
		// signal, not data.
		client.Transport = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // see above
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
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
			return fmt.Errorf("%s exited before serving %s: %v%s", p.name, url, p.exitStatus(), p.LogTail(20))
		case <-ctx.Done():
			return fmt.Errorf("%s: no answer from %s: %w%s", p.name, url, ctx.Err(), p.LogTail(20))
		case <-tick.C:
		}
	}
}

// LogTail returns the last n lines of the process' log, formatted to be
// appended to an error ("" when the log is empty or unreadable).
func (p *Process) LogTail(n int) string {
	return formatLogTail(p.logPath, n)
}

// formatLogTail returns the last n lines of the file at path under a
// heading naming it, or "" when there are none.
func formatLogTail(path string, n int) string {
	tail := FileTail(path, n)
	if tail == "" {
		return ""
	}
	return "\n--- last lines of " + filepath.Base(path) + " ---\n" + tail
}

// FileTail returns the last n lines of a file, or "" when it cannot be read.
func FileTail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago, for a
// process to listen on. Between the pick and that process' listen another
// may take it, so the pick avoids what is likely to:
//   - a port this process handed out before (the demo picks its components'
//     ports before it starts Alertmanager and Prometheus, which pick theirs);
//   - the kernel's ephemeral range, from which every ":0" listener and every
//     outgoing connection takes its port (net.ipv4.ip_local_port_range).
//
// Ports come from freePortLow to below the ephemeral range, at random, so
// that two test processes rarely pick the same one; when that span is empty
// the kernel picks, still never twice.
func FreePort() (int, error) {
	freePorts.mu.Lock()
	defer freePorts.mu.Unlock()
	if freePorts.given == nil {
		freePorts.given = map[int]bool{}
	}
	hi := ephemeralLow()
	for range 200 {
		p, err := pickPort(hi)
		if err != nil {
			return 0, err
		}
		if p != 0 && !freePorts.given[p] {
			freePorts.given[p] = true
			return p, nil
		}
	}
	return 0, fmt.Errorf("pick a free port: no free port in 200 tries")
}

// freePortLow is the lowest port FreePort hands out: above the registered
// services most hosts run.
const freePortLow = 20000

var freePorts struct {
	mu    sync.Mutex
	given map[int]bool
}

// pickPort returns one port that can be listened on now: random in
// [freePortLow, hi) when that span holds ports, else the kernel's pick.
func pickPort(hi int) (int, error) {
	if hi-freePortLow >= 1000 {
		p := freePortLow + rand.IntN(hi-freePortLow)
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			return 0, nil // taken: 0 tells the caller to try again
		}
		l.Close()
		return p, nil
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pick a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ephemeralLow is the first port of the kernel's ephemeral range, or 0 when
// it cannot be read (then the kernel picks).
func ephemeralLow() int {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(data))
	if len(f) != 2 {
		return 0
	}
	n, err := strconv.Atoi(f[0])
	if err != nil {
		return 0
	}
	return n
}
