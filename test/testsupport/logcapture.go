package testsupport

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/go-logr/logr"
)

// LogEntry is one line a LogCapture received.
type LogEntry struct {
	// Error: logged with Error, not Info.
	Error bool
	// Level is the V level of an Info line.
	Level int
	// Name is the logger's name, its WithName parts joined by "/".
	Name string
	Msg  string
	Err  error
	// Values are the key/value pairs, those given to WithValues first.
	Values []any
}

// String is the entry as one line.
func (e LogEntry) String() string {
	level := fmt.Sprintf("V(%d)", e.Level)
	if e.Error {
		level = "ERROR"
	}
	s := fmt.Sprintf("%s %s: %s", level, e.Name, e.Msg)
	if e.Err != nil {
		s += fmt.Sprintf(" err=%q", e.Err.Error())
	}
	for i := 0; i+1 < len(e.Values); i += 2 {
		s += fmt.Sprintf(" %v=%v", e.Values[i], e.Values[i+1])
	}
	return s
}

// LogCapture keeps every line logged through its Logger, at every
// verbosity, so that a test can assert on what a component logs (e.g. no
// error-level line). Safe for concurrent use.
type LogCapture struct {
	mu      sync.Mutex
	entries []LogEntry
}

// Logger logs into c.
func (c *LogCapture) Logger() logr.Logger { return logr.New(&captureSink{c: c}) }

// Entries are the lines logged so far.
func (c *LogCapture) Entries() []LogEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.entries)
}

// Errors are the error-level lines logged so far, one string each.
func (c *LogCapture) Errors() []string {
	var out []string
	for _, e := range c.Entries() {
		if e.Error {
			out = append(out, e.String())
		}
	}
	return out
}

// Matching are the lines logged so far whose message contains msg.
func (c *LogCapture) Matching(msg string) []LogEntry {
	var out []LogEntry
	for _, e := range c.Entries() {
		if strings.Contains(e.Msg, msg) {
			out = append(out, e)
		}
	}
	return out
}

func (c *LogCapture) add(e LogEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries = append(c.entries, e)
}

type captureSink struct {
	c      *LogCapture
	name   string
	values []any
}

var _ logr.LogSink = &captureSink{}

func (s *captureSink) Init(logr.RuntimeInfo) {}

func (s *captureSink) Enabled(int) bool { return true }

func (s *captureSink) Info(level int, msg string, kv ...any) {
	s.c.add(LogEntry{Level: level, Name: s.name, Msg: msg, Values: append(slices.Clip(s.values), kv...)})
}

func (s *captureSink) Error(err error, msg string, kv ...any) {
	s.c.add(LogEntry{Error: true, Name: s.name, Msg: msg, Err: err, Values: append(slices.Clip(s.values), kv...)})
}

func (s *captureSink) WithValues(kv ...any) logr.LogSink {
	return &captureSink{c: s.c, name: s.name, values: append(slices.Clip(s.values), kv...)}
}

func (s *captureSink) WithName(name string) logr.LogSink {
	if s.name != "" {
		name = s.name + "/" + name
	}
	return &captureSink{c: s.c, name: name, values: s.values}
}
