package redfishtest

import (
	"bytes"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Default credentials, used when Options leave them empty.
const (
	DefaultUsername = "kubemedic"
	DefaultPassword = "redfishtest-S3cret!"
)

// ResetTypes is the ResetType enum of the Resource schema (DSP8010),
// which the stand-in allows when a System does not name its own list.
var ResetTypes = []string{
	"On", "ForceOff", "GracefulShutdown", "GracefulRestart", "ForceRestart",
	"Nmi", "ForceOn", "PushPowerButton", "PowerCycle", "Suspend", "Pause", "Resume",
	"FullPowerCycle",
}

// Power states (the PowerState enum of the Resource schema) the stand-in
// uses: On and Off, and PoweringOff and PoweringOn between them while a
// reset runs (Options.PowerTransition).
const (
	PowerOn          = "On"
	PowerOff         = "Off"
	PowerPoweringOn  = "PoweringOn"
	PowerPoweringOff = "PoweringOff"
)

// The Base registry version the MessageIds name.
const baseRegistry = "Base.1.16"

// System is one ComputerSystem the stand-in serves.
type System struct {
	// ID is the resource Id, also the last segment of its URI.
	ID string
	// PowerState is the state it starts in; "" means On.
	PowerState string
	// AllowedResetTypes is what the reset action accepts and what
	// ResetType@Redfish.AllowableValues says; nil means ResetTypes.
	AllowedResetTypes []string
	// HideAllowableValues leaves the annotation out of the resource, as
	// some BMCs do; the action still accepts only AllowedResetTypes.
	HideAllowableValues bool
	// HideLastResetTime leaves LastResetTime out of the resource, as
	// BMCs older than ComputerSystem v1.12.0 do.
	HideLastResetTime bool
}

// Options configure a stand-in. The zero value serves one system "1",
// On, with every reset type allowed, over TLS, with the default
// credentials.
type Options struct {
	// Systems are the ComputerSystems served, in collection order; nil
	// means one System{ID: "1"}.
	Systems []System
	// Username and Password are the one account; "" means the defaults.
	Username, Password string
	// PlainHTTP serves http:// instead of https:// with a self-signed
	// certificate.
	PlainHTTP bool
	// Now is the clock for reset, power and session times; nil means
	// time.Now.
	Now func() time.Time
	// PowerTransition is how long, by Now, a system takes to go from On to
	// Off or back after a reset: PoweringOff (or PoweringOn) for that long,
	// then Off (or On) for that long before the next leg. Zero applies a
	// reset at once.
	PowerTransition time.Duration
}

// Reset is one reset the stand-in accepted.
type Reset struct {
	// System is the ComputerSystem Id.
	System string
	// ResetType is the ResetType as sent.
	ResetType string
	// Time is when it was accepted, by Options.Now.
	Time time.Time
	// Auth is how the request authenticated: AuthBasic or AuthSession.
	Auth string
	// PowerStates are the states the system passed through, first to
	// last: [On Off On] for a PowerCycle of a system that was On.
	PowerStates []string
	// Answer is the HTTP status the client was sent: 204, 500 when
	// ApplyThenFail lost the answer, 0 when ApplyThenHang held it.
	Answer int
}

// How a request authenticated.
const (
	AuthNone    = ""
	AuthBasic   = "Basic"
	AuthSession = "Session"
)

// Request is one HTTP request the stand-in received, answered or not.
type Request struct {
	Method, Path string
	// Auth is how it authenticated: AuthBasic, AuthSession or AuthNone
	// (none sent, or wrong).
	Auth string
	// Status is the HTTP status of the answer; 0 when it was hung up on.
	Status int
}

type system struct {
	System
	allowed []string
	// schedule is the power states to come, by time, of the reset
	// running; System.PowerState is the state shown now.
	schedule []powerStep
	// lastReset is when the system last came out of a reset (its
	// LastResetTime), or when the stand-in started.
	lastReset time.Time
}

// powerStep is a power state from a time on.
type powerStep struct {
	at    time.Time
	state string
}

// settle moves the steps due by now into PowerState (and lastReset).
func (sys *system) settle(now time.Time) {
	for len(sys.schedule) > 0 && !sys.schedule[0].at.After(now) {
		st := sys.schedule[0]
		if st.state == PowerOn && sys.PowerState != PowerOn {
			sys.lastReset = st.at
		}
		sys.PowerState = st.state
		sys.schedule = sys.schedule[1:]
	}
}

type session struct {
	id, token string
	created   time.Time
}

// Server is the stand-in. Its methods are safe for concurrent use; mu
// guards every field below it.
type Server struct {
	// URL is the base URL, without a path: https://127.0.0.1:port.
	URL string
	// Username and Password are the account it accepts.
	Username, Password string

	ts   *httptest.Server
	now  func() time.Time
	leg  time.Duration // Options.PowerTransition
	done chan struct{} // closed by Close, releases hung requests

	mu        sync.Mutex
	systems   []*system
	sessions  map[string]*session // token → session
	seq       int
	resets    []Reset
	requests  []Request
	failNext  int
	hangNext  int
	lostFail  int // ApplyThenFail
	lostHang  int // ApplyThenHang
	closeOnce sync.Once
}

// New starts a stand-in (NewServer) that stops when t ends.
func New(t testing.TB, opts Options) *Server {
	t.Helper()
	s := NewServer(opts)
	t.Cleanup(s.Close)
	return s
}

// NewServer starts a stand-in on a free 127.0.0.1 port. The caller stops
// it with Close. It panics on an Options mistake (a duplicate or empty
// system Id), as httptest does on a listen failure.
func NewServer(opts Options) *Server {
	s := &Server{
		Username: opts.Username,
		Password: opts.Password,
		now:      opts.Now,
		leg:      opts.PowerTransition,
		done:     make(chan struct{}),
		sessions: map[string]*session{},
	}
	if s.Username == "" {
		s.Username = DefaultUsername
	}
	if s.Password == "" {
		s.Password = DefaultPassword
	}
	if s.now == nil {
		s.now = time.Now
	}
	systems := opts.Systems
	if systems == nil {
		systems = []System{{ID: "1"}}
	}
	seen := map[string]bool{}
	for _, sys := range systems {
		if sys.ID == "" || strings.ContainsAny(sys.ID, "/?#") || seen[sys.ID] {
			panic(fmt.Sprintf("redfishtest: bad or duplicate system Id %q", sys.ID))
		}
		seen[sys.ID] = true
		if sys.PowerState == "" {
			sys.PowerState = PowerOn
		}
		allowed := sys.AllowedResetTypes
		if allowed == nil {
			allowed = ResetTypes
		}
		s.systems = append(s.systems, &system{System: sys, allowed: slices.Clone(allowed), lastReset: s.now()})
	}
	if opts.PlainHTTP {
		s.ts = httptest.NewServer(http.HandlerFunc(s.serveHTTP))
	} else {
		s.ts = httptest.NewTLSServer(http.HandlerFunc(s.serveHTTP))
	}
	s.URL = s.ts.URL
	return s
}

// Client is an *http.Client that trusts the stand-in's certificate.
func (s *Server) Client() *http.Client { return s.ts.Client() }

// Close stops the server: it releases hung requests, closes the listener
// and waits for the requests in flight. Closing again does nothing.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.done)
		s.ts.Close()
	})
}

