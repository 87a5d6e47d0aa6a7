// Package marker encodes the bridge's hidden state in a GitHub issue body
// and its transition marks in comments.
//
// An issue is the bridge's when it carries the identity label and a marker
// line `<!-- kubemedic-alertbridge key=<hash> state=<data> -->`. The key is
// the hashed dedupe key (never the key itself, which may hold label values);
// the state is what the bridge needs to continue after a restart without any
// local memory: the firing fingerprints, the journal entry last applied and
// the digest of the last timeline comment. The marker is an HTML comment, so
// GitHub does not render it, and people editing the body around it keep it.
//
// It never trusts a marker: a damaged one is an error, not an empty state.
package marker
