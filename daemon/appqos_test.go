package daemon

import (
	"slices"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/api"
	"github.com/lanes-qos/lanes/api/peercred"
)

// Status keeps the last report of each live process: a newer report
// replaces the older, a user sees its own processes' only (root every
// one, a caller without credentials none), a process gone is dropped, and
// at most maxReports are kept (the oldest go first).
func TestLastReports(t *testing.T) {
	var l lastReports
	t0 := time.Unix(1000, 0)
	l.keep(api.AppReport{PID: 10, UID: 1000, Time: t0, Metrics: map[string]float64{"fps": 20}})
	l.keep(api.AppReport{PID: 11, UID: 1001, Time: t0.Add(time.Second), Metrics: map[string]float64{"fps": 30}})
	l.keep(api.AppReport{PID: 10, UID: 1000, Time: t0.Add(2 * time.Second), Metrics: map[string]float64{"fps": 25}})
	alive := func(pid int) bool { return true }
	pids := func(rs []api.AppReport) []int {
		var out []int
		for _, r := range rs {
			out = append(out, r.PID)
		}
		return out
	}
	root := peercred.Creds{PID: 1, UID: 0}
	if got := l.list(root, alive); !slices.Equal(pids(got), []int{11, 10}) || got[1].Metrics["fps"] != 25 {
		t.Errorf("root sees %+v, want 11 then 10 (fps 25)", got)
	}
	if got := pids(l.list(peercred.Creds{PID: 5, UID: 1001}, alive)); !slices.Equal(got, []int{11}) {
		t.Errorf("uid 1001 sees %v, want its own 11", got)
	}
	if got := l.list(peercred.Creds{PID: -1, UID: -1}, alive); len(got) != 0 {
		t.Errorf("a caller without credentials sees %v", got)
	}
	if got := pids(l.list(root, func(pid int) bool { return pid != 11 })); !slices.Equal(got, []int{10}) {
		t.Errorf("after 11 exited: %v", got)
	}
	if got := pids(l.list(root, alive)); !slices.Equal(got, []int{10}) {
		t.Errorf("11 came back: %v", got)
	}
	for i := range maxReports + 5 {
		l.keep(api.AppReport{PID: 100 + i, Time: t0.Add(time.Duration(10+i) * time.Second)})
	}
	got := l.list(root, alive)
	if len(got) != maxReports || got[0].PID != 105 {
		t.Errorf("%d reports kept, the oldest of pid %d: want %d, the oldest 5 and pid 10 gone", len(got), got[0].PID, maxReports)
	}
}