// FailNext makes the next n requests, whatever they are, answer 503
// Service Unavailable with Retry-After: 1 and a ServiceTemporarilyUnavailable
// error, as a busy BMC does.
func (s *Server) FailNext(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failNext = n
}

// HangNext makes the next n requests get no answer until the client gives
// up or the server closes.
func (s *Server) HangNext(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hangNext = n
}

// ApplyThenFail makes the next n resets the stand-in accepts apply, and
// then answer 500 Internal Server Error (Base InternalError) instead of
// 204: the reset happened, its answer is lost, as when a BMC's web server
// fails after handing the action on, or a proxy in front of it does.
func (s *Server) ApplyThenFail(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lostFail = n
}

// ApplyThenHang makes the next n resets the stand-in accepts apply, and
// then give no answer until the client gives up or the server closes:
// the reset happened, and the client's timeout says only "maybe".
func (s *Server) ApplyThenHang(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lostHang = n
}

// Resets returns the resets accepted so far, oldest first.
func (s *Server) Resets() []Reset {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Reset, len(s.resets))
	for i, r := range s.resets {
		r.PowerStates = slices.Clone(r.PowerStates)
		out[i] = r
	}
	return out
}

// Requests returns every request received so far, oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// PowerState returns a system's power state now (by Options.Now), ""
// for an unknown Id.
func (s *Server) PowerState(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sys := s.system(id); sys != nil {
		return s.powerState(sys)
	}
	return ""
}

