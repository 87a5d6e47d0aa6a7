package redfishtest_test

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kubemedic/kubemedic/remediator/rung/redfish/redfishtest"
)

const resetURI = "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset"

type answer struct {
	status int
	header http.Header
	body   []byte
}

// do sends one request; auth is "basic", "bad", a session token, or "".
func do(t *testing.T, s *redfishtest.Server, method, path, contentType, body, auth string) answer {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, s.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	switch auth {
	case "":
	case "basic":
		req.SetBasicAuth(s.Username, s.Password)
	case "bad":
		req.SetBasicAuth(s.Username, "not-the-password")
	default:
		req.Header.Set("X-Auth-Token", auth)
	}
	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: b}
}

// messageID returns the first @Message.ExtendedInfo MessageId of a
// Redfish error response, checking its shape.
func messageID(t *testing.T, a answer) string {
	t.Helper()
	var e struct {
		Error struct {
			Code     string `json:"code"`
			Message  string `json:"message"`
			Extended []struct {
				MessageID   string   `json:"MessageId"`
				Message     string   `json:"Message"`
				MessageArgs []string `json:"MessageArgs"`
			} `json:"@Message.ExtendedInfo"`
		} `json:"error"`
	}
	if err := json.Unmarshal(a.body, &e); err != nil {
		t.Fatalf("error body %q: %v", a.body, err)
	}
	if e.Error.Code == "" || e.Error.Message == "" || len(e.Error.Extended) == 0 {
		t.Fatalf("error body %s lacks code, message or @Message.ExtendedInfo", a.body)
	}
	if ct := a.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("error Content-Type = %q", ct)
	}
	id := e.Error.Extended[0].MessageID
	if !strings.HasPrefix(id, "Base.1.") {
		t.Errorf("MessageId %q is not a Base registry one", id)
	}
	return id[strings.LastIndex(id, ".")+1:]
}

func TestServiceRootIsPublic(t *testing.T) {
	s := redfishtest.New(t, redfishtest.Options{})
	for _, p := range []string{"/redfish/v1/", "/redfish/v1"} {
		a := do(t, s, "GET", p, "", "", "")
		if a.status != http.StatusOK {
			t.Fatalf("GET %s = %d", p, a.status)
		}
		var root map[string]any
		if err := json.Unmarshal(a.body, &root); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"RedfishVersion", "Systems", "SessionService", "Links"} {
			if root[k] == nil {
				t.Errorf("service root lacks %s: %s", k, a.body)
			}
		}
		if a.header.Get("OData-Version") != "4.0" {
			t.Errorf("OData-Version = %q", a.header.Get("OData-Version"))
		}
	}
}

