package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path"
	"time"
)

// saveProfile saves the remediator's pprof endpoint urlPath (with its
// query, e.g. /debug/pprof/heap?gc=1) to file.
func (r *remediator) saveProfile(ctx context.Context, urlPath, file string) error {
	if r.pprofAddr == "" {
		return errors.New("save profile: the remediator runs without pprof")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.pprofAddr+urlPath, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("profile %s: %w", urlPath, err)
	}
	defer resp.Body.Close()
	return writeProfile(resp, urlPath, file)
}

func writeProfile(resp *http.Response, urlPath, file string) error {
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("profile %s: %s: %s", urlPath, resp.Status, b)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("profile %s: write %s: %w", urlPath, file, err)
	}
	return f.Close()
}

// profileStream is a CPU profile or a runtime trace that runs until stop.
//
// net/http/pprof's profile and trace endpoints run for a number of
// seconds, and a client that goes away loses what was recorded. Instead
// the request asks for an upper bound, and stop half-closes the
// connection: net/http's server reads EOF, cancels the request's context,
// which ends the handler's wait, and the handler writes the profile to the
// connection, which is still open for reading.
type profileStream struct {
	what, path string
	started    time.Time
	conn       *net.TCPConn
	done       chan error
}

// startProfile starts the pprof endpoint urlPath (/debug/pprof/profile or
// /debug/pprof/trace) for at most seconds, to be saved in file.
func (r *remediator) startProfile(urlPath string, seconds int, file string) (*profileStream, error) {
	if r.pprofAddr == "" {
		return nil, errors.New("start profile: the remediator runs without pprof")
	}
	c, err := net.DialTimeout("tcp", r.pprofAddr, 5*time.Second)
	if err != nil {
		return nil, fmt.Errorf("profile %s: %w", urlPath, err)
	}
	conn := c.(*net.TCPConn)
	target := fmt.Sprintf("%s?seconds=%d", urlPath, seconds)
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", target, r.pprofAddr); err != nil {
		conn.Close()
		return nil, fmt.Errorf("profile %s: %w", urlPath, err)
	}
	what := map[string]string{"profile": "CPU profile", "trace": "runtime trace"}[path.Base(urlPath)]
	s := &profileStream{what: what, path: file, started: time.Now(), conn: conn, done: make(chan error, 1)}
	go func() {
		req, _ := http.NewRequest(http.MethodGet, target, nil)
		resp, err := http.ReadResponse(bufio.NewReader(conn), req)
		if err != nil {
			s.done <- fmt.Errorf("profile %s: %w", urlPath, err)
			return
		}
		defer resp.Body.Close()
		s.done <- writeProfile(resp, urlPath, file)
	}()
	return s, nil
}

// stop ends the profile and waits up to timeout until it is saved.
func (s *profileStream) stop(timeout time.Duration) error {
	if err := s.conn.CloseWrite(); err != nil {
		return fmt.Errorf("stop %s: %w", s.what, err)
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case err := <-s.done:
		return err
	case <-t.C:
		return fmt.Errorf("stop %s: not saved %s after the end was asked", s.what, timeout)
	}
}

// close drops the connection; after stop it does nothing more.
func (s *profileStream) close() { _ = s.conn.Close() }
