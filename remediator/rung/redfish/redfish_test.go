package redfish_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stmcginnis/gofish"

	"github.com/kubemedic/kubemedic/remediator/rung/redfish"
	"github.com/kubemedic/kubemedic/remediator/rung/redfish/redfishtest"
)

// wrongPassword is what the failing cases send; it must never show up in
// an error.
const wrongPassword = "Wr0ng-Pa55word-5e1f"

func request(s *redfishtest.Server) redfish.Request {
	return redfish.Request{
		Endpoint:           s.URL,
		Username:           s.Username,
		Password:           s.Password,
		InsecureSkipVerify: true,
		Timeout:            5 * time.Second,
	}
}

// checkNoSecrets fails t when err or res carries any of the secrets.
func checkNoSecrets(t *testing.T, err error, res redfish.Result, secrets ...string) {
	t.Helper()
	text := res.Target + " " + res.Action
	if err != nil {
		text += " " + err.Error()
	}
	for _, s := range secrets {
		if s != "" && strings.Contains(text, s) {
			t.Errorf("secret %q leaked into %q", s, text)
		}
	}
}

func TestReset(t *testing.T) {
	twoSystems := redfishtest.Options{Systems: []redfishtest.System{{ID: "a"}, {ID: "b"}}}
	limited := redfishtest.Options{Systems: []redfishtest.System{
		{ID: "1", AllowedResetTypes: []string{"On", "ForceOff", "ForceRestart"}},
	}}
	hidden := redfishtest.Options{Systems: []redfishtest.System{
		{ID: "1", AllowedResetTypes: []string{"On", "ForceOff"}, HideAllowableValues: true},
	}}
	for _, tc := range []struct {
		desc   string
		opts   redfishtest.Options
		edit   func(*redfish.Request, *redfishtest.Server)
		before func(*redfishtest.Server)

		wantErr    string // substring; "" means success
		permanent  bool
		status     int    // Error.StatusCode when wantErr != ""
		wantReset  string // ResetType the stand-in accepted; "" means none
		wantSystem string
		wantTarget string // path after the URL
	}{
		{
			desc:      "default is PowerCycle of the only system",
			wantReset: "PowerCycle", wantSystem: "1", wantTarget: "/redfish/v1/Systems/1",
		},
		{
			desc:      "PowerCycle by name and Id",
			edit:      func(r *redfish.Request, _ *redfishtest.Server) { r.ResetType, r.System = "PowerCycle", "1" },
			wantReset: "PowerCycle", wantSystem: "1", wantTarget: "/redfish/v1/Systems/1",
		},
		{
			desc:      "ForceRestart",
			edit:      func(r *redfish.Request, _ *redfishtest.Server) { r.ResetType = "ForceRestart" },
			wantReset: "ForceRestart", wantSystem: "1", wantTarget: "/redfish/v1/Systems/1",
		},
		{
			desc:      "GracefulRestart",
			edit:      func(r *redfish.Request, _ *redfishtest.Server) { r.ResetType = "GracefulRestart" },
			wantReset: "GracefulRestart", wantSystem: "1", wantTarget: "/redfish/v1/Systems/1",
		},
		{
			desc:      "named system among two",
			opts:      twoSystems,
			edit:      func(r *redfish.Request, _ *redfishtest.Server) { r.System = "b" },
			wantReset: "PowerCycle", wantSystem: "b", wantTarget: "/redfish/v1/Systems/b",
		},
		{
			desc:    "wrong password is 401, permanent",
			edit:    func(r *redfish.Request, _ *redfishtest.Server) { r.Password = wrongPassword },
			wantErr: "HTTP 401", permanent: true, status: 401,
		},
		{
			desc:    "wrong username is 401, permanent",
			edit:    func(r *redfish.Request, _ *redfishtest.Server) { r.Username = "nobody-user" },
			wantErr: "NoValidSession", permanent: true, status: 401,
		},
		{
			desc:    "reset type the system does not list is refused before posting",
			opts:    limited,
			wantErr: "reset type PowerCycle is not allowed by the system; it allows On, ForceOff, ForceRestart", permanent: true,
		},
		{
			desc:      "allowed type on the same system",
			opts:      limited,
			edit:      func(r *redfish.Request, _ *redfishtest.Server) { r.ResetType = "ForceRestart" },
			wantReset: "ForceRestart", wantSystem: "1", wantTarget: "/redfish/v1/Systems/1",
		},
		{
			desc:    "BMC that hides its list refuses with 400 ActionParameterValueNotInList",
			opts:    hidden,
			wantErr: "ActionParameterValueNotInList", permanent: true, status: 400,
		},
		{
			desc:    "reset type outside ours",
			edit:    func(r *redfish.Request, _ *redfishtest.Server) { r.ResetType = "ForceOff" },
			wantErr: `reset type "ForceOff" is not one of PowerCycle, ForceRestart, GracefulRestart`, permanent: true,
		},
		{
			desc:    "unknown system",
			edit:    func(r *redfish.Request, _ *redfishtest.Server) { r.System = "9" },
			wantErr: `the BMC has no system "9" (Ids: 1)`, permanent: true,
		},
		{
			desc:    "no system named and two",
			opts:    twoSystems,
			wantErr: "no system named and the BMC has 2 (Ids: a, b)", permanent: true,
		},
		{
			desc:    "no systems at all",
			opts:    redfishtest.Options{Systems: []redfishtest.System{}},
			wantErr: "the BMC has 0 (Ids: none)", permanent: true,
		},
		{
			desc:    "503 once is not permanent",
			before:  func(s *redfishtest.Server) { s.FailNext(1) },
			wantErr: "HTTP 503", permanent: false, status: 503,
		},
		{
			desc:    "no username",
			edit:    func(r *redfish.Request, _ *redfishtest.Server) { r.Username = "" },
			wantErr: "no username", permanent: true,
		},
		{
			desc:    "untrusted certificate is permanent",
			edit:    func(r *redfish.Request, _ *redfishtest.Server) { r.InsecureSkipVerify = false },
			wantErr: "InsecureSkipVerify", permanent: true,
		},
		{
			desc:    "plain http works when asked for",
			opts:    redfishtest.Options{PlainHTTP: true},
			edit:    func(r *redfish.Request, _ *redfishtest.Server) { r.InsecureSkipVerify = false },
			wantErr: "", wantReset: "PowerCycle", wantSystem: "1", wantTarget: "/redfish/v1/Systems/1",
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			s := redfishtest.New(t, tc.opts)
			req := request(s)
			if tc.edit != nil {
				tc.edit(&req, s)
			}
			if tc.before != nil {
				tc.before(s)
			}
			res, err := redfish.Reset(context.Background(), req)
			checkNoSecrets(t, err, res, s.Password, wrongPassword, req.Password)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Reset: %v", err)
				}
				if want := s.URL + tc.wantTarget; res.Target != want {
					t.Errorf("Target = %q, want %q", res.Target, want)
				}
				if want := "ComputerSystem.Reset ResetType=" + tc.wantReset; res.Action != want {
					t.Errorf("Action = %q, want %q", res.Action, want)
				}
			} else {
				if err == nil {
					t.Fatalf("Reset succeeded, want error with %q", tc.wantErr)
				}
				if !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("error %q does not contain %q", err, tc.wantErr)
				}
				if got := redfish.Permanent(err); got != tc.permanent {
					t.Errorf("Permanent(%q) = %v, want %v", err, got, tc.permanent)
				}
				var e *redfish.Error
				if !errors.As(err, &e) {
					t.Fatalf("error %T is not *redfish.Error", err)
				}
				if e.StatusCode != tc.status {
					t.Errorf("StatusCode = %d, want %d", e.StatusCode, tc.status)
				}
				if !strings.Contains(err.Error(), s.URL) {
					t.Errorf("error %q does not name the endpoint", err)
				}
				if strings.Contains(err.Error(), req.Username) && req.Username != "" {
					t.Errorf("error %q contains the username", err)
				}
			}
			resets := s.Resets()
			if tc.wantReset == "" {
				if len(resets) != 0 {
					t.Errorf("resets = %+v, want none", resets)
				}
			} else {
				if len(resets) != 1 {
					t.Fatalf("resets = %+v, want one", resets)
				}
				got := resets[0]
				if got.ResetType != tc.wantReset || got.System != tc.wantSystem || got.Auth != redfishtest.AuthBasic {
					t.Errorf("reset = %+v, want %s of %s with Basic auth", got, tc.wantReset, tc.wantSystem)
				}
				if want := []string{"On", "Off", "On"}; !slices.Equal(got.PowerStates, want) {
					t.Errorf("power states = %v, want %v", got.PowerStates, want)
				}
			}
			if n := s.OpenSessions(); n != 0 {
				t.Errorf("%d sessions left open", n)
			}
			for _, r := range s.Requests() {
				if strings.HasPrefix(r.Path, "/redfish/v1/SessionService") {
					t.Errorf("request %s %s: Basic auth needs no session", r.Method, r.Path)
				}
			}
		})
	}
}

