package decide

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"strings"
)

// Tale is a Warning the janitor tells once about an object: Reason is the
// Event reason, Text what makes it this tale (the invalid values, the rule
// and owner, why a policy is ignored). The same Text is not told twice; a
// different Text under the same Reason is told again.
type Tale struct {
	Reason string
	Text   string
}

// TaleHash is the short hash a record keeps of a tale's Text: 8 hex digits
// (32 bits of SHA-256). A collision only keeps one changed value of one
// object's one reason from being told, at odds of one in four billion.
func TaleHash(text string) string {
	sum := sha256.Sum256([]byte(text))
	return hex.EncodeToString(sum[:4])
}

// Tell compares the tales to tell now with the record of those told
// (v1alpha1.AnnotationReclaimTold, "<reason>:<hash>,..." sorted by
// reason) and returns the tales not told yet and the record that says
// they were. When every tale was told, news is empty and record is the
// one given: nothing is written in the steady state. A reason that is no
// longer told keeps its entry, so that a value that comes back is not
// told again; a new value replaces it. Entries that do not parse are
// dropped when the record is rewritten.
func Tell(record string, tales []Tale) (news []Tale, next string) {
	told := parseTold(record)
	for _, t := range tales {
		h := TaleHash(t.Text)
		if told[t.Reason] == h {
			continue
		}
		told[t.Reason] = h
		news = append(news, t)
	}
	if len(news) == 0 {
		return nil, record
	}
	reasons := make([]string, 0, len(told))
	for r := range told {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	var b strings.Builder
	for i, r := range reasons {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(r)
		b.WriteByte(':')
		b.WriteString(told[r])
	}
	return news, b.String()
}

func parseTold(record string) map[string]string {
	told := map[string]string{}
	for _, e := range strings.Split(record, ",") {
		r, h, ok := strings.Cut(strings.TrimSpace(e), ":")
		if !ok || r == "" || len(h) != 8 || strings.ContainsAny(r, ":, ") {
			continue
		}
		if _, err := hex.DecodeString(h); err != nil {
			continue
		}
		told[r] = h
	}
	return told
}
