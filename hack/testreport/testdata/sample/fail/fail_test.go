package fail

import "testing"

func TestSkipsForNoGoodReason(t *testing.T) { t.Skip("flaky, skipped for now") }

func TestFails(t *testing.T) {
	t.Log("what the test saw before failing")
	t.Run("sub", func(t *testing.T) { t.Error("the subtest's failure message") })
}
