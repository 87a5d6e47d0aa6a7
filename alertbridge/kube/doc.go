// Package kube is the alertbridge's only view of Kubernetes: it lists the
// NodeOperations of the nodes an alert group names, so that the issue of a
// node handed to a person shows what the remediator tried on it.
//
// What must hold: it only reads (get and list on nodeoperations.kubemedic.io,
// the whole of the bridge's RBAC); it honours its context, so the bridge can
// bound every read; its errors name what failed without the API server's
// URL, because the bridge writes them into GitHub issues.
package kube
