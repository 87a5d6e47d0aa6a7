// Package alertbridge holds the end-to-end tests of kubemedic-alertbridge:
// the real Alertmanager (Debian's binary) sends real webhooks to the bridge,
// which files issues on a GitHub stand-in (alertbridge/ghfake).
package alertbridge