func TestStrictness(t *testing.T) {
	for _, tc := range []struct {
		desc                 string
		method, path, ct     string
		body, auth           string
		wantStatus           int
		wantMessage          string // Base MessageId without its prefix
		wantAllow, wantWWWAu string
	}{
		{desc: "systems without auth", method: "GET", path: "/redfish/v1/Systems",
			wantStatus: 401, wantMessage: "NoValidSession", wantWWWAu: "Basic"},
		{desc: "systems with a wrong password", method: "GET", path: "/redfish/v1/Systems", auth: "bad",
			wantStatus: 401, wantMessage: "NoValidSession"},
		{desc: "systems with an unknown token", method: "GET", path: "/redfish/v1/Systems", auth: "0123",
			wantStatus: 401, wantMessage: "NoValidSession"},
		{desc: "reset without auth", method: "POST", path: resetURI, ct: "application/json", body: `{"ResetType":"On"}`,
			wantStatus: 401, wantMessage: "NoValidSession"},
		{desc: "unknown path without auth is 401 first", method: "GET", path: "/redfish/v1/Nope",
			wantStatus: 401, wantMessage: "NoValidSession"},
		{desc: "unknown path", method: "GET", path: "/redfish/v1/Nope", auth: "basic",
			wantStatus: 404, wantMessage: "ResourceMissingAtURI"},
		{desc: "systems with a trailing slash is another URI", method: "GET", path: "/redfish/v1/Systems/1/", auth: "basic",
			wantStatus: 404, wantMessage: "ResourceMissingAtURI"},
		{desc: "unknown system", method: "GET", path: "/redfish/v1/Systems/2", auth: "basic",
			wantStatus: 404, wantMessage: "ResourceNotFound"},
		{desc: "reset of an unknown system", method: "POST", path: "/redfish/v1/Systems/2/Actions/ComputerSystem.Reset",
			ct: "application/json", body: `{"ResetType":"On"}`, auth: "basic",
			wantStatus: 404, wantMessage: "ResourceMissingAtURI"},
		{desc: "GET on the action", method: "GET", path: resetURI, auth: "basic",
			wantStatus: 405, wantMessage: "OperationNotAllowed", wantAllow: "POST"},
		{desc: "PATCH on a system", method: "PATCH", path: "/redfish/v1/Systems/1", ct: "application/json", body: `{}`, auth: "basic",
			wantStatus: 405, wantMessage: "OperationNotAllowed", wantAllow: "GET, HEAD"},
		{desc: "POST on the service root", method: "POST", path: "/redfish/v1/", ct: "application/json", body: `{}`,
			wantStatus: 405, wantMessage: "OperationNotAllowed", wantAllow: "GET, HEAD"},
		{desc: "no content type", method: "POST", path: resetURI, body: `{"ResetType":"On"}`, auth: "basic",
			wantStatus: 415, wantMessage: "UnrecognizedRequestBody"},
		{desc: "form content type", method: "POST", path: resetURI, ct: "application/x-www-form-urlencoded",
			body: "ResetType=On", auth: "basic", wantStatus: 415, wantMessage: "UnrecognizedRequestBody"},
		{desc: "not JSON", method: "POST", path: resetURI, ct: "application/json", body: `ResetType=On`, auth: "basic",
			wantStatus: 400, wantMessage: "MalformedJSON"},
		{desc: "JSON but not an object", method: "POST", path: resetURI, ct: "application/json", body: `["On"]`, auth: "basic",
			wantStatus: 400, wantMessage: "MalformedJSON"},
		{desc: "trailing data", method: "POST", path: resetURI, ct: "application/json", body: `{"ResetType":"On"} x`, auth: "basic",
			wantStatus: 400, wantMessage: "MalformedJSON"},
		{desc: "empty body", method: "POST", path: resetURI, ct: "application/json", auth: "basic",
			wantStatus: 400, wantMessage: "MalformedJSON"},
		{desc: "no ResetType", method: "POST", path: resetURI, ct: "application/json", body: `{}`, auth: "basic",
			wantStatus: 400, wantMessage: "ActionParameterMissing"},
		{desc: "ResetType not a string", method: "POST", path: resetURI, ct: "application/json", body: `{"ResetType":5}`, auth: "basic",
			wantStatus: 400, wantMessage: "ActionParameterValueTypeError"},
		{desc: "ResetType not in the list", method: "POST", path: resetURI, ct: "application/json", body: `{"ResetType":"Explode"}`, auth: "basic",
			wantStatus: 400, wantMessage: "ActionParameterValueNotInList"},
		{desc: "ResetType in the wrong case", method: "POST", path: resetURI, ct: "application/json", body: `{"ResetType":"powercycle"}`, auth: "basic",
			wantStatus: 400, wantMessage: "ActionParameterValueNotInList"},
		{desc: "unknown parameter", method: "POST", path: resetURI, ct: "application/json", body: `{"ResetType":"On","Force":true}`, auth: "basic",
			wantStatus: 400, wantMessage: "ActionParameterUnknown"},
		{desc: "login with a wrong password", method: "POST", path: "/redfish/v1/SessionService/Sessions", ct: "application/json",
			body: `{"UserName":"kubemedic","Password":"nope"}`, wantStatus: 401, wantMessage: "NoValidSession"},
		{desc: "login without a password", method: "POST", path: "/redfish/v1/SessionService/Sessions", ct: "application/json",
			body: `{"UserName":"kubemedic"}`, wantStatus: 400, wantMessage: "PropertyMissing"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			s := redfishtest.New(t, redfishtest.Options{})
			a := do(t, s, tc.method, tc.path, tc.ct, tc.body, tc.auth)
			if a.status != tc.wantStatus {
				t.Fatalf("status = %d, want %d; body %s", a.status, tc.wantStatus, a.body)
			}
			if got := messageID(t, a); got != tc.wantMessage {
				t.Errorf("MessageId = %s, want %s", got, tc.wantMessage)
			}
			if got := a.header.Get("Allow"); got != tc.wantAllow {
				t.Errorf("Allow = %q, want %q", got, tc.wantAllow)
			}
			if tc.wantWWWAu != "" && !strings.HasPrefix(a.header.Get("WWW-Authenticate"), tc.wantWWWAu) {
				t.Errorf("WWW-Authenticate = %q", a.header.Get("WWW-Authenticate"))
			}
			if len(s.Resets()) != 0 || s.PowerState("1") != redfishtest.PowerOn {
				t.Errorf("a refused request changed something: resets %+v, power %s", s.Resets(), s.PowerState("1"))
			}
		})
	}
}