func TestResetRetryAfter503(t *testing.T) {
	s := redfishtest.New(t, redfishtest.Options{})
	s.FailNext(1)
	req := request(s)
	if _, err := redfish.Reset(context.Background(), req); err == nil || redfish.Permanent(err) {
		t.Fatalf("first Reset: err = %v, want a transient error", err)
	}
	if _, err := redfish.Reset(context.Background(), req); err != nil {
		t.Fatalf("second Reset: %v", err)
	}
	if got := s.PowerState("1"); got != "On" {
		t.Errorf("power state = %q, want On", got)
	}
	if n := len(s.Resets()); n != 1 {
		t.Errorf("%d resets, want 1", n)
	}
}

// A BMC that is busy only for the reset POST: transient, nothing reset.
func TestResetPost503(t *testing.T) {
	bmc := redfishtest.New(t, redfishtest.Options{})
	proxy := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		forward(t, bmc, w, r)
	}))
	defer proxy.Close()
	req := request(bmc)
	req.Endpoint = proxy.URL
	_, err := redfish.Reset(context.Background(), req)
	if err == nil || redfish.Permanent(err) || !strings.Contains(err.Error(), "post reset") {
		t.Fatalf("err = %v, want a transient post reset error", err)
	}
	if len(bmc.Resets()) != 0 {
		t.Errorf("resets = %+v, want none", bmc.Resets())
	}
}

