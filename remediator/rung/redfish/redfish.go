package redfish

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/schemas"
)

// Reset types Reset accepts, from the ResetType enum of the Redfish
// Resource schema.
const (
	// PowerCycle removes power and restores it; the default.
	PowerCycle = "PowerCycle"
	// ForceRestart shuts down immediately and non-gracefully, then restarts.
	ForceRestart = "ForceRestart"
	// GracefulRestart shuts the operating system down, then restarts.
	GracefulRestart = "GracefulRestart"
)

// ResetTypes are the reset types Reset accepts, the default first.
var ResetTypes = []string{PowerCycle, ForceRestart, GracefulRestart}

// DefaultTimeout bounds a Reset whose Request.Timeout is 0.
const DefaultTimeout = 30 * time.Second

// Request is one reset of one ComputerSystem.
type Request struct {
	// Endpoint is the BMC's base URL, https://host[:port] or
	// http://host[:port], with no path, query or credentials.
	Endpoint string
	// Username and Password are the BMC account's; sent only in the
	// Authorization header.
	Username, Password string
	// System is the ComputerSystem Id; "" means the BMC's only system.
	System string
	// ResetType is one of ResetTypes; "" means PowerCycle.
	ResetType string
	// InsecureSkipVerify accepts any certificate the BMC presents.
	InsecureSkipVerify bool
	// Timeout bounds the whole Reset; 0 means DefaultTimeout.
	Timeout time.Duration
}

// Result describes what was asked, for the NodeOperation's status and
// Events. It never contains credentials.
type Result struct {
	// Target is the ComputerSystem's URL, e.g.
	// https://10.0.0.5/redfish/v1/Systems/1; the endpoint alone until the
	// system is known.
	Target string
	// Action is what was posted, e.g. "ComputerSystem.Reset ResetType=PowerCycle".
	Action string
}

// Error is the error Reset returns. Its text names the endpoint, the
// system and the step that failed, with what the BMC said scrubbed of the
// credentials.
type Error struct {
	// Endpoint is the BMC's scheme://host[:port].
	Endpoint string
	// System is the System asked for ("" for the only one).
	System string
	// Step is what was being done: "parse request", "read service root",
	// "list systems", "choose system", "read system", "check reset type",
	// "post reset".
	Step string
	// StatusCode is the BMC's HTTP status, 0 when it gave none.
	StatusCode int

	permanent bool
	detail    string
	// what is "reset" (Reset) or "read" (Inspect).
	what string
	// cause is kept only when its text cannot carry anything from the
	// BMC or the credentials: a context error.
	cause error
}

func (e *Error) Error() string {
	sys := e.System
	if sys == "" {
		sys = "(the only one)"
	}
	what := e.what
	if what == "" {
		what = "reset"
	}
	return fmt.Sprintf("redfish %s of system %s at %s: %s: %s", what, sys, e.Endpoint, e.Step, e.detail)
}

// Unwrap returns the context error behind a timeout or cancellation, and
// nil otherwise: the BMC's own error is not kept, because its text may
// echo what was sent.
func (e *Error) Unwrap() error { return e.cause }

// Permanent reports whether err will not go away by retrying: a bad
// request (endpoint, reset type, credentials missing), 401 or 403, an
// unknown system, a reset type the system does not allow, another 4xx but
// 408, 409, 425 and 429, 501, a redirect (never followed), or a
// certificate the client does not trust.
// Network errors, timeouts, 5xx (503 included) and unreadable answers are
// not permanent.
func Permanent(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.permanent
}

