// Package redfish is the last rung of the remediation ladder: it asks a
// machine's BMC, over the DMTF Redfish API, to reset one ComputerSystem
// (PowerCycle by default, or ForceRestart or GracefulRestart). Reset does
// one reset and says what it asked (Result) or why it could not (an error
// that Permanent classifies for the caller's retry decision). It never
// retries, never waits for the machine to come back and never reads or
// writes Kubernetes objects: the remediator controller owns those.
//
// A reset's answer can be lost after the BMC applied it (a 5xx, or a
// timeout after the POST): Sent says whether an error may be such a
// "maybe done", and Inspect reads the system's PowerState and
// LastResetTime (ComputerSystem v1.12.0), the BMC's evidence of whether
// it was. Inspect changes nothing; the decision to ask again is the
// caller's (package plan, ResetVerdict).
//
// Every call walks the service the way DSP0266 describes it: the service
// root (unauthenticated), its Systems link, the collection's members, the
// chosen ComputerSystem, and the target of its #ComputerSystem.Reset
// action. When the system declares the reset types it takes
// (ResetType@Redfish.AllowableValues, or the action's @Redfish.ActionInfo),
// a type not among them is a permanent error naming those it takes; Reset
// never substitutes another type. A system is chosen by Id, taken to be
// the last segment of its collection member URI, as DSP0266 requires of
// member URIs (collection URI, "/", Id).
//
// It must never put credentials anywhere but the Authorization header:
// errors and Results never contain the username or password (any text the
// BMC sends back is scrubbed of both), and errors wrap no BMC error whose
// text could carry them.
//
// # Why gofish
//
// The HTTP and schema work is github.com/stmcginnis/gofish: Apache-2.0,
// the de facto Go Redfish client (the bmclib/Metal3 and Tinkerbell
// ecosystem use it), with types generated from the DMTF Redfish schemas,
// so a ComputerSystem's reset target, AllowableValues and ActionInfo are
// decoded as the schema defines them instead of by hand. It has no
// dependencies outside the standard library. Version v0.22.0 is the one
// pinned; it builds with the Go this module uses.
//
// # Why Basic authentication
//
// Reset uses HTTP Basic authentication (gofish ClientConfig.BasicAuth)
// rather than a Redfish session. DSP0266 requires services to support
// both, and a single reset gains nothing from a session: Basic needs no
// login POST and leaves nothing behind on the BMC if the process dies or
// the logout fails, where a leaked session counts against the BMC's small
// session limit (often 4 to 16) until it times out. Reset still defers
// gofish's Logout, which deletes a session when one exists and closes the
// connections. A BMC whose administrator turned Basic off answers 401,
// which is permanent: Reset does not then try a session login, because a
// wrong password would count twice against the account's lockout. Requests
// go over TLS unless the endpoint says http://; InsecureSkipVerify is for
// BMCs with self-signed certificates. Redirects are not followed, so the
// credentials go only to the endpoint named.
//
// Package redfishtest is a Redfish stand-in for tests of this package and
// of its callers.
package redfish