// forward sends r on to s and copies the answer back.
func forward(t *testing.T, s *redfishtest.Server, w http.ResponseWriter, r *http.Request) {
	out, err := http.NewRequestWithContext(r.Context(), r.Method, s.URL+r.URL.RequestURI(), r.Body)
	if err != nil {
		t.Errorf("forward: %v", err)
		return
	}
	out.Header = r.Header.Clone()
	resp, err := s.Client().Do(out)
	if err != nil {
		t.Errorf("forward: %v", err)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	buf := make([]byte, 32<<10)
	for {
		k, err := resp.Body.Read(buf)
		_, _ = w.Write(buf[:k])
		if err != nil {
			return
		}
	}
}

func TestResetBadEndpoint(t *testing.T) {
	for _, ep := range []string{
		"",
		"bmc-node-1",
		"10.0.0.5:443",
		"ftp://10.0.0.5",
		"https://",
		"https://admin:" + wrongPassword + "@10.0.0.5",
		"https://10.0.0.5/redfish/v1",
		"https://10.0.0.5?x=1",
		"https://[::1",
		"http://%zz",
	} {
		t.Run(ep, func(t *testing.T) {
			res, err := redfish.Reset(context.Background(), redfish.Request{
				Endpoint: ep, Username: "admin", Password: wrongPassword,
			})
			if err == nil {
				t.Fatal("Reset succeeded")
			}
			if !redfish.Permanent(err) {
				t.Errorf("Permanent(%q) = false, want true", err)
			}
			checkNoSecrets(t, err, res, wrongPassword)
			if strings.Contains(err.Error(), "admin:") {
				t.Errorf("error %q carries the endpoint's credentials", err)
			}
		})
	}
}

func TestResetTimeout(t *testing.T) {
	for _, tc := range []struct {
		desc string
		hang int // requests to hang, counted from the first
	}{
		{desc: "service root hangs", hang: 1},
		{desc: "every request hangs", hang: 100},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			s := redfishtest.New(t, redfishtest.Options{})
			s.HangNext(tc.hang)
			req := request(s)
			req.Timeout = 300 * time.Millisecond
			start := time.Now()
			res, err := redfish.Reset(context.Background(), req)
			if took := time.Since(start); took > 3*time.Second {
				t.Errorf("Reset took %v with a 300ms timeout", took)
			}
			if err == nil {
				t.Fatal("Reset succeeded")
			}
			if redfish.Permanent(err) {
				t.Errorf("Permanent(%q) = true, want false", err)
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("error %q is not DeadlineExceeded", err)
			}
			checkNoSecrets(t, err, res, s.Password)
		})
	}
}

