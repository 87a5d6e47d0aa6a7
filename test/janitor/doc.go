// Package janitor holds the janitor's end-to-end tests: a real API server
// with kwok GPU nodes and pods, a real Prometheus scraping a dcgm-exporter
// stand-in whose values the test sets, and Slack through slacktest.
package janitor
