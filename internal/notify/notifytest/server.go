// Package notifytest is a stand-in for Slack's Web API: tests of code that
// posts through notify.Slack (the janitor, the remediator) use it, and so
// does `kubemedic-demo` as its local Slack, printing each message as it
// arrives (OnPost). It keeps everything in memory and talks to nothing else.
//
// It runs on slacktest's server and replaces the methods notify calls:
// users.lookupByEmail, conversations.open and chat.postMessage. It is never
// more lenient than Slack: requests must carry the token (an Authorization
// Bearer header or, as Slack also accepts, a token field in a POST body;
// never in the URL), the required parameters per Slack's documentation,
// and a known user or channel; failures are Slack's own answers (HTTP 200
// with {"ok":false,"error":"users_not_found"}, HTTP 429 with Retry-After,
// HTTP 5xx with an HTML page). Any other method answers unknown_method, or
// slacktest's canned answer for the few methods slacktest implements itself.
//
// It also plays Slack's side of interactivity: Press makes the signed
// block_actions request Slack sends when a person presses a button of a
// posted message (Interaction.Signed, Send; sign with another secret or an
// old time to forge one or make it stale, Send twice to replay it), and it
// serves the response_url in it (Responses). chat.postMessage checks the
// interactive blocks against Slack's documented limits (button text 75,
// value 2000, action_id 255 characters, 25 elements per actions block,
// 50 blocks) and answers invalid_blocks beyond them.
//
// It is stricter than Slack in a few places, each documented where it
// applies: conversations.open opens only one-to-one DMs, chat.postMessage
// accepts form bodies only (not JSON), and needs a channel ID, a channel
// name or a DM channel ID (not a user ID), and the app is a member of a
// channel only when AddChannel says so (as without chat:write.public).
//
// NewServer starts one for a program, which stops it with Close; New starts
// one for a test and stops it when the test ends.
package notifytest

import (
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/slack-go/slack/slacktest"
)

// Token is the bot token the stand-in accepts. Pass it to notify.NewSlack.
const Token = "xoxb-0000000000-kubemedic-notifytest"

// Methods that the stand-in implements.
const (
	MethodLookupByEmail = "users.lookupByEmail"
	MethodOpen          = "conversations.open"
	MethodPostMessage   = "chat.postMessage"
)

// Slack's limits that chat.postMessage enforces.
const (
	maxTextChars = 40000
	maxBlocks    = 50
)

// Posted is one message that chat.postMessage accepted.
type Posted struct {
	// Channel is the ID of the conversation it landed in (D… for a DM,
	// even when posted by channel name).
	Channel string
	// User is the user of the DM channel, "" for a channel.
	User string
	// ThreadTS is the parent's ts for a reply, "" for a top-level message.
	ThreadTS string
	// Text is the fallback text as sent.
	Text string
	// Blocks is the Block Kit JSON as sent, nil when there were none.
	Blocks json.RawMessage
	// TS is the timestamp Slack gave the message.
	TS string
	// Form is every parameter sent, without the token.
	Form url.Values
}

// Failure is one answer that FailNext puts before the real ones.
type Failure struct {
	// Status is the HTTP status; 0 means 200. A 429 gets Slack's
	// {"ok":false,"error":"ratelimited"} body, a 5xx an HTML page.
	Status int
	// RetryAfter, in seconds, is sent as the Retry-After header when
	// positive.
	RetryAfter int
	// Error is the Slack error code of an HTTP 200 {"ok":false} answer.
	Error string
	// Disconnect closes the connection without an answer, as a network
	// failure would.
	Disconnect bool
	// LoseAnswer carries the request out (chat.postMessage posts the
	// message), then closes the connection without the answer, as when
	// the answer is lost on its way back: the caller cannot tell that it
	// was done. The other fields are ignored.
	LoseAnswer bool
}

// LostAnswer is a request carried out whose answer is lost.
func LostAnswer() Failure { return Failure{LoseAnswer: true} }

// RateLimited is a 429 with Retry-After: seconds.
func RateLimited(seconds int) Failure {
	return Failure{Status: http.StatusTooManyRequests, RetryAfter: seconds}
}