// A BMC that hangs on the reset POST: the whole Reset is still bounded.
func TestResetTimeoutOnPost(t *testing.T) {
	bmc := redfishtest.New(t, redfishtest.Options{})
	proxy := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			// The server notices the client hanging up only once the
			// body is read.
			_, _ = io.Copy(io.Discard, r.Body)
			<-r.Context().Done()
			return
		}
		forward(t, bmc, w, r)
	}))
	defer proxy.Close()
	req := request(bmc)
	req.Endpoint = proxy.URL
	req.Timeout = 500 * time.Millisecond
	_, err := redfish.Reset(context.Background(), req)
	if err == nil || redfish.Permanent(err) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want a transient deadline error", err)
	}
	if !strings.Contains(err.Error(), "post reset") {
		t.Errorf("error %q does not name the step", err)
	}
}

func TestResetCanceled(t *testing.T) {
	s := redfishtest.New(t, redfishtest.Options{})
	s.HangNext(100)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for len(s.Requests()) == 0 {
			time.Sleep(5 * time.Millisecond) // waiting on a real HTTP round trip
		}
		cancel() // Reset is now waiting on the hung request
	}()
	_, err := redfish.Reset(ctx, request(s))
	if err == nil || redfish.Permanent(err) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want a transient canceled error", err)
	}
}

// A BMC that echoes what it was sent in its error: the error is scrubbed.
func TestResetScrubsEchoedCredentials(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/redfish/v1/" && r.Header.Get("Authorization") == "" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"Systems":{"@odata.id":"/redfish/v1/Systems"}}`))
			return
		}
		u, p, _ := r.BasicAuth()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":{"code":"Base.1.16.NoValidSession","message":"login ` + u + `/` + p + ` refused",` +
			`"@Message.ExtendedInfo":[{"MessageId":"Base.1.16.NoValidSession","Message":"user ` + u + ` password ` + p + `"}]}}`))
	}))
	defer srv.Close()
	req := redfish.Request{
		Endpoint: srv.URL, Username: "operator7", Password: wrongPassword, InsecureSkipVerify: true, Timeout: 5 * time.Second,
	}
	res, err := redfish.Reset(context.Background(), req)
	if err == nil || !redfish.Permanent(err) {
		t.Fatalf("err = %v, want a permanent error", err)
	}
	checkNoSecrets(t, err, res, wrongPassword, "operator7")
	if !strings.Contains(err.Error(), "[redacted]") || !strings.Contains(err.Error(), "NoValidSession") {
		t.Errorf("error %q lost what the BMC said", err)
	}
	if errors.Unwrap(err) != nil {
		t.Errorf("error wraps %v; the BMC's error must not be reachable", errors.Unwrap(err))
	}
}

// The stand-in's sessions work with gofish's session login, and Logout
// deletes the session, as Reset relies on if it ever logs in.
func TestStandInSessionsWithGofish(t *testing.T) {
	s := redfishtest.New(t, redfishtest.Options{PlainHTTP: true})
	c, err := gofish.ConnectContext(context.Background(), gofish.ClientConfig{
		Endpoint: s.URL, Username: s.Username, Password: s.Password,
	})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	if n := s.OpenSessions(); n != 1 {
		t.Fatalf("%d sessions open after login, want 1", n)
	}
	systems, err := c.Service.Systems()
	if err != nil || len(systems) != 1 {
		t.Fatalf("systems = %v, %v", systems, err)
	}
	if _, err := systems[0].Reset("ForceRestart"); err != nil {
		t.Fatalf("reset: %v", err)
	}
	c.Logout()
	if n := s.OpenSessions(); n != 0 {
		t.Errorf("%d sessions open after Logout, want 0", n)
	}
	resets := s.Resets()
	if len(resets) != 1 || resets[0].Auth != redfishtest.AuthSession {
		t.Errorf("resets = %+v, want one with session auth", resets)
	}
}

