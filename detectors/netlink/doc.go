// Package netlink is the "network" check of kubemedic-detect: it sets the
// NetworkInterfaceDown condition when an interface the node must have (by
// name or by pattern: Ethernet, IPoIB) is missing, has its link down, or is
// up without an address.
//
// Link state comes from /sys/class/net under the host root, so the check runs
// on fixture trees in tests; addresses come from the kernel (netlink, through
// net.InterfaceByName) and are therefore only checked against the real root,
// in the network namespace the check runs in: deploy it with hostNetwork.
//
// The check must never report OK without having read every selected
// interface's state, and never change its message while a fault lasts (no
// counters, ages or timestamps): NPD moves the condition's transition time on
// every new message.
package netlink
