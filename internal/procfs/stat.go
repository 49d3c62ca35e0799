package procfs

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"time"
)

// ErrNoProcess is wrapped by every error about a process that does not
// exist or exited while it was read.
var ErrNoProcess = errors.New("no such process")

// goneError is a read of a process that is not there (any more).
type goneError struct {
	pid int
	err error
}

func (e *goneError) Error() string {
	return fmt.Sprintf("process %d does not exist (%v)", e.pid, e.err)
}

func (e *goneError) Unwrap() []error { return []error{ErrNoProcess, fs.ErrNotExist, e.err} }

// Task flags of /proc/PID/stat (field 9), from the kernel's sched.h.
const (
	flagExiting = 0x4        // PF_EXITING
	flagKthread = 0x00200000 // PF_KTHREAD
)

// UserHZ is the unit of the CPU times in /proc/PID/stat: clock ticks of
// 1/100 s on every Linux architecture lanes runs on.
const UserHZ = 100

// Stat is what lanes reads of /proc/PID/stat. Field numbers are proc(5)'s.
type Stat struct {
	PID   int    // field 1
	Comm  string // field 2, without the parentheses; may hold spaces and ')'
	State byte   // field 3: R, S, D, Z, X, ...
	PPID  int    // field 4
	Flags uint64 // field 9: the kernel's PF_* task flags
	UTime uint64 // field 14, clock ticks (UserHZ)
	STime uint64 // field 15, clock ticks
	// Threads is field 20, num_threads.
	Threads int
	// StartTime is field 22, clock ticks after boot: with the PID it
	// names one process, whatever reuses the PID later.
	StartTime uint64
}

// Exiting reports whether the kernel has begun tearing the process down
// (PF_EXITING): a cgroup write ignores it.
func (s Stat) Exiting() bool { return s.Flags&flagExiting != 0 }

// Exited reports whether the process has exited and waits to be reaped
// (a zombie, or dead): a cgroup write silently ignores it.
func (s Stat) Exited() bool { return s.State == 'Z' || s.State == 'X' }

// KernelThread reports whether the process is a kernel thread (PF_KTHREAD).
func (s Stat) KernelThread() bool { return s.Flags&flagKthread != 0 }

// CPUTime is the CPU time the process has used, user and system.
func (s Stat) CPUTime() time.Duration {
	return time.Duration(s.UTime+s.STime) * time.Second / UserHZ
}

// ParseStat parses the contents of /proc/PID/stat. The command name is
// everything between the first '(' and the last ')': it may itself hold
// spaces and parentheses.
func ParseStat(b []byte) (Stat, error) {
	var s Stat
	open, close := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 1 || close < open {
		return s, fmt.Errorf("parse stat: no (command name) in %q", truncate(b))
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b[:open])))
	if err != nil || pid <= 0 {
		return s, fmt.Errorf("parse stat: pid %q", b[:open])
	}
	s.PID = pid
	s.Comm = string(b[open+1 : close])
	// Fields 3 onwards, split on spaces without allocating.
	rest := b[close+1:]
	field := 2
	for len(rest) > 0 && field < 22 {
		rest = bytes.TrimLeft(rest, " ")
		end := bytes.IndexAny(rest, " \n")
		if end < 0 {
			end = len(rest)
		}
		f := rest[:end]
		rest = rest[end:]
		if len(f) == 0 {
			break
		}
		field++
		switch field {
		case 3:
			if len(f) != 1 {
				return s, fmt.Errorf("parse stat of %d: state %q", pid, f)
			}
			s.State = f[0]
		case 4:
			s.PPID, err = atoi(f)
		case 9:
			s.Flags, err = atou(f)
		case 14:
			s.UTime, err = atou(f)
		case 15:
			s.STime, err = atou(f)
		case 20:
			s.Threads, err = atoi(f)
		case 22:
			s.StartTime, err = atou(f)
		}
		if err != nil {
			return s, fmt.Errorf("parse stat of %d: field %d %q: %w", pid, field, f, err)
		}
	}
	if field < 22 {
		return s, fmt.Errorf("parse stat of %d: %d fields, want at least 22", pid, field)
	}
	return s, nil
}

// ParseLastCPU reads field 39 of /proc/TID/stat (processor): the CPU the
// thread last ran on, or is queued on while it waits to run.
func ParseLastCPU(b []byte) (int, error) {
	close := bytes.LastIndexByte(b, ')')
	if close < 0 {
		return 0, fmt.Errorf("parse stat: no (command name) in %q", truncate(b))
	}
	f := bytes.Fields(b[close+1:]) // from field 3
	if len(f) < 39-2 {
		return 0, fmt.Errorf("parse stat: %d fields, want at least 39", len(f)+2)
	}
	cpu, err := atoi(f[39-3])
	if err != nil || cpu < 0 {
		return 0, fmt.Errorf("parse stat: processor (field 39) %q", f[39-3])
	}
	return cpu, nil
}