// ServerError is an HTTP 500 with an HTML body.
func ServerError() Failure { return Failure{Status: http.StatusInternalServerError} }

// SlackError is Slack's HTTP 200 {"ok":false,"error":code}.
func SlackError(code string) Failure { return Failure{Error: code} }

type channel struct {
	id, name string
	member   bool
	archived bool
	dmUser   string          // for DM channels
	roots    map[string]bool // ts of top-level messages
}

// Server is the stand-in. Its methods are safe for concurrent use; mu
// guards every field below it.
type Server struct {
	ts *slacktest.Server

	mu       sync.Mutex
	users    map[string]string   // user ID → email
	disabled map[string]bool     // deactivated user IDs
	byEmail  map[string]string   // lower-case email → user ID
	channels map[string]*channel // channel ID → channel (DMs included)
	names    map[string]string   // channel name → ID
	dms      map[string]string   // user ID → DM channel ID
	messages []Posted
	failures map[string][]Failure // method → answers to give first
	calls    map[string]int       // method → requests, failures included
	seq      int                  // for ts and DM IDs
	changed  chan struct{}        // closed and replaced when a message is posted
	onPost   func(Posted)         // see OnPost; nil when unset
	handed   int                  // messages[:handed] were handed to onPost (or passed while it was nil)
	// responseURLs are the response_urls Press handed out; responses
	// what was posted to them.
	responseURLs map[string]*responseURL
	responses    []Response

	// hookMu makes the OnPost calls one at a time: deliver holds it while
	// it hands messages over, and takes mu only briefly, never around fn.
	// Nothing takes hookMu while holding mu.
	hookMu sync.Mutex
}

// New starts a stand-in (NewServer) that stops when t ends.
func New(t testing.TB) *Server {
	t.Helper()
	s := NewServer()
	t.Cleanup(s.Close)
	return s
}

// NewServer starts a stand-in on a free 127.0.0.1 port, with no users and
// no channels. The caller stops it with Close.
func NewServer() *Server {
	s := &Server{
		users:    map[string]string{},
		disabled: map[string]bool{},
		byEmail:  map[string]string{},
		channels: map[string]*channel{},
		names:    map[string]string{},
		dms:      map[string]string{},
		failures: map[string][]Failure{},
		calls:    map[string]int{},
		changed:  make(chan struct{}),

		responseURLs: map[string]*responseURL{},
	}
	// slacktest keeps the first handler registered for a path, so ours go
	// in before its defaults.
	s.ts = slacktest.NewTestServer(func(c slacktest.Customize) {
		c.Handle("/"+MethodLookupByEmail, s.method(MethodLookupByEmail, s.lookupByEmail))
		c.Handle("/"+MethodOpen, s.method(MethodOpen, s.open))
		c.Handle("/"+MethodPostMessage, s.method(MethodPostMessage, s.postMessage))
		c.Handle("/response_url/", s.respond)
		c.Handle("/", s.unknownMethod)
	})
	s.ts.Start()
	return s
}

// Close stops the server: it closes the listener and waits for the
// requests in flight. Closing again does nothing.
func (s *Server) Close() { s.ts.Stop() }

// OnPost makes fn be called with each message chat.postMessage accepts
// from now on, after it was recorded (Messages has it) and before the
// poster gets the answer. Calls are one at a time, in the order the
// messages were accepted, and hold no lock of the
// Server's state, so fn may call its methods; fn must not post to the
// Server itself, and a slow fn delays the answers to posts. nil removes the
// hook. It is for a program that shows messages as they arrive; tests use
// WaitMessages.
func (s *Server) OnPost(fn func(Posted)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onPost = fn
	s.handed = len(s.messages) // only messages from now on
}

// URL is the API base URL to pass as notify.SlackOptions.APIURL.
func (s *Server) URL() string { return s.ts.GetAPIURL() }

// AddUser adds a workspace member that users.lookupByEmail finds by email
// (case-insensitively) and conversations.open can open a DM with.
func (s *Server) AddUser(id, email string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.users[id] = email
	if email != "" {
		s.byEmail[strings.ToLower(email)] = id
	}
}

// DeactivateUser deactivates a user: users.lookupByEmail still finds the
// account, marked "deleted": true, and conversations.open answers
// user_disabled.
func (s *Server) DeactivateUser(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.disabled[id] = true
}