// Reset asks the BMC at r.Endpoint to reset r.System with r.ResetType. It
// returns when the BMC has accepted the request (2xx), not when the
// machine is back. An error may still mean the BMC applied the reset
// (a 5xx or a timeout after the POST was sent: see Sent).
func Reset(ctx context.Context, r Request) (Result, error) {
	resetType := r.ResetType
	if resetType == "" {
		resetType = PowerCycle
	}
	c, base, err := newCall(r, "reset")
	if err != nil {
		return Result{}, err
	}
	res := Result{Target: base, Action: "ComputerSystem.Reset ResetType=" + resetType}
	if !slices.Contains(ResetTypes, resetType) {
		return res, c.permanentf("parse request", "reset type %q is not one of %s", resetType, strings.Join(ResetTypes, ", "))
	}
	if r.Username == "" {
		return res, c.permanentf("parse request", "no username")
	}
	ctx, cancel := c.bound(ctx)
	defer cancel()
	client, sys, err := c.findSystem(ctx, &res.Target)
	if err != nil {
		return res, err
	}
	// With Basic auth there is no session to delete; Logout then only
	// closes the connections. Its context falls back to Background when
	// ctx is done, and the http.Client's Timeout still bounds it.
	defer client.Logout()
	if !hasResetTarget(sys.RawData) {
		return res, c.permanentf("read system", "the system has no #ComputerSystem.Reset action")
	}
	allowed, err := sys.GetSupportedResetTypes()
	if err != nil {
		return res, c.fail("check reset type", err)
	}
	if len(allowed) > 0 && !slices.Contains(allowed, schemas.ResetType(resetType)) {
		names := make([]string, len(allowed))
		for i, a := range allowed {
			names[i] = string(a)
		}
		return res, c.permanentf("check reset type", "reset type %s is not allowed by the system; it allows %s",
			resetType, strings.Join(names, ", "))
	}
	if _, err := sys.Reset(schemas.ResetType(resetType)); err != nil {
		return res, c.fail(stepPost, err)
	}
	return res, nil
}

// stepPost is the step of an Error whose request reached the BMC's reset
// action, or may have.
const stepPost = "post reset"

// Sent reports whether a failed Reset may have reached the BMC's reset
// action, so that the BMC may have applied it: an error from the POST
// itself (a 5xx, a timeout, a connection lost) or one that is not an
// *Error. An error at an earlier step (the service root, the system, the
// reset type) means nothing was posted.
func Sent(err error) bool {
	var e *Error
	return !errors.As(err, &e) || e.Step == stepPost
}

// Power states of a ComputerSystem, from the PowerState enum of the
// Redfish Resource schema (DSP8010); Paused is its fifth value.
const (
	PowerOn          = "On"
	PowerOff         = "Off"
	PowerPoweringOn  = "PoweringOn"
	PowerPoweringOff = "PoweringOff"
)

// SystemState is what a BMC says of one ComputerSystem's power: the
// evidence of whether a reset whose answer was lost was applied.
type SystemState struct {
	// Target is the ComputerSystem's URL, as in Result.
	Target string
	// PowerState is the system's PowerState as the BMC sent it (On, Off,
	// PoweringOn, PoweringOff or Paused); "" when it sent none.
	PowerState string
	// LastResetTime is the system's LastResetTime (ComputerSystem
	// v1.12.0 on: when it last came out of a reset or was rebooted) as
	// the BMC sent it; "" when it sent none, as older BMCs do.
	LastResetTime string
}

// Inspect reads r.System's power state from the BMC at r.Endpoint, the
// same way Reset finds the system, and changes nothing. r.ResetType is
// not used. Its errors are classified and scrubbed as Reset's are.
func Inspect(ctx context.Context, r Request) (SystemState, error) {
	c, base, err := newCall(r, "read")
	if err != nil {
		return SystemState{}, err
	}
	st := SystemState{Target: base}
	if r.Username == "" {
		return st, c.permanentf("parse request", "no username")
	}
	ctx, cancel := c.bound(ctx)
	defer cancel()
	client, sys, err := c.findSystem(ctx, &st.Target)
	if err != nil {
		return st, err
	}
	defer client.Logout()
	st.PowerState, st.LastResetTime = string(sys.PowerState), sys.LastResetTime
	return st, nil
}

// newCall checks r's endpoint; what is "reset" or "read", for errors.
func newCall(r Request, what string) (*call, string, error) {
	c := &call{req: r, what: what}
	base, err := parseEndpoint(r.Endpoint)
	c.endpoint = base
	if err != nil {
		c.endpoint = "(bad endpoint)"
		return c, "", c.permanentf("parse request", "%v", err)
	}
	return c, base, nil
}

// bound bounds ctx by the request's timeout.
func (c *call) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	c.timeout = c.req.Timeout
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	c.ctx = ctx
	return ctx, cancel
}

