package diagnostics

import (
	"sort"
	"strings"
	"time"
)

// DefaultRetention is how long bundles are kept.
const DefaultRetention = 30 * 24 * time.Hour

// Object is one stored bundle, as the store lists or reads it.
type Object struct {
	Key          string
	Size         int64
	LastModified time.Time
	SHA256       string
	// GPU is the UUID of the GPU the bundle is about; "" when none.
	GPU string
	// Files are the bundle's file names where its writer recorded them.
	Files []string
}

// NodeOf is the node a bundle's key names: its first path segment.
func NodeOf(key string) string {
	node, _, _ := strings.Cut(key, "/")
	return node
}

// Expired returns the keys of the objects older than retention at now,
// sorted, but for those keep says to keep (a node still quarantined, a GPU
// excluded for good: the evidence of an RMA in progress).
func Expired(objs []Object, now time.Time, retention time.Duration, keep func(Object) bool) []string {
	var out []string
	for _, o := range objs {
		if now.Sub(o.LastModified) <= retention {
			continue
		}
		if keep != nil && keep(o) {
			continue
		}
		out = append(out, o.Key)
	}
	sort.Strings(out)
	return out
}
