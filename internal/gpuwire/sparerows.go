package gpuwire

import (
	"fmt"
	"regexp"
	"strconv"
)

// SpareRows is the row remapper's count of a GPU's memory banks with no
// spare row left (NVML's row remapper histogram, None bucket). It is not a
// fault: the GPU works, but the next uncorrectable error in such a bank is
// a row remap failure, which means replacing the GPU. The gpu-memory check
// reports it in the GPUMemoryUnhealthy condition's message, which lives on
// the Node beside this history, and `kubemedic status --hardware` shows it
// on the GPU's line. This file holds the one format both use.
type SpareRows struct {
	// Banks is the count on GPU (the first such GPU by bus ID); More is
	// how many other GPUs of the node have banks without spare rows.
	Banks int
	Bus   string
	UUID  string
	More  int
}

// FormatSpareRows is the phrase for the condition message: gpu is the bus
// ID, optionally followed by " (UUID)"; more is the count of other GPUs.
func FormatSpareRows(banks uint64, gpu string, more int) string {
	s := fmt.Sprintf("%d banks without spare rows on %s", banks, gpu)
	if more > 0 {
		s += fmt.Sprintf(" (+%d GPUs)", more)
	}
	return s
}

var spareRowsRe = regexp.MustCompile(`\b(\d+) banks without spare rows on ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])(?: \((GPU-[0-9A-Fa-f-]{36})\))?(?: \(\+(\d+) GPUs\))?`)

// ParseSpareRows finds FormatSpareRows's phrase in a condition message.
func ParseSpareRows(msg string) (SpareRows, bool) {
	m := spareRowsRe.FindStringSubmatch(msg)
	if m == nil {
		return SpareRows{}, false
	}
	banks, err := strconv.Atoi(m[1])
	if err != nil {
		return SpareRows{}, false
	}
	s := SpareRows{Banks: banks, Bus: NormalizeBus(m[2]), UUID: NormalizeUUID(m[3])}
	if m[4] != "" {
		s.More, _ = strconv.Atoi(m[4])
	}
	return s, true
}