func TestResetFollowsPower(t *testing.T) {
	now := time.Date(2026, 11, 26, 1, 0, 0, 0, time.UTC)
	s := redfishtest.New(t, redfishtest.Options{Now: func() time.Time { return now }})
	for _, tc := range []struct {
		resetType string
		want      []string
	}{
		{"PowerCycle", []string{"On", "Off", "On"}},
		{"ForceOff", []string{"On", "Off"}},
		{"PowerCycle", []string{"Off", "On"}},
		{"GracefulShutdown", []string{"On", "Off"}},
		{"On", []string{"Off", "On"}},
		{"ForceRestart", []string{"On", "Off", "On"}},
		{"GracefulRestart", []string{"On", "Off", "On"}},
	} {
		a := do(t, s, "POST", resetURI, "application/json; charset=utf-8", `{"ResetType":"`+tc.resetType+`"}`, "basic")
		if a.status != http.StatusNoContent || len(a.body) != 0 {
			t.Fatalf("%s: status %d body %q, want 204 and no body", tc.resetType, a.status, a.body)
		}
		resets := s.Resets()
		got := resets[len(resets)-1]
		if got.ResetType != tc.resetType || got.System != "1" || got.Auth != redfishtest.AuthBasic || !got.Time.Equal(now) {
			t.Errorf("reset = %+v", got)
		}
		if !slices.Equal(got.PowerStates, tc.want) {
			t.Errorf("%s: power states %v, want %v", tc.resetType, got.PowerStates, tc.want)
		}
		// A caller reads the state back from the ComputerSystem.
		var sys struct{ PowerState string }
		if err := json.Unmarshal(do(t, s, "GET", "/redfish/v1/Systems/1", "", "", "basic").body, &sys); err != nil {
			t.Fatal(err)
		}
		if want := tc.want[len(tc.want)-1]; sys.PowerState != want || s.PowerState("1") != want {
			t.Errorf("%s: PowerState %s (%s), want %s", tc.resetType, sys.PowerState, s.PowerState("1"), want)
		}
	}
}

func TestSystemAdvertisesAllowedResetTypes(t *testing.T) {
	s := redfishtest.New(t, redfishtest.Options{Systems: []redfishtest.System{
		{ID: "gpu-7", AllowedResetTypes: []string{"On", "ForceRestart"}},
		{ID: "quiet", AllowedResetTypes: []string{"On"}, HideAllowableValues: true},
	}})
	var sys struct {
		ID      string `json:"Id"`
		Actions map[string]struct {
			Target  string   `json:"target"`
			Allowed []string `json:"ResetType@Redfish.AllowableValues"`
		}
	}
	if err := json.Unmarshal(do(t, s, "GET", "/redfish/v1/Systems/gpu-7", "", "", "basic").body, &sys); err != nil {
		t.Fatal(err)
	}
	reset := sys.Actions["#ComputerSystem.Reset"]
	if sys.ID != "gpu-7" || reset.Target != "/redfish/v1/Systems/gpu-7/Actions/ComputerSystem.Reset" ||
		!slices.Equal(reset.Allowed, []string{"On", "ForceRestart"}) {
		t.Errorf("system = %+v", sys)
	}
	a := do(t, s, "POST", "/redfish/v1/Systems/quiet/Actions/ComputerSystem.Reset", "application/json", `{"ResetType":"PowerCycle"}`, "basic")
	if a.status != 400 || messageID(t, a) != "ActionParameterValueNotInList" {
		t.Errorf("hidden list: status %d body %s, want 400 ActionParameterValueNotInList", a.status, a.body)
	}
	var coll struct {
		Count   int `json:"Members@odata.count"`
		Members []struct {
			ID string `json:"@odata.id"`
		}
	}
	if err := json.Unmarshal(do(t, s, "GET", "/redfish/v1/Systems", "", "", "basic").body, &coll); err != nil {
		t.Fatal(err)
	}
	if coll.Count != 2 || coll.Members[0].ID != "/redfish/v1/Systems/gpu-7" || coll.Members[1].ID != "/redfish/v1/Systems/quiet" {
		t.Errorf("collection = %+v", coll)
	}
}

