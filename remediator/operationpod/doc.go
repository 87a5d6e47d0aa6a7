// Package operationpod builds the pod a NodeOperation runs on its node
// from its NodeOperationTemplate: the operation's own pod (the operation
// reconciler) and the pods the diagnostics take theirs from (the capture
// and flush pods of remediator/evidence).
//
// It only builds a pod spec: it must never read or write the API server,
// and the same operation and template always give the same pod.
package operationpod