// LastResetTime returns when a system last came out of a reset, as its
// LastResetTime says (the zero time for an unknown Id).
func (s *Server) LastResetTime(id string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sys := s.system(id); sys != nil {
		sys.settle(s.now())
		return sys.lastReset
	}
	return time.Time{}
}

// SetPowerState sets a system's power state, as a person at the machine
// would, ending any reset still running. It reports false for an unknown Id.
func (s *Server) SetPowerState(id, state string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sys := s.system(id)
	if sys == nil {
		return false
	}
	sys.schedule = nil
	sys.PowerState = state
	return true
}

// powerState is sys's state now: PoweringOff or PoweringOn while a reset
// moves it; mu is held.
func (s *Server) powerState(sys *system) string {
	sys.settle(s.now())
	return sys.PowerState
}

// OpenSessions returns how many sessions are logged in.
func (s *Server) OpenSessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions)
}

func (s *Server) system(id string) *system {
	for _, sys := range s.systems {
		if sys.ID == id {
			return sys
		}
	}
	return nil
}

// response is one answer, built under mu and written after.
type response struct {
	status int
	header http.Header
	body   any // nil for no body
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	s.mu.Lock()
	auth := s.authenticate(r)
	idx := len(s.requests)
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Auth: auth})
	hang := s.hangNext > 0
	var resp *response
	switch {
	case hang:
		s.hangNext--
	case s.failNext > 0:
		s.failNext--
		resp = redfishError(http.StatusServiceUnavailable, "ServiceTemporarilyUnavailable", "1")
		resp.header.Set("Retry-After", "1")
	default:
		before := len(s.resets)
		resp = s.handle(r, auth, body)
		if applied := len(s.resets) > before; applied {
			// The reset is applied; its answer may be lost.
			switch {
			case s.lostHang > 0:
				s.lostHang--
				hang, resp = true, nil
				s.resets[before].Answer = 0
			case s.lostFail > 0:
				s.lostFail--
				resp = redfishError(http.StatusInternalServerError, "InternalError")
				s.resets[before].Answer = resp.status
			}
		}
	}
	if resp != nil {
		s.requests[idx].Status = resp.status
	}
	s.mu.Unlock()

	if hang {
		select {
		case <-r.Context().Done():
		case <-s.done:
		}
		return
	}
	for k, v := range resp.header {
		w.Header()[k] = v
	}
	w.Header().Set("OData-Version", "4.0")
	if resp.body == nil {
		w.WriteHeader(resp.status)
		return
	}
	b, err := json.Marshal(resp.body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(resp.status)
	_, _ = w.Write(b)
}

// authenticate says how r authenticated; mu is held.
func (s *Server) authenticate(r *http.Request) string {
	if tok := r.Header.Get("X-Auth-Token"); tok != "" {
		if _, ok := s.sessions[tok]; ok {
			return AuthSession
		}
		return AuthNone
	}
	if u, p, ok := r.BasicAuth(); ok && s.credentialsMatch(u, p) {
		return AuthBasic
	}
	return AuthNone
}

