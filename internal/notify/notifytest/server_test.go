package notifytest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// call posts form to method the way slack-go does (token in the body)
// unless header is set, and returns the HTTP status, headers and JSON body.
func call(t *testing.T, s *Server, method string, form url.Values, header http.Header) (int, http.Header, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.URL()+method, strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var body map[string]any
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		require.NoError(t, json.Unmarshal(raw, &body), "body %s", raw)
	}
	return resp.StatusCode, resp.Header, body
}

func withToken(kv ...string) url.Values {
	v := url.Values{"token": {Token}}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return v
}

func TestAuthentication(t *testing.T) {
	s := New(t)
	s.AddChannel("C0000GENERAL", "general")
	post := url.Values{"channel": {"C0000GENERAL"}, "text": {"hi"}}

	tests := []struct {
		desc   string
		form   url.Values
		header http.Header
		want   any // "ok": true, or the error code
	}{
		{desc: "no token", form: post, want: "not_authed"},
		{desc: "wrong token in body", form: merge(post, "token", "xoxb-wrong"), want: "invalid_auth"},
		{desc: "token in body", form: merge(post, "token", Token), want: true},
		{desc: "bearer header", form: post, header: http.Header{"Authorization": {"Bearer " + Token}}, want: true},
		{desc: "wrong bearer", form: merge(post, "token", Token), header: http.Header{"Authorization": {"Bearer xoxb-wrong"}}, want: "invalid_auth"},
		{desc: "basic auth is not a bearer", form: post, header: http.Header{"Authorization": {"Basic " + Token}}, want: "invalid_auth"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			status, _, body := call(t, s, MethodPostMessage, tc.form, tc.header)
			require.Equal(t, http.StatusOK, status)
			if tc.want == true {
				require.Equal(t, true, body["ok"], "body %v", body)
			} else {
				require.Equal(t, false, body["ok"])
				require.Equal(t, tc.want, body["error"])
			}
		})
	}

	t.Run("token in the query of a GET is refused", func(t *testing.T) {
		resp, err := http.Get(s.URL() + MethodLookupByEmail + "?token=" + Token + "&email=a@example.com")
		require.NoError(t, err)
		defer resp.Body.Close()
		var body map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
		require.Equal(t, "not_authed", body["error"])
	})
	t.Run("JSON body is refused", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, s.URL()+MethodPostMessage, strings.NewReader(`{"channel":"C0000GENERAL","text":"hi"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+Token)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var body map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
		require.Equal(t, "invalid_post_type", body["error"])
	})
	require.Len(t, s.Messages(), 2, "only the two authenticated posts land")
}

func merge(v url.Values, kv ...string) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out.Set(kv[i], kv[i+1])
	}
	return out
}

func TestLookupByEmail(t *testing.T) {
	s := New(t)
	s.AddUser("U0000ALICE", "Alice@Example.com")

	_, _, body := call(t, s, MethodLookupByEmail, withToken("email", "alice@example.com"), nil)
	require.Equal(t, true, body["ok"])
	require.Equal(t, "U0000ALICE", body["user"].(map[string]any)["id"])

	_, _, body = call(t, s, MethodLookupByEmail, withToken("email", "bob@example.com"), nil)
	require.Equal(t, "users_not_found", body["error"])

	_, _, body = call(t, s, MethodLookupByEmail, withToken(), nil)
	require.Equal(t, "invalid_arguments", body["error"])
	require.Equal(t, 3, s.Calls(MethodLookupByEmail))

	s.DeactivateUser("U0000ALICE")
	_, _, body = call(t, s, MethodLookupByEmail, withToken("email", "alice@example.com"), nil)
	require.Equal(t, true, body["user"].(map[string]any)["deleted"])
	_, _, body = call(t, s, MethodOpen, withToken("users", "U0000ALICE"), nil)
	require.Equal(t, "user_disabled", body["error"])
}

func TestConversationsOpen(t *testing.T) {
	s := New(t)
	s.AddUser("U0000ALICE", "alice@example.com")

	_, _, body := call(t, s, MethodOpen, withToken("users", "U0000ALICE"), nil)
	require.Equal(t, true, body["ok"])
	dm := body["channel"].(map[string]any)["id"].(string)
	require.True(t, strings.HasPrefix(dm, "D"), dm)
	require.Equal(t, dm, s.DMChannel("U0000ALICE"))

	_, _, body = call(t, s, MethodOpen, withToken("users", "U0000ALICE"), nil)
	require.Equal(t, true, body["already_open"])
	require.Equal(t, dm, body["channel"].(map[string]any)["id"], "the same DM again")

	_, _, body = call(t, s, MethodOpen, withToken("channel", dm), nil)
	require.Equal(t, true, body["ok"])

	for desc, tc := range map[string]struct {
		form url.Values
		want string
	}{
		"no users":     {withToken(), "users_list_not_supplied"},
		"unknown user": {withToken("users", "U0000NOBODY"), "user_not_found"},
		"unknown DM":   {withToken("channel", "D99999999"), "channel_not_found"},
		"group DM":     {withToken("users", "U0000ALICE,U0000BOB"), "invalid_arguments"},
	} {
		t.Run(desc, func(t *testing.T) {
			_, _, body := call(t, s, MethodOpen, tc.form, nil)
			require.Equal(t, false, body["ok"])
			require.Equal(t, tc.want, body["error"])
		})
	}
}

func TestPostMessage(t *testing.T) {
	s := New(t)
	s.AddChannel("C0000GENERAL", "general")
	s.AddChannelWithoutApp("C0000PRIVATE", "private")
	s.AddChannel("C0000OLD", "old")
	s.ArchiveChannel("C0000OLD")
	s.AddChannel("C0000OTHER", "other")

	_, _, body := call(t, s, MethodPostMessage, withToken("channel", "#general", "text", "root", "blocks", `[{"type":"divider"}]`), nil)
	require.Equal(t, true, body["ok"], "body %v", body)
	require.Equal(t, "C0000GENERAL", body["channel"], "a name resolves to the ID")
	root := body["ts"].(string)

	_, _, body = call(t, s, MethodPostMessage, withToken("channel", "C0000GENERAL", "text", "reply", "thread_ts", root), nil)
	require.Equal(t, true, body["ok"])
	reply := body["ts"].(string)

	msgs := s.Messages()
	require.Len(t, msgs, 2)
	require.Equal(t, Posted{Channel: "C0000GENERAL", Text: "root", Blocks: json.RawMessage(`[{"type":"divider"}]`), TS: root,
		Form: url.Values{"channel": {"#general"}, "text": {"root"}, "blocks": {`[{"type":"divider"}]`}}}, msgs[0])
	require.Equal(t, root, msgs[1].ThreadTS)
	require.NotContains(t, msgs[0].Form, "token")

	for desc, tc := range map[string]struct {
		form url.Values
		want string
	}{
		"no channel":           {withToken("text", "x"), "channel_not_found"},
		"unknown channel":      {withToken("channel", "C0000NOPE", "text", "x"), "channel_not_found"},
		"user ID as channel":   {withToken("channel", "U0000ALICE", "text", "x"), "channel_not_found"},
		"app not in channel":   {withToken("channel", "private", "text", "x"), "not_in_channel"},
		"archived":             {withToken("channel", "C0000OLD", "text", "x"), "is_archived"},
		"no text nor blocks":   {withToken("channel", "general"), "no_text"},
		"text too long":        {withToken("channel", "general", "text", strings.Repeat("x", 40001)), "msg_too_long"},
		"blocks not JSON":      {withToken("channel", "general", "blocks", "[{"), "invalid_blocks_format"},
		"block without type":   {withToken("channel", "general", "blocks", `[{"text":"x"}]`), "invalid_blocks"},
		"too many blocks":      {withToken("channel", "general", "blocks", "["+strings.Repeat(`{"type":"divider"},`, 50)+`{"type":"divider"}]`), "invalid_blocks"},
		"thread of a reply":    {withToken("channel", "general", "text", "x", "thread_ts", reply), "invalid_thread_ts"},
		"unknown thread":       {withToken("channel", "general", "text", "x", "thread_ts", "1699999999.000001"), "invalid_thread_ts"},
		"thread of other chan": {withToken("channel", "other", "text", "x", "thread_ts", root), "invalid_thread_ts"},
	} {
		t.Run(desc, func(t *testing.T) {
			_, _, body := call(t, s, MethodPostMessage, tc.form, nil)
			require.Equal(t, false, body["ok"])
			require.Equal(t, tc.want, body["error"])
		})
	}
	require.Len(t, s.Messages(), 2, "refused messages are not recorded")
}

func TestFailNext(t *testing.T) {
	s := New(t)
	s.AddChannel("C0000GENERAL", "general")
	s.FailNext(MethodPostMessage, RateLimited(7), ServerError(), SlackError("fatal_error"))
	post := withToken("channel", "general", "text", "x")

	status, header, body := call(t, s, MethodPostMessage, post, nil)
	require.Equal(t, http.StatusTooManyRequests, status)
	require.Equal(t, "7", header.Get("Retry-After"))
	require.Equal(t, "ratelimited", body["error"])

	status, header, _ = call(t, s, MethodPostMessage, post, nil)
	require.Equal(t, http.StatusInternalServerError, status)
	require.True(t, strings.HasPrefix(header.Get("Content-Type"), "text/html"))

	status, _, body = call(t, s, MethodPostMessage, post, nil)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "fatal_error", body["error"])

	require.Empty(t, s.Messages())
	_, _, body = call(t, s, MethodPostMessage, post, nil)
	require.Equal(t, true, body["ok"])
	require.Len(t, s.Messages(), 1)
	require.Equal(t, 4, s.Calls(MethodPostMessage))

	t.Run("failures wait for an authenticated request", func(t *testing.T) {
		s.FailNext(MethodPostMessage, ServerError())
		_, _, body := call(t, s, MethodPostMessage, url.Values{"channel": {"general"}, "text": {"x"}}, nil)
		require.Equal(t, "not_authed", body["error"])
		status, _, _ := call(t, s, MethodPostMessage, post, nil)
		require.Equal(t, http.StatusInternalServerError, status)
	})

	t.Run("a lost answer: the message is posted, the poster gets no answer", func(t *testing.T) {
		before := len(s.Messages())
		s.FailNext(MethodPostMessage, LostAnswer())
		req, _ := http.NewRequest(http.MethodPost, s.URL()+MethodPostMessage, strings.NewReader(merge(post, "text", "lost").Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		_, err := http.DefaultClient.Do(req)
		require.Error(t, err)
		msgs := s.Messages()
		require.Len(t, msgs, before+1)
		require.Equal(t, "lost", msgs[before].Text)
	})

	t.Run("disconnect", func(t *testing.T) {
		s.FailNext(MethodPostMessage, Failure{Disconnect: true})
		req, _ := http.NewRequest(http.MethodPost, s.URL()+MethodPostMessage, strings.NewReader(post.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		_, err := http.DefaultClient.Do(req)
		require.Error(t, err)
	})
}

func TestUnknownMethod(t *testing.T) {
	s := New(t)
	_, _, body := call(t, s, "chat.frobnicate", withToken(), nil)
	require.Equal(t, "unknown_method", body["error"])
}

func TestConcurrentPostsAndWait(t *testing.T) {
	s := New(t)
	s.AddChannel("C0000GENERAL", "general")
	const n = 20
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			call(t, s, MethodPostMessage, withToken("channel", "general", "text", fmt.Sprint(i)), nil)
		})
	}
	msgs := s.WaitMessages(t, n, 10*time.Second)
	wg.Wait()
	require.Len(t, msgs, n)
	seen := map[string]bool{}
	for _, m := range msgs {
		require.False(t, seen[m.TS], "duplicate ts %s", m.TS)
		seen[m.TS] = true
	}
	require.Equal(t, n, s.Calls(MethodPostMessage))
}

func TestWaitMessagesFailsOnTimeout(t *testing.T) {
	s := New(t)
	ft := &fakeT{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.WaitMessages(ft, 1, 50*time.Millisecond)
	}()
	<-done
	require.True(t, ft.failed, "WaitMessages must fail the test when messages do not come")
}

// fakeT records Fatalf instead of stopping the real test.
type fakeT struct {
	testing.TB
	failed bool
}

func (f *fakeT) Helper() {}
func (f *fakeT) Fatalf(string, ...any) {
	f.failed = true
	runtime.Goexit()
}

// TestOnPost checks that the hook sees every accepted message once, in the
// order Slack accepted them, none that were refused or posted before it was
// set, and that it may call the Server's methods.
func TestOnPost(t *testing.T) {
	s := NewServer()
	defer s.Close()
	s.AddChannel("C0000GENERAL", "general")
	_, _, body := call(t, s, MethodPostMessage, withToken("channel", "general", "text", "before the hook"), nil)
	require.Equal(t, true, body["ok"])

	var mu sync.Mutex
	var seen []Posted
	s.OnPost(func(p Posted) {
		require.NotEmpty(t, s.Messages(), "the hook may call the Server, and the message is recorded")
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, p)
	})
	_, _, body = call(t, s, MethodPostMessage, withToken("channel", "nowhere", "text", "refused"), nil)
	require.Equal(t, "channel_not_found", body["error"])
	_, _, body = call(t, s, MethodPostMessage, withToken("channel", "general", "text", "first"), nil)
	require.Equal(t, true, body["ok"])
	mu.Lock()
	require.Len(t, seen, 1, "the hook has run when the poster gets its answer")
	require.Equal(t, "first", seen[0].Text)
	require.Equal(t, body["ts"], seen[0].TS)
	mu.Unlock()

	const n = 40
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			call(t, s, MethodPostMessage, withToken("channel", "C0000GENERAL", "text", fmt.Sprint("m", i)), nil)
		}()
	}
	wg.Wait()
	msgs := s.Messages()
	require.Len(t, msgs, n+2)
	mu.Lock()
	require.Equal(t, msgs[1:], seen, "every accepted message once, in the order accepted")
	mu.Unlock()

	s.OnPost(nil)
	_, _, body = call(t, s, MethodPostMessage, withToken("channel", "general", "text", "after the hook"), nil)
	require.Equal(t, true, body["ok"])
	require.Len(t, seen, n+1)
}

// TestNewServerAndClose checks that a Server made without a testing.TB
// serves until Close, and that closing twice is harmless.
func TestNewServerAndClose(t *testing.T) {
	s := NewServer()
	s.AddUser("U0000ALICE", "alice@example.com")
	_, _, body := call(t, s, MethodLookupByEmail, withToken("email", "alice@example.com"), nil)
	require.Equal(t, true, body["ok"])
	s.Close()
	s.Close()
	_, err := http.Post(s.URL()+MethodLookupByEmail, "application/x-www-form-urlencoded", strings.NewReader(withToken("email", "alice@example.com").Encode()))
	require.Error(t, err, "a closed server must not answer")
}
