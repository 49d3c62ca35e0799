package buildinfo

import (
	"regexp"
	"testing"
)

func TestString(t *testing.T) {
	re := regexp.MustCompile(`^lanesd \d+\.\d+\.\d+ \(commit ([0-9a-f]{12}(\+dirty)?|unknown), go[^,]+, [a-z0-9]+/[a-z0-9]+\)$`)
	if s := String("lanesd"); !re.MatchString(s) {
		t.Errorf("String() = %q, want it to match %s", s, re)
	}
}
