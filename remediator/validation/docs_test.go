package validation

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDocsShowFloors: docs/validation.md's table shows every model's
// floors, and the figures they are 80% of, as floors.go has them.
func TestDocsShowFloors(t *testing.T) {
	b, err := os.ReadFile("../../docs/validation.md")
	require.NoError(t, err)
	rows := map[string][]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if cells := strings.Split(l, "|"); len(cells) == 8 {
			for i := range cells {
				cells[i] = strings.TrimSpace(cells[i])
			}
			rows[cells[1]] = cells[3:7]
		}
	}
	for _, m := range Models() {
		row, ok := rows[m.Name]
		require.True(t, ok, "docs/validation.md has no row for %s", m.Name)
		for i, name := range FloorNames {
			e, has := m.Expected[name]
			if !has {
				require.Equal(t, "—", row[i], "%s %s", m.Name, name)
				continue
			}
			want := strconv.FormatFloat(FloorOf(e), 'f', -1, 64) + " (80% of " + strconv.FormatFloat(e, 'f', -1, 64) + ")"
			require.Equal(t, want, row[i], "%s %s", m.Name, name)
		}
	}
}