// UIDs are the user ids of a process, from the Uid line of /proc/PID/status.
type UIDs struct {
	Real, Effective, Saved, FS int
}

// ParseStatus reads the uids from the contents of /proc/PID/status.
func ParseStatus(b []byte) (UIDs, error) {
	var u UIDs
	i := 0
	switch {
	case bytes.HasPrefix(b, []byte("Uid:")):
	default:
		j := bytes.Index(b, []byte("\nUid:"))
		if j < 0 {
			return u, errors.New("parse status: no Uid line")
		}
		i = j + 1
	}
	line := b[i+len("Uid:"):]
	if j := bytes.IndexByte(line, '\n'); j >= 0 {
		line = line[:j]
	}
	var ids [4]int
	n := 0
	for f := range bytes.FieldsSeq(line) {
		if n == len(ids) {
			break
		}
		v, err := atoi(f)
		if err != nil {
			return u, fmt.Errorf("parse status: Uid %q: %w", line, err)
		}
		ids[n] = v
		n++
	}
	if n < 4 {
		return u, fmt.Errorf("parse status: Uid %q: want 4 ids", line)
	}
	return UIDs{Real: ids[0], Effective: ids[1], Saved: ids[2], FS: ids[3]}, nil
}

// ParsePIDs parses a space-separated list of PIDs, as in
// /proc/PID/task/TID/children and cgroup.procs (one a line).
func ParsePIDs(b []byte) ([]int, error) {
	var out []int
	for f := range bytes.FieldsSeq(b) {
		p, err := atoi(f)
		if err != nil || p <= 0 {
			return out, fmt.Errorf("parse pid %q", f)
		}
		out = append(out, p)
	}
	return out, nil
}

// atoi parses a non-negative decimal int without allocating.
func atoi(b []byte) (int, error) {
	v, err := atou(b)
	if err != nil {
		return 0, err
	}
	if v > 1<<62 {
		return 0, strconv.ErrRange
	}
	return int(v), nil
}

// atou parses a decimal uint64 without allocating.
func atou(b []byte) (uint64, error) {
	if len(b) == 0 || len(b) > 20 {
		return 0, strconv.ErrSyntax
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, strconv.ErrSyntax
		}
		d := uint64(c - '0')
		if v > (1<<64-1-d)/10 {
			return 0, strconv.ErrRange
		}
		v = v*10 + d
	}
	return v, nil
}

func truncate(b []byte) []byte {
	if len(b) > 64 {
		return b[:64]
	}
	return b
}

// IO is a process's I/O counters (/proc/PID/io): characters read and
// written and read and write calls, files and sockets alike.
type IO struct {
	RChar, WChar, SysCR, SysCW uint64
}

// ParseIO parses /proc/PID/io; fields it does not know are skipped.
func ParseIO(b []byte) IO {
	var io IO
	for _, line := range bytes.Split(b, []byte("\n")) {
		k, v, ok := bytes.Cut(line, []byte(": "))
		if !ok {
			continue
		}
		n, err := atou(bytes.TrimSpace(v))
		if err != nil {
			continue
		}
		switch string(k) {
		case "rchar":
			io.RChar = n
		case "wchar":
			io.WChar = n
		case "syscr":
			io.SysCR = n
		case "syscw":
			io.SysCW = n
		}
	}
	return io
}

// Schedstat is a thread's scheduler statistics (/proc/PID/schedstat, or
// /proc/TID/schedstat for any thread): time on a CPU and time runnable
// but waiting for one, both cumulative, and the timeslices it ran.
type Schedstat struct {
	Run, Wait time.Duration
	Slices    uint64
}

// ParseSchedstat parses a schedstat file: "run_ns wait_ns slices".
func ParseSchedstat(b []byte) (Schedstat, error) {
	f := bytes.Fields(b)
	if len(f) < 3 {
		return Schedstat{}, fmt.Errorf("schedstat %q: want 3 fields", truncate(b))
	}
	var v [3]uint64
	for i := range v {
		n, err := atou(f[i])
		if err != nil {
			return Schedstat{}, fmt.Errorf("schedstat %q: field %d: %w", truncate(b), i+1, err)
		}
		v[i] = n
	}
	return Schedstat{Run: time.Duration(v[0]), Wait: time.Duration(v[1]), Slices: v[2]}, nil
}

// ParseCPUIdle takes the host's idle time out of /proc/stat: the "cpu"
// line's idle and iowait fields, summed over all CPUs.
func ParseCPUIdle(b []byte) (time.Duration, error) {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := bytes.Fields(line)
	if len(f) < 6 || string(f[0]) != "cpu" {
		return 0, fmt.Errorf("/proc/stat: first line %q is not the cpu line", truncate(line))
	}
	var ticks uint64
	for _, i := range []int{4, 5} { // idle, iowait
		n, err := atou(f[i])
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: cpu field %d: %w", i, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / UserHZ, nil
}
