// Package policies loads, defaults and validates kubemedic policy files: the
// multi-document YAML that ops write and `kubemedic policy validate` checks.
//
// Decoding is strict (unknown fields, duplicate keys and wrong types are
// errors) and every Problem names the file, the line and the field path.
// Validate is pure: it needs no cluster and is shared by the CLI and the
// controllers, and it checks what the CRDs' OpenAPI schema and CEL rules
// cannot (regexes that must compile, time zones, references between objects).
// The package must never talk to an API server.
package policies