func TestSessions(t *testing.T) {
	s := redfishtest.New(t, redfishtest.Options{})
	a := do(t, s, "POST", "/redfish/v1/SessionService/Sessions", "application/json",
		`{"UserName":"`+s.Username+`","Password":"`+s.Password+`"}`, "")
	token, loc := a.header.Get("X-Auth-Token"), a.header.Get("Location")
	if a.status != http.StatusCreated || token == "" || !strings.HasPrefix(loc, "/redfish/v1/SessionService/Sessions/") {
		t.Fatalf("login: status %d token %q location %q", a.status, token, loc)
	}
	if strings.Contains(string(a.body), s.Password) {
		t.Errorf("session body carries the password: %s", a.body)
	}
	if s.OpenSessions() != 1 {
		t.Errorf("OpenSessions = %d", s.OpenSessions())
	}
	if a := do(t, s, "POST", resetURI, "application/json", `{"ResetType":"PowerCycle"}`, token); a.status != http.StatusNoContent {
		t.Fatalf("reset with token: %d %s", a.status, a.body)
	}
	if r := s.Resets(); len(r) != 1 || r[0].Auth != redfishtest.AuthSession {
		t.Errorf("resets = %+v", r)
	}
	if a := do(t, s, "GET", loc, "", "", token); a.status != http.StatusOK {
		t.Errorf("GET session: %d", a.status)
	}
	if a := do(t, s, "DELETE", loc, "", "", token); a.status != http.StatusNoContent {
		t.Fatalf("logout: %d %s", a.status, a.body)
	}
	if s.OpenSessions() != 0 {
		t.Errorf("OpenSessions = %d after logout", s.OpenSessions())
	}
	if a := do(t, s, "GET", "/redfish/v1/Systems", "", "", token); a.status != http.StatusUnauthorized {
		t.Errorf("token after logout: %d, want 401", a.status)
	}
}

func TestFailNext(t *testing.T) {
	s := redfishtest.New(t, redfishtest.Options{})
	s.FailNext(2)
	for i := range 2 {
		a := do(t, s, "GET", "/redfish/v1/", "", "", "")
		if a.status != http.StatusServiceUnavailable || a.header.Get("Retry-After") == "" {
			t.Fatalf("request %d: status %d Retry-After %q", i, a.status, a.header.Get("Retry-After"))
		}
		if got := messageID(t, a); got != "ServiceTemporarilyUnavailable" {
			t.Errorf("MessageId = %s", got)
		}
	}
	if a := do(t, s, "POST", resetURI, "application/json", `{"ResetType":"PowerCycle"}`, "basic"); a.status != http.StatusNoContent {
		t.Fatalf("third request: %d", a.status)
	}
	reqs := s.Requests()
	if len(reqs) != 3 || reqs[0].Status != 503 || reqs[2].Status != 204 || reqs[2].Auth != redfishtest.AuthBasic {
		t.Errorf("requests = %+v", reqs)
	}
}

func TestHangNextReleasedByClose(t *testing.T) {
	s := redfishtest.NewServer(redfishtest.Options{})
	s.HangNext(1)
	done := make(chan error, 1)
	go func() {
		resp, err := s.Client().Get(s.URL + "/redfish/v1/")
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	for len(s.Requests()) == 0 {
		time.Sleep(5 * time.Millisecond) // waiting on a real HTTP round trip
	}
	s.Close()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not release the hung request")
	}
}

// systemPower reads PowerState and LastResetTime back from the
// ComputerSystem, as a client does.
func systemPower(t *testing.T, s *redfishtest.Server) (power, lastReset string, hasLastReset bool) {
	t.Helper()
	var sys map[string]any
	if err := json.Unmarshal(do(t, s, "GET", "/redfish/v1/Systems/1", "", "", "basic").body, &sys); err != nil {
		t.Fatal(err)
	}
	power, _ = sys["PowerState"].(string)
	lastReset, hasLastReset = sys["LastResetTime"].(string)
	return power, lastReset, hasLastReset
}

