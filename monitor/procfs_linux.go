package monitor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"time"

	"github.com/lanes-qos/lanes/internal/procfs"
	"github.com/lanes-qos/lanes/lane"
)

// ReadProcess describes process pid from /proc for rule matching. Exe is
// empty for kernel threads and for processes whose executable cannot be
// read (another user's, when not root). A process that does not exist (or
// has gone) gives an error wrapping os.ErrNotExist.
func ReadProcess(pid int) (lane.Process, error) {
	p, _, err := ReadProcessCgroup(pid)
	return p, err
}

// ReadProcessCgroup is ReadProcess that also returns the contents of
// /proc/PID/cgroup it read, for the caller's own use (its membership).
func ReadProcessCgroup(pid int) (lane.Process, []byte, error) {
	p := lane.Process{PID: pid}
	u, err := procfs.ReadUIDs(pid)
	if err != nil {
		return p, nil, fmt.Errorf("read process %d: %w", pid, err)
	}
	p.UID = u.Real
	p.User = UserName(p.UID)
	s, err := procfs.ReadStat(pid)
	if err != nil {
		return p, nil, fmt.Errorf("read process %d: %w", pid, err)
	}
	p.Comm = s.Comm
	cg, err := procfs.ReadSmall(procfs.Root + "/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return p, nil, fmt.Errorf("read process %d: %w", pid, procfs.Gone(pid, err))
	}
	p.Cgroup = CgroupPath(cg)
	p.Unit = lane.UnitOf(p.Cgroup)
	if p.Exe, err = procfs.Exe(pid); err != nil {
		return p, nil, fmt.Errorf("read process %d: %w", pid, err)
	}
	return p, cg, nil
}

// Scan describes every process in /proc (thread-group leaders only). It
// skips kernel threads and processes that exit while it reads them.
func Scan() ([]lane.Process, error) {
	pids, err := procfs.PIDs()
	if err != nil {
		return nil, err
	}
	procs := make([]lane.Process, 0, len(pids))
	var errs []error
	for _, pid := range pids {
		p, err := ReadProcess(pid)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			errs = append(errs, err)
			continue
		case p.Exe == "" && isKernelThread(pid):
			continue
		}
		procs = append(procs, p)
	}
	if len(errs) > 0 {
		return procs, fmt.Errorf("scan processes: %w", errors.Join(errs...))
	}
	return procs, nil
}

// isKernelThread reports whether pid is a kernel thread (PF_KTHREAD).
func isKernelThread(pid int) bool {
	s, err := procfs.ReadStat(pid)
	return err == nil && s.KernelThread()
}

// procID identifies one process across polls: a PID may be reused, its
// start time (field 22 of stat) tells the incarnations apart; comm changes
// on exec.
type procID struct {
	start uint64
	comm  string
}

func readProcID(pid int) (procID, bool) {
	s, err := procfs.ReadStat(pid)
	if err != nil {
		return procID{}, false
	}
	return procID{start: s.StartTime, comm: s.Comm}, true
}

// PollProcs is the fallback event source for hosts without the proc
// connector: every interval it lists /proc and reports processes that
// appeared as Exec events (and exec's that changed a process's command
// name), and processes that went as Exit events (ExitCode unknown: 0).
// Processes present at the first listing are not reported; pair it with
// Scan. Forks show up as Exec of the child. The channel closes when ctx
// is done.
func PollProcs(ctx context.Context, interval time.Duration) <-chan Event {
	ch := make(chan Event, eventBuffer)
	go func() {
		defer close(ch)
		known := snapshot()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			now := snapshot()
			var evs []Event
			for pid, id := range known {
				if nid, ok := now[pid]; !ok || nid.start != id.start {
					evs = append(evs, Event{Kind: Exit, PID: pid, TGID: pid})
				}
			}
			for pid, id := range now {
				old, ok := known[pid]
				if !ok || old.start != id.start || old.comm != id.comm {
					evs = append(evs, Event{Kind: Exec, PID: pid, TGID: pid})
				}
			}
			known = now
			for _, ev := range evs {
				select {
				case ch <- ev:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return ch
}

func snapshot() map[int]procID {
	pids, err := procfs.PIDs()
	m := make(map[int]procID, len(pids))
	if err != nil {
		return m
	}
	for _, pid := range pids {
		if id, ok := readProcID(pid); ok {
			m[pid] = id
		}
	}
	return m
}
