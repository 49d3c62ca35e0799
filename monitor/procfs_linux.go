package monitor

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lanes-qos/lanes/lane"
)

const procRoot = "/proc"

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
	dir := procRoot + "/" + strconv.Itoa(pid)
	status, err := ReadSmall(dir + "/status")
	if err != nil {
		return p, nil, fmt.Errorf("read process %d: %w", pid, err)
	}
	uid, ok := statusUID(status)
	if !ok {
		return p, nil, fmt.Errorf("read process %d: no Uid line in %s/status", pid, dir)
	}
	p.UID = uid
	p.User = userName(uid)
	comm, err := ReadSmall(dir + "/comm")
	if err != nil {
		return p, nil, fmt.Errorf("read process %d: %w", pid, err)
	}
	p.Comm = strings.TrimSuffix(string(comm), "\n")
	cg, err := ReadSmall(dir + "/cgroup")
	if err != nil {
		return p, nil, fmt.Errorf("read process %d: %w", pid, err)
	}
	p.Cgroup = CgroupPath(cg)
	p.Unit = lane.UnitOf(p.Cgroup)
	exe, err := os.Readlink(dir + "/exe")
	switch {
	case err == nil:
		p.Exe = strings.TrimSuffix(exe, " (deleted)")
	case errors.Is(err, fs.ErrNotExist):
		// A kernel thread or a zombie: no executable. Tell the two apart
		// from a vanished process by the directory itself.
		if _, serr := os.Stat(dir); serr != nil {
			return p, nil, fmt.Errorf("read process %d: %w", pid, serr)
		}
	case errors.Is(err, fs.ErrPermission):
		// Another user's process: match it without its executable.
	default:
		return p, nil, fmt.Errorf("read process %d: %w", pid, err)
	}
	return p, cg, nil
}

// ReadProcessWith describes process pid for rule matching like
// ReadProcess, given what the caller has read already (its comm and real
// uid, from /proc/PID/stat and status): it reads only the cgroup file,
// which it also returns, and the executable.
func ReadProcessWith(pid int, comm string, uid int) (lane.Process, []byte, error) {
	p := lane.Process{PID: pid, Comm: comm, UID: uid, User: userName(uid)}
	dir := procRoot + "/" + strconv.Itoa(pid)
	cg, err := ReadSmall(dir + "/cgroup")
	if err != nil {
		return p, nil, fmt.Errorf("read process %d: %w", pid, err)
	}
	p.Cgroup = CgroupPath(cg)
	p.Unit = lane.UnitOf(p.Cgroup)
	exe, err := os.Readlink(dir + "/exe")
	switch {
	case err == nil:
		p.Exe = strings.TrimSuffix(exe, " (deleted)")
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, fs.ErrPermission):
		// A kernel thread, a zombie, another user's process: no executable.
	default:
		return p, nil, fmt.Errorf("read process %d: %w", pid, err)
	}
	return p, cg, nil
}

// Scan describes every process in /proc (thread-group leaders only). It
// skips kernel threads and processes that exit while it reads them.
func Scan() ([]lane.Process, error) {
	pids, err := listPIDs()
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

// statusUID returns the real uid from /proc/PID/status.
func statusUID(status []byte) (int, bool) {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "Uid:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return 0, false
		}
		uid, err := strconv.Atoi(f[0])
		return uid, err == nil
	}
	return 0, false
}

// userNames memoises uid -> user name lookups ("" when unknown).
var userNames sync.Map

func userName(uid int) string {
	if v, ok := userNames.Load(uid); ok {
		return v.(string)
	}
	name := ""
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		name = u.Username
	}
	userNames.Store(uid, name)
	return name
}

// isKernelThread reports whether pid has PF_KTHREAD set (field 9 of
// /proc/PID/stat).
func isKernelThread(pid int) bool {
	const pfKthread = 0x00200000
	f, ok := statFields(pid)
	if !ok || len(f) < 7 {
		return false
	}
	flags, err := strconv.ParseUint(f[6], 10, 64)
	return err == nil && flags&pfKthread != 0
}

// statFields returns the fields of /proc/PID/stat after the command name
// (state first, then ppid, ...: field 3 onwards in proc(5)'s numbering).
func statFields(pid int) ([]string, bool) {
	b, err := os.ReadFile(procRoot + "/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, false
	}
	return strings.Fields(string(b[i+1:])), true
}

func listPIDs() ([]int, error) {
	ents, err := os.ReadDir(procRoot)
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	pids := make([]int, 0, len(ents))
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// procID identifies one process across polls: a PID may be reused, its
// start time (field 22 of stat) tells the incarnations apart; comm changes
// on exec.
type procID struct {
	start string
	comm  string
}

func readProcID(pid int) (procID, bool) {
	b, err := os.ReadFile(procRoot + "/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procID{}, false
	}
	lp, rp := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if lp < 0 || rp < lp {
		return procID{}, false
	}
	f := strings.Fields(string(b[rp+1:]))
	if len(f) < 20 {
		return procID{}, false
	}
	return procID{start: f[19], comm: string(b[lp+1 : rp])}, true
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
	pids, err := listPIDs()
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
