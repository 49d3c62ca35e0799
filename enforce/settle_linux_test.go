package enforce

import (
	"fmt"
	"os/exec"
	"slices"
	"sync"
	"testing"

	"github.com/lanes-qos/lanes/disk"
	"github.com/lanes-qos/lanes/internal/cgroup"
	"github.com/lanes-qos/lanes/internal/testutil"
	"github.com/lanes-qos/lanes/lane"
	"github.com/lanes-qos/lanes/procwatch"
	"github.com/lanes-qos/lanes/state"
)

// bpfSettler is procwatch's placement check as an enforce.Settler (the
// daemon has the same adapter).
type bpfSettler struct{ s *procwatch.Settler }

func (b bpfSettler) MaxSettle() int { return procwatch.MaxSettle }

func (b bpfSettler) Settle(procs []SettleProc) ([]Settled, error) {
	in := make([]procwatch.Proc, len(procs))
	for i, p := range procs {
		in[i] = procwatch.Proc{PID: p.PID, Start: p.Start}
	}
	got, err := b.s.Settle(in)
	if err != nil {
		return nil, err
	}
	out := make([]Settled, len(got))
	for i, g := range got {
		out[i] = Settled(g)
	}
	return out, nil
}

// socketMoves records which processes' sockets PlaceBatch asks to follow
// them (the network side is netsched's, not under test here).
type socketMoves struct {
	mu   sync.Mutex
	pids []int
}

func (s *socketMoves) BindLane(string, string) error { return nil }
func (s *socketMoves) MoveSockets(pid int, _ string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pids = append(s.pids, pid)
	return nil
}

// PlaceBatch leaves nothing behind whether the placement check answers
// (one BPF run for the batch) or /proc is listed per process: every thread
// of a process gets the lane's I/O priority, a child forked before the
// move follows it, and the sockets of a process that has some follow it
// (with the check, only of those).
func TestPlaceBatchSettled(t *testing.T) {
	testutil.RequireRoot(t)
	for _, arm := range []string{"settler", "listings"} {
		t.Run(arm, func(t *testing.T) {
			store, err := state.Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			prefix := testutil.UniqueName("lanes-t") + "-"
			e, err := New(Options{Store: store, GroupName: func(n string) string { return prefix + n }})
			if err != nil {
				t.Fatal(err)
			}
			defer e.RestoreAll()
			if arm == "settler" {
				testutil.RequireFeature(t, "bpf placement check", procwatch.ProbeSettle)
				s, err := procwatch.NewSettler()
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				e.SetSettler(bpfSettler{s})
			}
			moves := &socketMoves{}
			e.SetNet(moves)
			l := &lane.Lane{Name: "settle", CPU: lane.CPU{Weight: 100}, Disk: lane.Disk{Class: lane.IOBestEffort, Level: 6}}
			roles := []string{"sleep 30s", "threads 4 30s", "forker 30s", "udp 127.0.0.1:9 30s"}
			var ps []Placement
			var grandchild int
			for _, role := range roles {
				c := testutil.StartChild(t, role)
				line := c.Line(t)
				if role == "forker 30s" {
					if _, err := fmt.Sscan(line, &grandchild); err != nil {
						t.Fatalf("forker said %q", line)
					}
				}
				pi, err := ReadProcStat(c.PID())
				if err != nil {
					t.Fatal(err)
				}
				from, err := cgroup.ProcMembership(c.PID())
				if err != nil {
					t.Fatal(err)
				}
				ps = append(ps, Placement{PID: c.PID(), StartTime: pi.StartTime, From: from, Threads: pi.Threads, Why: "rule:1"})
			}
			out, err := e.PlaceBatch(l, ps)
			if err != nil {
				t.Fatal(err)
			}
			g := e.Group(l.Name)
			for i, o := range out {
				if o.Err != nil {
					t.Fatalf("%s: %v", roles[i], o.Err)
				}
				tids, err := cgroup.Threads(o.PID)
				if err != nil {
					t.Fatal(err)
				}
				if roles[i] == "threads 4 30s" && len(tids) < 5 {
					t.Errorf("%s: %d threads, want at least 5", roles[i], len(tids))
				}
				for _, tid := range tids {
					if c, lvl, _ := disk.GetIOPrio(tid); c != lane.IOBestEffort || lvl != 6 {
						t.Errorf("%s: thread %d at %s/%d, want best-effort/6", roles[i], tid, c, lvl)
					}
				}
			}
			if m, err := cgroup.ProcMembership(grandchild); err != nil || !e.inGroup(m, g) {
				t.Errorf("the child the forker had before its move (%d) is in %+v (%v), want %s", grandchild, m, err, g.Name())
			}
			if !slices.Contains(out[2].Descendants, grandchild) {
				t.Errorf("descendants of the forker %v, want %d among them", out[2].Descendants, grandchild)
			}
			moves.mu.Lock()
			defer moves.mu.Unlock()
			if !slices.Contains(moves.pids, ps[3].PID) {
				t.Errorf("the sockets of the UDP sender %d were not moved (moved: %v)", ps[3].PID, moves.pids)
			}
			if arm == "settler" {
				// (The forker's child moves by Move, which looks for
				// sockets itself.)
				for _, pid := range moves.pids {
					if pid != ps[3].PID && pid != grandchild {
						fds, _ := exec.Command("ls", "-l", fmt.Sprintf("/proc/%d/fd", pid)).CombinedOutput()
						t.Errorf("sockets of %d moved, which has none: %s", pid, fds)
					}
				}
			}
		})
	}
}