func (s *Server) credentialsMatch(u, p string) bool {
	uok := subtle.ConstantTimeCompare([]byte(u), []byte(s.Username)) == 1
	pok := subtle.ConstantTimeCompare([]byte(p), []byte(s.Password)) == 1
	return uok && pok
}

const (
	rootPath     = "/redfish/v1/"
	systemsPath  = "/redfish/v1/Systems"
	sessionSvc   = "/redfish/v1/SessionService"
	sessionsPath = "/redfish/v1/SessionService/Sessions"
	resetAction  = "ComputerSystem.Reset"
)

// handle answers one request; mu is held.
func (s *Server) handle(r *http.Request, auth string, body []byte) *response {
	p := r.URL.Path
	switch {
	case p == "/redfish":
		return s.allow(r, "GET", func() *response { return ok(map[string]any{"v1": rootPath}) })
	case p == rootPath || p == "/redfish/v1":
		return s.allow(r, "GET", func() *response { return ok(s.serviceRoot()) })
	case p == sessionsPath && r.Method == http.MethodPost:
		return s.login(r, body)
	}
	if auth == AuthNone {
		resp := redfishError(http.StatusUnauthorized, "NoValidSession")
		resp.header.Set("WWW-Authenticate", `Basic realm="Redfish"`)
		return resp
	}
	switch {
	case p == systemsPath:
		return s.allow(r, "GET", func() *response { return ok(s.systemCollection()) })
	case p == sessionSvc:
		return s.allow(r, "GET", func() *response { return ok(sessionService()) })
	case p == sessionsPath:
		return s.allow(r, "GET, POST", func() *response { return ok(s.sessionCollection()) })
	case strings.HasPrefix(p, sessionsPath+"/"):
		return s.sessionMember(r, strings.TrimPrefix(p, sessionsPath+"/"))
	case strings.HasPrefix(p, systemsPath+"/"):
		rest := strings.Split(strings.TrimPrefix(p, systemsPath+"/"), "/")
		sys := s.system(rest[0])
		switch {
		case len(rest) == 1 && sys == nil:
			return redfishError(http.StatusNotFound, "ResourceNotFound", "ComputerSystem", rest[0])
		case len(rest) == 1:
			return s.allow(r, "GET", func() *response { return ok(s.systemJSON(sys)) })
		case sys != nil && len(rest) == 3 && rest[1] == "Actions" && rest[2] == resetAction:
			return s.allow(r, "POST", func() *response { return s.reset(r, sys, auth, body) })
		}
	}
	return redfishError(http.StatusNotFound, "ResourceMissingAtURI", p)
}

// allow answers 405 with an Allow header unless r's method is one of
// methods (a comma-separated list); HEAD goes with GET, as DSP0266 asks.
func (s *Server) allow(r *http.Request, methods string, f func() *response) *response {
	m := r.Method
	if m == http.MethodHead {
		m = http.MethodGet
	}
	for _, a := range strings.Split(methods, ", ") {
		if a == m {
			resp := f()
			if r.Method == http.MethodHead {
				resp.body = nil
			}
			return resp
		}
	}
	allow := methods
	if strings.Contains(methods, "GET") {
		allow += ", HEAD"
	}
	resp := redfishError(http.StatusMethodNotAllowed, "OperationNotAllowed")
	resp.header.Set("Allow", allow)
	return resp
}

func ok(body any) *response {
	return &response{status: http.StatusOK, header: http.Header{}, body: body}
}

func link(path string) map[string]string { return map[string]string{"@odata.id": path} }

func (s *Server) serviceRoot() map[string]any {
	return map[string]any{
		"@odata.type":    "#ServiceRoot.v1_16_0.ServiceRoot",
		"@odata.id":      rootPath,
		"Id":             "RootService",
		"Name":           "Root Service",
		"RedfishVersion": "1.18.0",
		"UUID":           "9f0c2f5e-6b4e-4a5e-9d2f-6b1d5e0c7a11",
		"Systems":        link(systemsPath),
		"SessionService": link(sessionSvc),
		"Links":          map[string]any{"Sessions": link(sessionsPath)},
	}
}

