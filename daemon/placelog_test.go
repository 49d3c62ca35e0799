package daemon

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// A placement after a quiet second is logged at once; a storm's batches
// are gathered into a line a second per lane, naming the first few.
func TestPlaceLog(t *testing.T) {
	var lines []string
	logf := func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }
	t0 := time.Unix(1000, 0)
	var p placeLog
	steps := []struct {
		at    time.Duration
		lane  string
		n     int
		flush bool // a flush instead of an add
		force bool
		want  []string // lines logged by this step
	}{
		{at: 0, lane: "normal", n: 1, want: []string{"rules -> normal: p0"}},
		{at: 100 * time.Millisecond, lane: "normal", n: 3},
		{at: 200 * time.Millisecond, lane: "background", n: 1},
		{at: 500 * time.Millisecond, flush: true},
		{at: 900 * time.Millisecond, lane: "normal", n: 10},
		{at: 1100 * time.Millisecond, flush: true, want: []string{
			"rules -> background: p0",
			"rules -> normal: p0, p1, p2, p0, p1, p2, p3, p4, and 5 more"}},
		{at: 1200 * time.Millisecond, flush: true},
		{at: 1300 * time.Millisecond, lane: "normal", n: 2},
		{at: 1400 * time.Millisecond, flush: true, force: true, want: []string{"rules -> normal: p0, p1"}},
	}
	for i, s := range steps {
		lines = nil
		now := t0.Add(s.at)
		if s.flush {
			p.flush(now, s.force, logf)
		} else {
			var shown []string
			for k := range min(s.n, placeLogShown) {
				shown = append(shown, fmt.Sprintf("p%d", k))
			}
			p.add(now, s.lane, s.n, shown, logf)
		}
		if !slices.Equal(lines, s.want) {
			t.Errorf("step %d: logged %q, want %q", i, lines, s.want)
		}
	}
}
