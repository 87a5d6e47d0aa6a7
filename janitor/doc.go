// Package janitor reclaims idle, expired and stuck-pending GPU pods under
// ClusterReclaimPolicies and ReclaimPolicies, after telling the pod's owner
// on Slack and waiting out the grace period. Missing metrics never make a
// pod idle.
package janitor