// AddChannel adds a channel that the app is a member of, so that
// chat.postMessage accepts its ID or its name (with or without '#').
func (s *Server) AddChannel(id, name string) {
	s.addChannel(id, name, true)
}

// AddChannelWithoutApp adds a channel the app is not a member of:
// chat.postMessage answers not_in_channel, as Slack does for an app
// without the chat:write.public scope.
func (s *Server) AddChannelWithoutApp(id, name string) {
	s.addChannel(id, name, false)
}

func (s *Server) addChannel(id, name string, member bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.channels[id] = &channel{id: id, name: name, member: member, roots: map[string]bool{}}
	if name != "" {
		s.names[name] = id
	}
}

// ArchiveChannel archives a channel: chat.postMessage answers is_archived.
func (s *Server) ArchiveChannel(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.channels[id]; ok {
		c.archived = true
	}
}

// DMChannel is the ID of the DM channel opened with userID, "" if none.
func (s *Server) DMChannel(userID string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dms[userID]
}

// FailNext makes the next len(responses) requests to method (e.g.
// MethodPostMessage) get these answers, in order, before the real ones.
// Requests without a valid token are refused before failures are used.
func (s *Server) FailNext(method string, responses ...Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures[method] = append(s.failures[method], responses...)
}

// Calls is how many requests reached method, failed ones included.
func (s *Server) Calls(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[method]
}

// Messages returns a copy of the messages posted so far, oldest first.
func (s *Server) Messages() []Posted {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Posted(nil), s.messages...)
}

// WaitMessages waits until at least n messages were posted and returns
// them all; it fails t if that takes longer than timeout.
func (s *Server) WaitMessages(t testing.TB, n int, timeout time.Duration) []Posted {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		got, changed := len(s.messages), s.changed
		s.mu.Unlock()
		if got >= n {
			return s.Messages()
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("waited %s for %d Slack messages, got %d: %+v", timeout, n, got, s.Messages())
			return nil
		}
	}
}

// request is a parsed, authenticated API call.
type request struct {
	form url.Values // body (or query for GET) parameters, without the token
}

// method wraps h with what every Slack method does: count, parse,
// authenticate, then give any injected failure.
func (s *Server) method(name string, h func(http.ResponseWriter, request)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.calls[name]++
		s.mu.Unlock()

		if r.Method != http.MethodPost && r.Method != http.MethodGet {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if r.Method == http.MethodPost {
			ct, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
			switch {
			case r.Header.Get("Content-Type") == "":
				writeError(w, "missing_post_type")
				return
			case err != nil || (ct != "application/x-www-form-urlencoded" && ct != "multipart/form-data"):
				// Slack accepts JSON for some methods; the stand-in does not.
				writeError(w, "invalid_post_type")
				return
			}
		}
		if err := r.ParseMultipartForm(1 << 20); err != nil && err != http.ErrNotMultipart {
			writeError(w, "invalid_form_data")
			return
		}
		// Slack reads parameters from the body of a POST and the query of
		// a GET, and a token from the header or a POST body only.
		form := r.PostForm
		if r.Method == http.MethodGet {
			form = r.URL.Query()
		}
		token := form.Get("token")
		if r.Method == http.MethodGet {
			token = ""
		}
		if auth := r.Header.Get("Authorization"); auth != "" {
			bearer, ok := strings.CutPrefix(auth, "Bearer ")
			if !ok {
				writeError(w, "invalid_auth")
				return
			}
			token = bearer
		}
		switch {
		case token == "":
			writeError(w, "not_authed")
			return
		case token != Token:
			writeError(w, "invalid_auth")
			return
		}
		clean := url.Values{}
		for k, v := range form {
			if k != "token" {
				clean[k] = v
			}
		}

		if f, ok := s.nextFailure(name); ok {
			if f.LoseAnswer {
				h(&lostAnswer{header: http.Header{}}, request{form: clean})
				writeFailure(w, Failure{Disconnect: true})
				return
			}
			writeFailure(w, f)
			return
		}
		h(w, request{form: clean})
	}
}

// lostAnswer is a ResponseWriter that drops the answer.
type lostAnswer struct{ header http.Header }