func (s *Server) systemCollection() map[string]any {
	members := make([]map[string]string, 0, len(s.systems))
	for _, sys := range s.systems {
		members = append(members, link(systemsPath+"/"+sys.ID))
	}
	return map[string]any{
		"@odata.type":         "#ComputerSystemCollection.ComputerSystemCollection",
		"@odata.id":           systemsPath,
		"Name":                "Computer System Collection",
		"Members@odata.count": len(members),
		"Members":             members,
	}
}

// systemJSON is the ComputerSystem resource; mu is held.
func (s *Server) systemJSON(sys *system) map[string]any {
	uri := systemsPath + "/" + sys.ID
	reset := map[string]any{"target": uri + "/Actions/" + resetAction}
	if !sys.HideAllowableValues {
		reset["ResetType@Redfish.AllowableValues"] = sys.allowed
	}
	power := s.powerState(sys)
	state := "Enabled" // Resource.State
	switch power {
	case PowerOff:
		state = "StandbyOffline"
	case PowerPoweringOn:
		state = "Starting"
	}
	out := map[string]any{
		"@odata.type": "#ComputerSystem.v1_22_0.ComputerSystem",
		"@odata.id":   uri,
		"Id":          sys.ID,
		"Name":        "System " + sys.ID,
		"SystemType":  "Physical",
		"PowerState":  power,
		"Status":      map[string]string{"State": state, "Health": "OK"},
		"Actions":     map[string]any{"#" + resetAction: reset},
	}
	if !sys.HideLastResetTime {
		out["LastResetTime"] = sys.lastReset.UTC().Format(time.RFC3339)
	}
	return out
}

// isJSON reports whether a Content-Type is application/json, parameters
// (charset) allowed.
func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}

// decodeObject decodes a JSON object body, keeping each value raw.
func decodeObject(body []byte) (map[string]json.RawMessage, bool) {
	var obj map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&obj); err != nil || obj == nil {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false // trailing data
	}
	return obj, true
}

// reset runs the ComputerSystem.Reset action; mu is held.
func (s *Server) reset(r *http.Request, sys *system, auth string, body []byte) *response {
	if !isJSON(r.Header.Get("Content-Type")) {
		return redfishError(http.StatusUnsupportedMediaType, "UnrecognizedRequestBody")
	}
	params, valid := decodeObject(body)
	if !valid {
		return redfishError(http.StatusBadRequest, "MalformedJSON")
	}
	for name := range params {
		if name != "ResetType" {
			return redfishError(http.StatusBadRequest, "ActionParameterUnknown", resetAction, name)
		}
	}
	raw, present := params["ResetType"]
	if !present {
		return redfishError(http.StatusBadRequest, "ActionParameterMissing", resetAction, "ResetType")
	}
	var resetType string
	if err := json.Unmarshal(raw, &resetType); err != nil {
		return redfishError(http.StatusBadRequest, "ActionParameterValueTypeError", string(raw), "ResetType", resetAction)
	}
	if !slices.Contains(sys.allowed, resetType) {
		return redfishError(http.StatusBadRequest, "ActionParameterValueNotInList", resetType, "ResetType", resetAction)
	}
	now := s.now()
	states := []string{s.powerState(sys)}
	switch resetType {
	case "On", "ForceOn":
		states = append(states, PowerOn)
	case "ForceOff", "GracefulShutdown":
		states = append(states, PowerOff)
	case "PowerCycle", "FullPowerCycle", "ForceRestart", "GracefulRestart":
		if sys.PowerState == PowerOn {
			states = append(states, PowerOff)
		}
		states = append(states, PowerOn)
	case "PushPowerButton":
		if sys.PowerState == PowerOn {
			states = append(states, PowerOff)
		} else {
			states = append(states, PowerOn)
		}
	}
	states = slices.Compact(states)
	// A reset while another runs starts from where that one is. Each leg
	// shows PoweringOff (or PoweringOn) for s.leg, then Off (or On), which
	// holds for s.leg before the next leg starts; with no s.leg, all at
	// once.
	sys.schedule = nil
	for i, next := range states[1:] {
		start := now.Add(time.Duration(2*i) * s.leg)
		moving := PowerPoweringOff
		if next == PowerOn {
			moving = PowerPoweringOn
		}
		sys.schedule = append(sys.schedule, powerStep{at: start, state: moving}, powerStep{at: start.Add(s.leg), state: next})
	}
	sys.settle(now)
	s.resets = append(s.resets, Reset{
		System: sys.ID, ResetType: resetType, Time: now, Auth: auth, PowerStates: states, Answer: http.StatusNoContent,
	})
	return &response{status: http.StatusNoContent, header: http.Header{}}
}

