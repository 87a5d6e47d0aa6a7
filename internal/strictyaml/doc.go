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
// decoding it. The words of the messages belong to the caller (Wording),
// so each file format keeps the messages its users and documentation know.
//
// What it must never do: accept a field the caller does not know, take the
// last of two equal keys, expand a merge key (<<), coerce one scalar type
// into another, report a problem without its line, or panic on any input.
package strictyaml