// TestPowerTransition: with PowerTransition, a PowerCycle shows
// PoweringOff, Off, PoweringOn, then On, each for that long by the
// stand-in's clock, and LastResetTime moves when the system is On again.
func TestPowerTransition(t *testing.T) {
	start := time.Date(2026, 11, 26, 1, 0, 0, 0, time.UTC)
	now := start
	s := redfishtest.New(t, redfishtest.Options{Now: func() time.Time { return now }, PowerTransition: 10 * time.Second})
	_, before, ok := systemPower(t, s)
	if !ok || before != start.Format(time.RFC3339) {
		t.Fatalf("LastResetTime = %q (%v), want the start %s", before, ok, start.Format(time.RFC3339))
	}
	now = start.Add(time.Minute)
	if a := do(t, s, "POST", resetURI, "application/json", `{"ResetType":"PowerCycle"}`, "basic"); a.status != http.StatusNoContent {
		t.Fatalf("reset: %d %s", a.status, a.body)
	}
	for _, step := range []struct {
		after time.Duration
		want  string
	}{
		{0, "PoweringOff"}, {9 * time.Second, "PoweringOff"}, {10 * time.Second, "Off"}, {19 * time.Second, "Off"},
		{20 * time.Second, "PoweringOn"}, {29 * time.Second, "PoweringOn"}, {30 * time.Second, "On"}, {time.Hour, "On"},
	} {
		now = start.Add(time.Minute + step.after)
		power, last, _ := systemPower(t, s)
		if power != step.want || s.PowerState("1") != step.want {
			t.Errorf("%v after the reset: PowerState %s (%s), want %s", step.after, power, s.PowerState("1"), step.want)
		}
		wantLast := before
		if step.want == "On" {
			wantLast = start.Add(time.Minute + 30*time.Second).Format(time.RFC3339)
		}
		if last != wantLast {
			t.Errorf("%v after the reset: LastResetTime %s, want %s", step.after, last, wantLast)
		}
	}
	if r := s.Resets(); len(r) != 1 || !slices.Equal(r[0].PowerStates, []string{"On", "Off", "On"}) {
		t.Errorf("resets = %+v", r)
	}
}

// TestHideLastResetTime: a system may leave LastResetTime out, as BMCs
// before ComputerSystem v1.12.0 do.
func TestHideLastResetTime(t *testing.T) {
	s := redfishtest.New(t, redfishtest.Options{Systems: []redfishtest.System{{ID: "1", HideLastResetTime: true}}})
	if _, last, ok := systemPower(t, s); ok {
		t.Errorf("LastResetTime %q served", last)
	}
}

// TestApplyThenLoseTheAnswer: ApplyThenFail and ApplyThenHang apply the
// reset and lose its answer; FailNext and HangNext lose the request
// itself, and apply nothing.
func TestApplyThenLoseTheAnswer(t *testing.T) {
	t.Run("fail", func(t *testing.T) {
		s := redfishtest.New(t, redfishtest.Options{})
		s.ApplyThenFail(1)
		// A GET is not a reset: it is answered.
		if power, _, _ := systemPower(t, s); power != "On" {
			t.Fatalf("PowerState %s", power)
		}
		a := do(t, s, "POST", resetURI, "application/json", `{"ResetType":"PowerCycle"}`, "basic")
		if a.status != http.StatusInternalServerError || messageID(t, a) != "InternalError" {
			t.Fatalf("status %d body %s, want 500 InternalError", a.status, a.body)
		}
		r := s.Resets()
		if len(r) != 1 || r[0].Answer != http.StatusInternalServerError || !slices.Equal(r[0].PowerStates, []string{"On", "Off", "On"}) {
			t.Errorf("resets = %+v: the reset is applied, its answer lost", r)
		}
		if a := do(t, s, "POST", resetURI, "application/json", `{"ResetType":"PowerCycle"}`, "basic"); a.status != http.StatusNoContent {
			t.Errorf("the next reset: %d", a.status)
		}
		if r := s.Resets(); len(r) != 2 || r[1].Answer != http.StatusNoContent {
			t.Errorf("resets = %+v", r)
		}
	})
	t.Run("hang", func(t *testing.T) {
		s := redfishtest.New(t, redfishtest.Options{})
		s.ApplyThenHang(1)
		c := s.Client()
		c.Timeout = 300 * time.Millisecond
		req, err := http.NewRequestWithContext(t.Context(), "POST", s.URL+resetURI, strings.NewReader(`{"ResetType":"ForceOff"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.SetBasicAuth(s.Username, s.Password)
		if resp, err := c.Do(req); err == nil {
			resp.Body.Close()
			t.Fatalf("answered %d, want no answer", resp.StatusCode)
		}
		r := s.Resets()
		if len(r) != 1 || r[0].Answer != 0 || s.PowerState("1") != "Off" {
			t.Errorf("resets = %+v, power %s: the reset is applied, unanswered", r, s.PowerState("1"))
		}
		if reqs := s.Requests(); reqs[len(reqs)-1].Status != 0 {
			t.Errorf("requests = %+v", reqs)
		}
	})
	t.Run("fail next applies nothing", func(t *testing.T) {
		s := redfishtest.New(t, redfishtest.Options{})
		s.FailNext(1)
		if a := do(t, s, "POST", resetURI, "application/json", `{"ResetType":"PowerCycle"}`, "basic"); a.status != http.StatusServiceUnavailable {
			t.Fatalf("status %d", a.status)
		}
		if len(s.Resets()) != 0 {
			t.Errorf("resets = %+v", s.Resets())
		}
	})
}