func sessionService() map[string]any {
	return map[string]any{
		"@odata.type":    "#SessionService.v1_1_9.SessionService",
		"@odata.id":      sessionSvc,
		"Id":             "SessionService",
		"Name":           "Session Service",
		"ServiceEnabled": true,
		"SessionTimeout": 1800,
		"Sessions":       link(sessionsPath),
	}
}

func (s *Server) sessionCollection() map[string]any {
	members := make([]map[string]string, 0, len(s.sessions))
	for _, se := range s.sortedSessions() {
		members = append(members, link(sessionsPath+"/"+se.id))
	}
	return map[string]any{
		"@odata.type":         "#SessionCollection.SessionCollection",
		"@odata.id":           sessionsPath,
		"Name":                "Session Collection",
		"Members@odata.count": len(members),
		"Members":             members,
	}
}

func (s *Server) sortedSessions() []*session {
	out := make([]*session, 0, len(s.sessions))
	for _, se := range s.sessions {
		out = append(out, se)
	}
	slices.SortFunc(out, func(a, b *session) int { return strings.Compare(a.id, b.id) })
	return out
}

func (s *Server) sessionJSON(se *session) map[string]any {
	return map[string]any{
		"@odata.type": "#Session.v1_7_0.Session",
		"@odata.id":   sessionsPath + "/" + se.id,
		"Id":          se.id,
		"Name":        "User Session",
		"UserName":    s.Username,
		"CreatedTime": se.created.UTC().Format(time.RFC3339),
	}
}

// login creates a session (DSP0266 Session login): 201 with X-Auth-Token
// and Location headers; mu is held.
func (s *Server) login(r *http.Request, body []byte) *response {
	if !isJSON(r.Header.Get("Content-Type")) {
		return redfishError(http.StatusUnsupportedMediaType, "UnrecognizedRequestBody")
	}
	var creds struct {
		UserName *string
		Password *string
	}
	if _, valid := decodeObject(body); !valid || json.Unmarshal(body, &creds) != nil {
		return redfishError(http.StatusBadRequest, "MalformedJSON")
	}
	switch {
	case creds.UserName == nil:
		return redfishError(http.StatusBadRequest, "PropertyMissing", "UserName")
	case creds.Password == nil:
		return redfishError(http.StatusBadRequest, "PropertyMissing", "Password")
	case !s.credentialsMatch(*creds.UserName, *creds.Password):
		resp := redfishError(http.StatusUnauthorized, "NoValidSession")
		resp.header.Set("WWW-Authenticate", `Basic realm="Redfish"`)
		return resp
	}
	s.seq++
	se := &session{id: strconv.Itoa(s.seq), token: randomToken(), created: s.now()}
	s.sessions[se.token] = se
	resp := &response{status: http.StatusCreated, header: http.Header{}, body: s.sessionJSON(se)}
	resp.header.Set("X-Auth-Token", se.token)
	resp.header.Set("Location", sessionsPath+"/"+se.id)
	return resp
}

