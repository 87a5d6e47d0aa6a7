// Package controller is the janitor's controller-runtime manager: a
// leader-elected cycle that lists the GPU pods from a stripped cache, asks
// Prometheus once per distinct (metric, window), calls janitor/decide for
// each pod, and acts: notice on Slack, snooze, cancel, reclaim.
//
// The janitor's state lives on the pods (kubemedic.io/reclaim-notice), never
// only in memory, so a restart or a second janitor neither sends a notice
// twice nor cuts a grace period short. It must never reclaim a pod whose
// evidence is missing or too old (decide.EvidenceTooOld), never act without
// a notice when the policy requires one, and never write to the API server
// in a cycle where nothing changed.
package controller
