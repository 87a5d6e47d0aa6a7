// Package cmd holds one main package per binary, each thin: flags and
// wiring. This package itself has no code; its test (deps_test.go) keeps
// each binary's dependencies to its job.
package cmd
