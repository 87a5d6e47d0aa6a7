// Package strictyaml reads YAML that people write by hand (the alertbridge
// config, policy files) strictly and says precisely what is wrong: every
// unknown field, duplicate key, merge key and value of the wrong type is an
// error that names the file, the line and the field path, printed as
// FILE:LINE: FIELD: PROBLEM, and all of them are reported at once rather
// than only the first.
//
// Two ways to walk a document share one set of checks: a hand-written
// decoder asks for the fields of each mapping (Fields) and for typed scalars
// (String, Bool, Int, Seq); a decoder of Go API types checks a document
// against the type (Shape), as a strict JSON decode into it would, before
// decoding it.
//
// The package words its problems one way for every file, so that the same
// mistake reads the same in any of them:
//
//	not valid YAML: did not find expected node content
//	unknown field "timeOut" (did you mean "timeout"?)
//	unknown field "slack"; known fields: defaultRepo, identityLabel, ...
//	duplicate field; first set on line 3   (the fields of an object)
//	duplicate key; first set on line 3     (the keys of a map)
//	must be true or false, got "maybe"
//	must be a string, got the number 42 (quote it)
//	integer 300 out of range
//	merge keys (<<) are not supported; write the fields out
//
// Callers word the problems only they can see (a bad matcher, a duration)
// in the same "must be ..., got ..." form, with Describe for the "got".
//
// What it must never do: accept a field the caller does not know, take the
// last of two equal keys, expand a merge key (<<), coerce one scalar type
// into another, report a problem without its line, or panic on any input.
package strictyaml