// findSystem connects and walks to the requested ComputerSystem: the
// service root, its Systems link, the collection, the member. It sets
// *target to the system's URL once known. The caller logs the client out.
func (c *call) findSystem(ctx context.Context, target *string) (*gofish.APIClient, *schemas.ComputerSystem, error) {
	client, err := gofish.ConnectContext(ctx, gofish.ClientConfig{
		Endpoint:          c.endpoint,
		Username:          c.req.Username,
		Password:          c.req.Password,
		BasicAuth:         true,
		HTTPClient:        httpClient(c.req.InsecureSkipVerify, c.timeout),
		NoModifyTransport: true,
		ReuseConnections:  true,
	})
	if err != nil {
		return nil, nil, c.fail("read service root", err)
	}
	fail := func(err error) (*gofish.APIClient, *schemas.ComputerSystem, error) {
		client.Logout()
		return nil, nil, err
	}
	systemsURI, err := c.systemsLink(client)
	if err != nil {
		return fail(err)
	}
	coll, err := schemas.GetCollection(client, systemsURI)
	if err != nil {
		return fail(c.fail("list systems", err))
	}
	link, err := c.choose(coll.ItemLinks)
	if err != nil {
		return fail(err)
	}
	*target = c.endpoint + link
	sys, err := schemas.GetObject[schemas.ComputerSystem](client, link)
	if err != nil {
		return fail(c.fail("read system", err))
	}
	if sys.ODataID != "" {
		*target = c.endpoint + sys.ODataID
	}
	return client, sys, nil
}

// parseEndpoint checks a base URL and returns scheme://host[:port].
func parseEndpoint(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil {
		// url.Error quotes the input; the input is not a secret, but say
		// only what is wrong with it.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return "", fmt.Errorf("endpoint is not a URL: %v", err)
	}
	switch {
	case u.Scheme != "https" && u.Scheme != "http":
		return "", errors.New("endpoint must start with https:// or http://")
	case u.User != nil:
		return "", errors.New("endpoint must not carry credentials; set Username and Password")
	case u.Host == "" || u.Hostname() == "":
		return "", errors.New("endpoint has no host")
	case u.Path != "" && u.Path != "/", u.RawQuery != "", u.Fragment != "", u.Opaque != "":
		return "", errors.New("endpoint must be the BMC's base URL, with no path, query or fragment")
	}
	return u.Scheme + "://" + u.Host, nil
}

func httpClient(insecure bool, timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			TLSClientConfig:     &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: insecure}, //nolint:gosec // the caller's choice, for self-signed BMC certificates
			TLSHandshakeTimeout: min(timeout, 10*time.Second),
			MaxIdleConnsPerHost: 1,
			IdleConnTimeout:     timeout,
		},
		// A BMC never needs redirects for these requests; following one
		// would resend Basic credentials to wherever it points.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

func hasResetTarget(raw []byte) bool {
	var v struct {
		Actions struct {
			Reset struct {
				Target string `json:"target"`
			} `json:"#ComputerSystem.Reset"`
		}
	}
	return json.Unmarshal(raw, &v) == nil && v.Actions.Reset.Target != ""
}

// call carries one Reset's context for its errors.
type call struct {
	ctx      context.Context
	timeout  time.Duration
	req      Request
	endpoint string
	what     string
}

func (c *call) newError(step, detail string, status int, permanent bool) *Error {
	return &Error{
		Endpoint:   c.endpoint,
		System:     c.req.System,
		Step:       step,
		StatusCode: status,
		permanent:  permanent,
		detail:     scrub(detail, c.req.Password, ""),
		what:       c.what,
	}
}

func (c *call) permanentf(step, format string, args ...any) *Error {
	return c.newError(step, fmt.Sprintf(format, args...), 0, true)
}