func (l *lostAnswer) Header() http.Header         { return l.header }
func (l *lostAnswer) Write(b []byte) (int, error) { return len(b), nil }
func (l *lostAnswer) WriteHeader(int)             {}

func (s *Server) nextFailure(method string) (Failure, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.failures[method]
	if len(q) == 0 {
		return Failure{}, false
	}
	s.failures[method] = q[1:]
	return q[0], true
}

func writeFailure(w http.ResponseWriter, f Failure) {
	if f.Disconnect {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return
			}
		}
		http.Error(w, "cannot disconnect", http.StatusInternalServerError)
		return
	}
	if f.RetryAfter > 0 {
		w.Header().Set("Retry-After", fmt.Sprint(f.RetryAfter))
	}
	switch {
	case f.Status == http.StatusTooManyRequests:
		code := f.Error
		if code == "" {
			code = "ratelimited"
		}
		writeJSON(w, f.Status, map[string]any{"ok": false, "error": code})
	case f.Status >= 300:
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(f.Status)
		_, _ = fmt.Fprintf(w, "<html><body>%d %s</body></html>", f.Status, http.StatusText(f.Status))
	default:
		status := f.Status
		if status == 0 {
			status = http.StatusOK
		}
		writeJSON(w, status, map[string]any{"ok": false, "error": f.Error})
	}
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

func writeError(w http.ResponseWriter, code string, messages ...string) {
	body := map[string]any{"ok": false, "error": code}
	if len(messages) > 0 {
		body["response_metadata"] = map[string]any{"messages": messages}
	}
	writeJSON(w, http.StatusOK, body)
}

func (s *Server) unknownMethod(w http.ResponseWriter, r *http.Request) {
	method := strings.TrimPrefix(r.URL.Path, "/")
	s.mu.Lock()
	s.calls[method]++
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"ok": false, "error": "unknown_method", "req_method": method})
}

// lookupByEmail is users.lookupByEmail: https://docs.slack.dev/reference/methods/users.lookupByEmail
func (s *Server) lookupByEmail(w http.ResponseWriter, r request) {
	email := r.form.Get("email")
	if email == "" {
		writeError(w, "invalid_arguments", "[ERROR] missing required field: email")
		return
	}
	s.mu.Lock()
	id, ok := s.byEmail[strings.ToLower(email)]
	stored, deleted := s.users[id], s.disabled[id]
	s.mu.Unlock()
	if !ok {
		writeError(w, "users_not_found")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"ok": true,
		"user": map[string]any{
			"id":      id,
			"team_id": "T0KUBEMED",
			"name":    strings.Split(stored, "@")[0],
			"deleted": deleted,
			"is_bot":  false,
			"profile": map[string]any{"email": stored},
		},
	})
}

// open is conversations.open: https://docs.slack.dev/reference/methods/conversations.open
// The stand-in opens one-to-one DMs only.
func (s *Server) open(w http.ResponseWriter, r request) {
	users, channelID := r.form.Get("users"), r.form.Get("channel")
	s.mu.Lock()
	defer s.mu.Unlock()
	if users == "" {
		if channelID == "" {
			writeError(w, "users_list_not_supplied")
			return
		}
		c, ok := s.channels[channelID]
		if !ok || c.dmUser == "" {
			writeError(w, "channel_not_found")
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"ok": true, "no_op": true, "already_open": true, "channel": map[string]any{"id": c.id}})
		return
	}
	list := strings.Split(users, ",")
	if len(list) != 1 {
		writeError(w, "invalid_arguments", "[ERROR] notifytest: only one-to-one DMs are implemented")
		return
	}
	user := strings.TrimSpace(list[0])
	if _, ok := s.users[user]; !ok {
		writeError(w, "user_not_found")
		return
	}
	if s.disabled[user] {
		writeError(w, "user_disabled")
		return
	}
	id, already := s.dms[user]
	if !already {
		s.seq++
		id = fmt.Sprintf("D%08d", s.seq)
		s.dms[user] = id
		s.channels[id] = &channel{id: id, member: true, dmUser: user, roots: map[string]bool{}}
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "no_op": already, "already_open": already, "channel": map[string]any{"id": id}})
}

