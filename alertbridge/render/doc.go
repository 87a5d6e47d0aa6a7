// Package render turns one Alertmanager alert group into the GitHub issue
// the bridge files for it: repository, dedupe key, title, body, labels and
// assignees, from the config's routes and templates or the defaults here.
// It also writes the storm guard's roll-up issue: its title, labels and the
// table of the groups it holds, and the operation history section of the
// nodes a group's alerts name (history.go), and the comments about a
// NodeOperation's diagnostics bundle and about how its active GPU test
// ended (diagnostics.go, validation.go), from NodeOperations read by the
// bridge.
//
// It is pure: no network, no clock, no GitHub. What must hold: the same
// group always renders the same key (so it always finds the same issue);
// the default key is the receiver and the sorted group labels, never
// Alertmanager's groupKey, which changes when the route tree does; titles,
// bodies and labels always fit GitHub's limits; the body carries no hidden
// marker (the bridge appends its own); a history that could not be read
// says Unknown, never "no operations".
package render