// systemsLink reads the service root's Systems link.
func (c *call) systemsLink(client *gofish.APIClient) (string, error) {
	resp, err := client.Get(schemas.DefaultServiceRoot)
	if err != nil {
		return "", c.fail("read service root", err)
	}
	defer schemas.DeferredCleanupHTTPResponse(resp)
	var root struct {
		Systems struct {
			ID string `json:"@odata.id"`
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&root); err != nil {
		return "", c.fail("read service root", err)
	}
	if root.Systems.ID == "" {
		return "", c.permanentf("read service root", "the service root has no Systems link")
	}
	return root.Systems.ID, nil
}

// choose picks the member link for the requested system.
func (c *call) choose(links []string) (string, error) {
	ids := make([]string, len(links))
	for i, l := range links {
		id := path.Base(strings.TrimSuffix(l, "/"))
		if u, err := url.PathUnescape(id); err == nil {
			id = u
		}
		ids[i] = id
	}
	list := func() string {
		if len(ids) == 0 {
			return "none"
		}
		return strings.Join(ids, ", ")
	}
	want := c.req.System
	if want == "" {
		if len(links) != 1 {
			return "", c.permanentf("choose system", "no system named and the BMC has %d (Ids: %s); set the system Id", len(links), list())
		}
		return links[0], nil
	}
	for i, id := range ids {
		if id == want {
			return links[i], nil
		}
	}
	return "", c.permanentf("choose system", "the BMC has no system %q (Ids: %s)", want, list())
}

// fail turns an error from gofish or the transport into an *Error,
// classifying it and scrubbing what the BMC said.
func (c *call) fail(step string, err error) *Error {
	if ctxErr := c.ctx.Err(); ctxErr != nil {
		e := c.newError(step, fmt.Sprintf("gave up (timeout %v): %v", c.timeout, ctxErr), 0, false)
		e.cause = ctxErr
		return e
	}
	var re *schemas.Error
	if errors.As(err, &re) && re.HTTPReturnedStatusCode != 0 {
		status := re.HTTPReturnedStatusCode
		e := c.newError(step, scrub(describe(re), c.req.Password, c.req.Username), status, permanentStatus(status))
		return e
	}
	var certErr *tls.CertificateVerificationError
	var unknownAuth x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var invalid x509.CertificateInvalidError
	if errors.As(err, &certErr) || errors.As(err, &unknownAuth) || errors.As(err, &hostErr) || errors.As(err, &invalid) {
		return c.newError(step, scrub("TLS: "+err.Error(), c.req.Password, c.req.Username)+
			" (trust the BMC's CA or set InsecureSkipVerify)", 0, true)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		e := c.newError(step, scrub(err.Error(), c.req.Password, c.req.Username), 0, false)
		e.cause = context.DeadlineExceeded
		if errors.Is(err, context.Canceled) {
			e.cause = context.Canceled
		}
		return e
	}
	return c.newError(step, scrub(err.Error(), c.req.Password, c.req.Username), 0, false)
}

// permanentStatus says which HTTP statuses retrying will not change.
func permanentStatus(status int) bool {
	switch status {
	case http.StatusRequestTimeout, http.StatusConflict, http.StatusTooEarly, http.StatusTooManyRequests:
		return false
	case http.StatusNotImplemented:
		return true
	}
	// 3xx: redirects are not followed (they would carry the credentials
	// elsewhere), so the endpoint needs changing.
	return status >= 300 && status < 500
}

// describe renders a Redfish error response (DSP0266 "error" object):
// status, code and message, and each extended message that says more,
// bounded.
func describe(re *schemas.Error) string {
	status := re.HTTPReturnedStatusCode
	parts := []string{fmt.Sprintf("HTTP %d %s", status, http.StatusText(status))}
	if m := message(re.Code, re.Message); m != "" {
		parts = append(parts, m)
	}
	shown := 0
	for _, m := range re.ExtendedInfos {
		if m.MessageID == re.Code && m.Message == re.Message {
			continue // the same as the code and message
		}
		if shown == 4 {
			parts = append(parts, "…")
			break
		}
		if text := message(m.MessageID, m.Message); text != "" {
			parts = append(parts, text)
			shown++
		}
	}
	return strings.Join(parts, ": ")
}

// message renders a MessageId and its text as "Id (text)".
func message(id, text string) string {
	text = clip(text, 300)
	switch {
	case id != "" && text != "":
		return id + " (" + text + ")"
	case id != "":
		return id
	}
	return text
}

// clip collapses whitespace and bounds s to n bytes.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n] + "…"
	}
	return s
}

// scrub removes secrets from s: each non-empty one becomes [redacted].
func scrub(s string, secrets ...string) string {
	for _, sec := range secrets {
		if sec != "" {
			s = strings.ReplaceAll(s, sec, "[redacted]")
		}
	}
	return s
}
