// Package plugin is node-problem-detector's custom-plugin protocol: a check
// returns a Result, and Write prints it as one line of at most MaxLine bytes
// on stdout and gives the exit code (0 OK, 1 NonOK, 2 Unknown).
//
// NPD gives each rule a fixed reason, so a NonOK line starts with the
// specific reason ("XidRebootRequired: Xid 79 on 0000:3b:00.0: ..."); see
// v1alpha1.EffectiveReason. Messages must be stable while a fault lasts (no
// timestamps or ages): NPD rewrites the condition, and moves its
// lastTransitionTime, whenever the message changes.
//
// The package also defines Command, the unit kubemedic-detect dispatches to.
package plugin