// TestInspect: Inspect reads the system's PowerState and LastResetTime,
// as they are while a reset runs, and changes nothing; a BMC that sends
// no LastResetTime reads as "".
func TestInspect(t *testing.T) {
	start := time.Date(2026, 11, 26, 1, 0, 0, 0, time.UTC)
	now := start
	s := redfishtest.New(t, redfishtest.Options{Now: func() time.Time { return now }, PowerTransition: 10 * time.Second,
		Systems: []redfishtest.System{{ID: "1"}, {ID: "old", HideLastResetTime: true}}})
	req := request(s)
	req.System = "1"
	st, err := redfish.Inspect(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	want := redfish.SystemState{Target: s.URL + "/redfish/v1/Systems/1", PowerState: "On", LastResetTime: start.Format(time.RFC3339)}
	if st != want {
		t.Errorf("Inspect = %+v, want %+v", st, want)
	}
	now = start.Add(time.Minute)
	if _, err := redfish.Reset(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	now = now.Add(15 * time.Second)
	if st, err = redfish.Inspect(context.Background(), req); err != nil || st.PowerState != "Off" || st.LastResetTime != want.LastResetTime {
		t.Errorf("during the cycle: %+v, %v; want Off and the old LastResetTime", st, err)
	}
	now = now.Add(time.Minute)
	if st, err = redfish.Inspect(context.Background(), req); err != nil || st.PowerState != "On" || st.LastResetTime != start.Add(time.Minute+30*time.Second).Format(time.RFC3339) {
		t.Errorf("after the cycle: %+v, %v; want On and a new LastResetTime", st, err)
	}
	if n := len(s.Resets()); n != 1 {
		t.Errorf("%d resets, want the one asked", n)
	}
	req.System = "old"
	if st, err = redfish.Inspect(context.Background(), req); err != nil || st.PowerState != "On" || st.LastResetTime != "" {
		t.Errorf("a BMC without LastResetTime: %+v, %v", st, err)
	}
}

// TestInspectErrors: Inspect's errors are Reset's, named as a read, and
// carry no secret.
func TestInspectErrors(t *testing.T) {
	s := redfishtest.New(t, redfishtest.Options{})
	req := request(s)
	req.Password = wrongPassword
	_, err := redfish.Inspect(context.Background(), req)
	if err == nil || !redfish.Permanent(err) || !strings.Contains(err.Error(), "redfish read of system") {
		t.Fatalf("err = %v, want a permanent read error", err)
	}
	checkNoSecrets(t, err, redfish.Result{}, wrongPassword)
	s.HangNext(1)
	req = request(s)
	req.Timeout = 300 * time.Millisecond
	if _, err := redfish.Inspect(context.Background(), req); err == nil || redfish.Permanent(err) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want a transient deadline error", err)
	}
	if len(s.Resets()) != 0 {
		t.Errorf("Inspect reset something: %+v", s.Resets())
	}
}

// TestSent: only an error of the reset POST itself may have reached the
// BMC; the stand-in's lost answers (it applied the reset) are Sent, a
// failure before the POST is not.
func TestSent(t *testing.T) {
	for _, tc := range []struct {
		desc       string
		fault      func(*redfishtest.Server)
		wantSent   bool
		wantResets int
	}{
		{desc: "the service root answers 503", fault: func(s *redfishtest.Server) { s.FailNext(1) }, wantSent: false},
		{desc: "the service root hangs", fault: func(s *redfishtest.Server) { s.HangNext(1) }, wantSent: false},
		{desc: "applied, then 500", fault: func(s *redfishtest.Server) { s.ApplyThenFail(1) }, wantSent: true, wantResets: 1},
		{desc: "applied, then no answer", fault: func(s *redfishtest.Server) { s.ApplyThenHang(1) }, wantSent: true, wantResets: 1},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			s := redfishtest.New(t, redfishtest.Options{})
			tc.fault(s)
			req := request(s)
			req.Timeout = 500 * time.Millisecond
			_, err := redfish.Reset(context.Background(), req)
			if err == nil || redfish.Permanent(err) {
				t.Fatalf("err = %v, want a transient error", err)
			}
			if got := redfish.Sent(err); got != tc.wantSent {
				t.Errorf("Sent(%v) = %v, want %v", err, got, tc.wantSent)
			}
			if n := len(s.Resets()); n != tc.wantResets {
				t.Errorf("%d resets, want %d", n, tc.wantResets)
			}
		})
	}
	if !redfish.Sent(errors.New("not a redfish error")) {
		t.Error("an error of unknown origin must count as maybe sent")
	}
}