// postMessage is chat.postMessage: https://docs.slack.dev/reference/methods/chat.postMessage
func (s *Server) postMessage(w http.ResponseWriter, r request) {
	f := r.form
	text, blocks, attachments := f.Get("text"), f.Get("blocks"), f.Get("attachments")

	var blocksJSON json.RawMessage
	if blocks != "" {
		var parsed []map[string]any
		if err := json.Unmarshal([]byte(blocks), &parsed); err != nil {
			writeError(w, "invalid_blocks_format")
			return
		}
		if len(parsed) > maxBlocks {
			writeError(w, "invalid_blocks", fmt.Sprintf("[ERROR] no more than %d items allowed [json-pointer:/blocks]", maxBlocks))
			return
		}
		for i, b := range parsed {
			if typ, _ := b["type"].(string); typ == "" {
				writeError(w, "invalid_blocks", fmt.Sprintf("[ERROR] missing required field: type [json-pointer:/blocks/%d]", i))
				return
			}
		}
		if msg := checkBlocks(parsed); msg != "" {
			writeError(w, "invalid_blocks", msg)
			return
		}
		blocksJSON = json.RawMessage(blocks)
	}

	posted, code, ok := s.accept(f, text, blocks, attachments, blocksJSON)
	if !ok {
		writeError(w, code)
		return
	}
	msg := map[string]any{"type": "message", "text": text, "ts": posted.TS, "bot_id": "B0KUBEMED"}
	if posted.ThreadTS != "" {
		msg["thread_ts"] = posted.ThreadTS
	}
	if blocksJSON != nil {
		msg["blocks"] = blocksJSON
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "channel": posted.Channel, "ts": posted.TS, "message": msg})
	s.deliver()
}

// deliver hands every accepted message that was not handed over yet to
// onPost, oldest first. Whichever post gets hookMu first delivers the
// messages of posts accepted meanwhile too, so the order holds.
func (s *Server) deliver() {
	s.hookMu.Lock()
	defer s.hookMu.Unlock()
	for {
		s.mu.Lock()
		if s.handed >= len(s.messages) {
			s.mu.Unlock()
			return
		}
		p, fn := s.messages[s.handed], s.onPost
		s.handed++
		s.mu.Unlock()
		if fn != nil {
			fn(p)
		}
	}
}

// accept checks a chat.postMessage whose blocks are valid against the
// channels and records it. It returns the message and ok, or the Slack
// error code.
func (s *Server) accept(f url.Values, text, blocks, attachments string, blocksJSON json.RawMessage) (Posted, string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.resolveChannel(f.Get("channel"))
	switch {
	case !ok:
		return Posted{}, "channel_not_found", false
	case c.archived:
		return Posted{}, "is_archived", false
	case !c.member:
		return Posted{}, "not_in_channel", false
	case text == "" && blocks == "" && attachments == "":
		return Posted{}, "no_text", false
	case utf8.RuneCountInString(text) > maxTextChars:
		return Posted{}, "msg_too_long", false
	}
	threadTS := f.Get("thread_ts")
	if threadTS != "" && !c.roots[threadTS] {
		// Slack refuses a thread_ts that is not the ts of a top-level
		// message in this channel (e.g. a reply's ts).
		return Posted{}, "invalid_thread_ts", false
	}

	s.seq++
	ts := fmt.Sprintf("%d.%06d", 1700000000+s.seq, s.seq)
	if threadTS == "" {
		c.roots[ts] = true
	}
	p := Posted{
		Channel:  c.id,
		User:     c.dmUser,
		ThreadTS: threadTS,
		Text:     text,
		Blocks:   blocksJSON,
		TS:       ts,
		Form:     f,
	}
	s.messages = append(s.messages, p)
	close(s.changed)
	s.changed = make(chan struct{})
	return p, "", true
}

// resolveChannel finds a channel by ID or name (with or without '#').
// Callers hold mu.
func (s *Server) resolveChannel(v string) (*channel, bool) {
	if v == "" {
		return nil, false
	}
	if c, ok := s.channels[v]; ok {
		return c, true
	}
	if id, ok := s.names[strings.TrimPrefix(v, "#")]; ok {
		return s.channels[id], true
	}
	return nil, false
}
