// Command kubemedic-demo runs the whole of kubemedic on one machine (make
// demo): a local control plane, simulated GPU nodes, the components as
// processes, and stand-ins for GitHub and Slack. It is a binary of its own,
// apart from the ops CLI, because it links what no shipped binary may:
// envtest (internal/localcluster) and the stand-ins (alertbridge/ghfake,
// internal/notify/notifytest). It is never built into an image. main only
// wires the command tree in package democli.
package main
