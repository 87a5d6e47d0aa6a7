// Package redfishtest is a stand-in for a BMC's Redfish service: tests of
// the Redfish rung (package redfish) and of the remediator that calls it
// power-cycle its ComputerSystems. It keeps everything in memory and talks
// to nothing else.
//
// It serves the part of the Redfish API (DMTF DSP0266, schemas DSP8010,
// Base message registry DSP8011) that a reset needs:
//
//	GET    /redfish                                          version object, unauthenticated
//	GET    /redfish/v1/ (and /redfish/v1)                    ServiceRoot, unauthenticated
//	GET    /redfish/v1/Systems                               ComputerSystemCollection
//	GET    /redfish/v1/Systems/{id}                          ComputerSystem
//	POST   /redfish/v1/Systems/{id}/Actions/ComputerSystem.Reset
//	GET    /redfish/v1/SessionService                        SessionService
//	GET    /redfish/v1/SessionService/Sessions               SessionCollection
//	POST   /redfish/v1/SessionService/Sessions               login, unauthenticated
//	GET    /redfish/v1/SessionService/Sessions/{id}          Session
//	DELETE /redfish/v1/SessionService/Sessions/{id}          logout
//
// It is never more lenient than a BMC where a client could come to depend
// on it:
//
//   - Everything but the service root, the version object and the login
//     POST needs HTTP Basic credentials or a session's X-Auth-Token, as
//     DSP0266's Authentication section requires of every service (both
//     schemes are mandatory there); without them the answer is 401 with
//     WWW-Authenticate and a Base NoValidSession error. It is served over
//     TLS (a self-signed certificate) unless Options.PlainHTTP says not,
//     as DSP0266 requires TLS for Basic authentication and login.
//   - Errors are the DSP0266 error response: {"error": {"code", "message",
//     "@Message.ExtendedInfo": [Message]}}, with Base registry MessageIds.
//   - A URI it does not serve is 404 (ResourceMissingAtURI), an unknown
//     system 404 (ResourceNotFound); a method a URI does not support is 405
//     with an Allow header (OperationNotAllowed), so GET on the action URI
//     is 405 with Allow: POST.
//   - An action POST needs Content-Type application/json (DSP0266 request
//     headers: Content-Type is required on requests with a body and
//     application/json is the media type of the protocol; 415 Unsupported
//     Media Type otherwise, UnrecognizedRequestBody). bmcweb (OpenBMC)
//     answers 400 there instead; both are permanent client errors.
//   - The action body must be a JSON object (400 MalformedJSON), carry
//     ResetType (400 ActionParameterMissing) as a string (400
//     ActionParameterValueTypeError) in the system's allowed list (400
//     ActionParameterValueNotInList) and nothing else (400
//     ActionParameterUnknown). A rejected request changes nothing.
//   - Success is 204 No Content with no body: DSP0266's POST (action)
//     rules let a service answer 200 with a body, 202 with a task monitor
//     or 204 when it returns nothing; a reset returns nothing.
//
// A system's power state follows the resets it accepts: a PowerCycle,
// ForceRestart or GracefulRestart of a system that is On passes through
// Off and ends On; On turns it on, ForceOff and GracefulShutdown off; each
// accepted Reset records the states it passed through. GET of the system
// shows PowerState as it is at that moment by Options.Now: with
// Options.PowerTransition each leg of a reset shows PoweringOff (or
// PoweringOn) and then Off (or On) for that long, as a BMC does while the
// machine loses and regains power; without it a reset is applied at once.
// LastResetTime (ComputerSystem v1.12.0) is when the system last came on
// after a reset, unless System.HideLastResetTime leaves it out as older
// BMCs do. It is simpler than a BMC in one way: a reset that would not
// change the state (On when On) is accepted as a no-op where some BMCs
// answer 409.
//
// Tests drive faults with FailNext (503 with Retry-After, as a busy BMC
// answers, nothing applied), HangNext (no answer until the client gives
// up, nothing applied), and ApplyThenFail and ApplyThenHang, which lose
// the answer to a reset the stand-in did apply (500, or none until the
// client gives up): "maybe done" is a real answer. They read back Resets
// (each with the answer sent), PowerState, LastResetTime, OpenSessions
// and Requests.
//
// NewServer starts one for a program, which stops it with Close; New
// starts one for a test and stops it when the test ends.
package redfishtest