// sessionMember serves GET and DELETE of one session; mu is held.
func (s *Server) sessionMember(r *http.Request, id string) *response {
	var found *session
	for _, se := range s.sessions {
		if se.id == id {
			found = se
		}
	}
	if found == nil || strings.Contains(id, "/") {
		return redfishError(http.StatusNotFound, "ResourceNotFound", "Session", id)
	}
	if r.Method == http.MethodDelete {
		delete(s.sessions, found.token)
		return &response{status: http.StatusNoContent, header: http.Header{}}
	}
	return s.allow(r, "GET, DELETE", func() *response { return ok(s.sessionJSON(found)) })
}

func randomToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// A Base registry message: its text with %1… placeholders, severity and
// resolution (DSP8011 Base message registry).
type baseMessage struct {
	text       string
	severity   string
	resolution string
}

var baseMessages = map[string]baseMessage{
	"NoValidSession": {"There is no valid session established with the implementation.", "Critical",
		"Establish a session before attempting any operations."},
	"ResourceNotFound": {"The requested resource of type %1 named '%2' was not found.", "Critical",
		"Provide a valid resource identifier and resubmit the request."},
	"ResourceMissingAtURI": {"The resource at the URI '%1' was not found.", "Critical",
		"Place a valid resource at the URI or correct the URI and resubmit the request."},
	"OperationNotAllowed": {"The HTTP method is not allowed on this resource.", "Critical",
		"None."},
	"UnrecognizedRequestBody": {"The service detected a malformed request body that it was unable to interpret.", "Warning",
		"Correct the request body and resubmit the request if it failed."},
	"MalformedJSON": {"The request body submitted was malformed JSON and could not be parsed by the receiving service.", "Critical",
		"Ensure that the request body is valid JSON and resubmit the request."},
	"ActionParameterUnknown": {"The action %1 was submitted with the invalid parameter %2.", "Warning",
		"Correct the invalid parameter and resubmit the request if the operation failed."},
	"ActionParameterMissing": {"The action %1 requires the parameter %2 to be present in the request body.", "Critical",
		"Supply the action with the required parameter in the request body when the request is resubmitted."},
	"ActionParameterValueTypeError": {"The value '%1' for the parameter %2 in the action %3 is of a different type than the parameter can accept.", "Warning",
		"Correct the value for the parameter in the request body and resubmit the request if the operation failed."},
	"ActionParameterValueNotInList": {"The value '%1' for the parameter %2 in the action %3 is not in the list of acceptable values.", "Warning",
		"Choose a value from the enumeration list that the implementation can support and resubmit the request if the operation failed."},
	"PropertyMissing": {"The property %1 is a required property and must be included in the request.", "Warning",
		"Ensure that the property is in the request body and has a valid value and resubmit the request if the operation failed."},
	"ServiceTemporarilyUnavailable": {"The service is temporarily unavailable.  Retry in %1 seconds.", "Critical",
		"Wait for the indicated retry duration and retry the operation."},
	"InternalError": {"The request failed due to an internal service error.  The service is still operational.", "Critical",
		"Resubmit the request.  If the problem persists, consider resetting the service."},
}

// redfishError is a DSP0266 error response carrying one Base message.
func redfishError(status int, id string, args ...string) *response {
	m, known := baseMessages[id]
	if !known {
		panic("redfishtest: unknown message " + id)
	}
	text := m.text
	for i, a := range args {
		text = strings.ReplaceAll(text, "%"+strconv.Itoa(i+1), a)
	}
	if args == nil {
		args = []string{}
	}
	msgID := baseRegistry + "." + id
	return &response{status: status, header: http.Header{}, body: map[string]any{
		"error": map[string]any{
			"code":    msgID,
			"message": text,
			"@Message.ExtendedInfo": []map[string]any{{
				"@odata.type":     "#Message.v1_2_0.Message",
				"MessageId":       msgID,
				"Message":         text,
				"MessageArgs":     args,
				"MessageSeverity": m.severity,
				"Resolution":      m.resolution,
			}},
		},
	}}
}
