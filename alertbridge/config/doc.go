// Package config loads the alertbridge's routing file: which GitHub
// repository an Alertmanager alert group goes to, with which labels and
// assignees, and how its issue is titled, written and de-duplicated.
//
// The file is YAML, decoded strictly (with internal/strictyaml, as the
// policy files are): an unknown field, a value of the wrong type, a
// duplicate key, a bad matcher, repository, duration or template is an
// error, and every error names the file, the line and the field path
// (alertbridge.yaml:12: routes[1].matchers[0]: bad matcher ...). All errors
// of a file are reported at once, ordered by line. A config that loads is
// one the bridge can run with: templates are parsed and executed once on a
// sample alert group at load, so a typo in a template stops the bridge at
// start, not at the first page.
//
//	defaultRepo: acme/gpu-oncall     # required, owner/name
//	identityLabel: kubemedic-alert   # default kubemedic-alert; on every bridge issue
//	ignoreLabel: kubemedic-ignore    # default kubemedic-ignore; a human sets it to stop reopening
//	autoClose: true                  # default true: close the issue when the group resolves
//	reopenWindow: 24h                # default 24h; 0s: never reopen, always a new issue
//	stormGuard:
//	  maxNewIssues: 20               # default 20 new issues per repo per window; 0 disables
//	  window: 10m                    # default 10m
//	nodeHistory:                     # list the NodeOperations of the node an alert names in its issue
//	  enabled: false                 # default false; needs get/list on nodeoperations.kubemedic.io
//	  maxOperations: 10              # default 10, 1 to 50: the newest this many, oldest first
//	dryRun: false
//	routes:                          # first match wins; no match: defaultRepo
//	  - matchers: ['team="storage"', 'severity=~"critical|page"']
//	    repo: acme/storage-oncall
//	    labels: [storage]            # extra static labels
//	assignees:                       # every matching rule adds its users
//	  - matchers: ['team="gpu"']
//	    users: [alice, bob]
//	templates:                       # all optional; empty means the default
//	  dedupeKey: ''                  # default: receiver/{sorted group labels}
//	  title: ''
//	  body: ''
//	  labels: []                     # default: ['{{ with .CommonLabels.severity }}severity:{{ . }}{{ end }}']
//
// Durations are Prometheus durations (90m, 24h, 1d). Matchers are
// Alertmanager matchers (name="value", name!="value", name=~"regex",
// name!~"regex"), one per list element, all of which must match the group's
// common labels; a label the group lacks matches as "". Routes need at least
// one matcher; an assignee rule without matchers applies to every group.
//
// Templates are Alertmanager notification templates, executed on the
// webhook payload (*payload.Message: .Receiver, .Status, .Alerts,
// .GroupLabels, .CommonLabels, .CommonAnnotations, .ExternalURL,
// .TruncatedAlerts, ...) with Alertmanager's functions (toUpper, join,
// reReplaceAll, date, humanizeDuration, ...) plus the bridge's:
//
//	silenceURL MSG          Alertmanager UI link to a new silence prefilled with the group labels
//	mdCell S                S escaped for a markdown table cell (| and line breaks)
//	truncate N S            S cut to N characters, with … when cut
//	labelSet KV             {name="value",...} sorted by name, values quoted
//	startedAt MSG           earliest StartsAt of the firing alerts (of all alerts if none fire)
//	timestamp T             T as "2006-01-02 15:04:05 UTC"; "" for the zero time
//	annotation NAME MSG     the common annotation NAME, else the value all alerts having it agree on, else ""
//	labelValues NAME ALERTS the distinct non-empty values of label NAME, sorted
//	varyingLabels ALERTS    the names of the labels whose values differ between the alerts, sorted
//	headAlerts N ALERTS     the first N alerts
//	pick NAMES KV           the labels of KV named in NAMES
//	sub A B                 A - B
//	matchAlerts M ALERTS    the alerts whose labels match the Alertmanager matcher M, e.g. `severity="critical"`
//
// The package must never reach the network or GitHub: it decides nothing
// about issues, it only says where a group goes and how it is written.
package config
