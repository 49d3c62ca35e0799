package procfs

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"syscall"
	"time"
)

// Root is where procfs is mounted.
const Root = "/proc"

// dir is /proc/PID.
func dir(pid int) string { return Root + "/" + strconv.Itoa(pid) }

// gone wraps a read error of process pid: a missing file (ENOENT) or a
// process torn down during the read (ESRCH) means the process is gone.
func gone(pid int, err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
		return &goneError{pid: pid, err: err}
	}
	return err
}

// ReadStat reads /proc/PID/stat. A zombie is returned, not an error
// (Stat.Exited tells).
func ReadStat(pid int) (Stat, error) {
	if pid <= 0 {
		return Stat{}, fmt.Errorf("read stat: pid %d: %w", pid, &goneError{pid: pid, err: syscall.ESRCH})
	}
	b, err := ReadSmall(dir(pid) + "/stat")
	if err != nil {
		return Stat{}, gone(pid, err)
	}
	return ParseStat(b)
}

// ReadUIDs reads the uids of pid from /proc/PID/status.
func ReadUIDs(pid int) (UIDs, error) {
	if pid <= 0 {
		return UIDs{}, &goneError{pid: pid, err: syscall.ESRCH}
	}
	b, err := ReadSmall(dir(pid) + "/status")
	if err != nil {
		return UIDs{}, gone(pid, err)
	}
	u, err := ParseStatus(b)
	if err != nil {
		// A process torn down between open and read has no Uid line.
		if _, serr := os.Stat(dir(pid)); serr != nil {
			return u, gone(pid, serr)
		}
		return u, fmt.Errorf("process %d: %w", pid, err)
	}
	return u, nil
}

// Children lists the children of thread tid of process pid
// (/proc/PID/task/TID/children: children that thread forked).
func Children(pid, tid int) ([]int, error) {
	b, err := ReadSmall(dir(pid) + "/task/" + strconv.Itoa(tid) + "/children")
	if err != nil {
		return nil, gone(pid, err)
	}
	return ParsePIDs(b)
}

// HasChildrenFile reports whether the kernel has /proc/PID/task/TID/children
// (CONFIG_PROC_CHILDREN).
func HasChildrenFile() bool {
	pid := os.Getpid()
	_, err := os.Stat(dir(pid) + "/task/" + strconv.Itoa(pid) + "/children")
	return err == nil
}

// Threads lists the thread ids of pid.
func Threads(pid int) ([]int, error) {
	if pid <= 0 {
		return nil, &goneError{pid: pid, err: syscall.ESRCH}
	}
	tids, err := listNumeric(dir(pid) + "/task")
	if err != nil {
		return nil, gone(pid, err)
	}
	return tids, nil
}

// SocketFDs lists the descriptors of pid that are sockets, one per
// socket (a socket open under several descriptors is listed once): a
// listing of /proc/PID/fd and a readlink of each entry, into one buffer.
// A descriptor closed meanwhile is skipped. The placement of every exec
// asks it, and most processes have none.
func SocketFDs(pid int) ([]int, error) {
	if pid <= 0 {
		return nil, &goneError{pid: pid, err: syscall.ESRCH}
	}
	base := dir(pid) + "/fd"
	fds, err := listNumeric(base)
	if err != nil {
		return nil, gone(pid, err)
	}
	var out []int
	var seen map[string]bool
	path := make([]byte, 0, len(base)+12)
	var link [64]byte
	for _, fd := range fds {
		path = strconv.AppendInt(append(append(path[:0], base...), '/'), int64(fd), 10)
		path = append(path, 0)
		n, err := readlinkInto(path, link[:])
		if err != nil || !bytes.HasPrefix(link[:n], []byte("socket:[")) {
			continue
		}
		if seen == nil {
			seen = map[string]bool{}
		}
		if seen[string(link[:n])] {
			continue
		}
		seen[string(link[:n])] = true
		out = append(out, fd)
	}
	return out, nil
}

// PIDs lists the processes in /proc (thread-group leaders).
func PIDs() ([]int, error) {
	pids, err := listNumeric(Root)
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	return pids, nil
}

// Exists reports whether /proc/PID exists (a zombie does).
func Exists(pid int) bool {
	if pid <= 0 {
		return false
	}
	_, err := os.Stat(dir(pid))
	return err == nil
}

// Exe reads the executable of pid ("" with a nil error for a kernel
// thread or a zombie, which have none, and for another user's process
// when the caller may not see it). " (deleted)" is cut.
func Exe(pid int) (string, error) {
	exe, err := os.Readlink(dir(pid) + "/exe")
	return exeResult(pid, exe, err)
}

func exeResult(pid int, exe string, err error) (string, error) {
	switch {
	case err == nil:
		const deleted = " (deleted)"
		if len(exe) > len(deleted) && exe[len(exe)-len(deleted):] == deleted {
			exe = exe[:len(exe)-len(deleted)]
		}
		return exe, nil
	case errors.Is(err, fs.ErrPermission):
		return "", nil
	case errors.Is(err, fs.ErrNotExist):
		// A kernel thread or a zombie has no executable; tell them from a
		// process that went by the directory.
		if Exists(pid) {
			return "", nil
		}
		return "", gone(pid, err)
	}
	return "", gone(pid, err)
}

// Gone is err, a failed read of a file of process pid, marked as the
// process's absence (ErrNoProcess, fs.ErrNotExist) where it says so:
// for reads of /proc/PID files done outside this package.
func Gone(pid int, err error) error {
	if err == nil {
		return nil
	}
	return gone(pid, err)
}

// LastCPU is the CPU thread tid last ran on (ParseLastCPU).
func LastCPU(tid int) (int, error) {
	b, err := ReadSmall(dir(tid) + "/stat")
	if err != nil {
		return 0, gone(tid, err)
	}
	return ParseLastCPU(b)
}

// ReadSchedstat reads a thread's /proc/TID/schedstat (the kernel
// resolves any thread id there); an ended thread is ErrNoProcess.
func ReadSchedstat(tid int) (Schedstat, error) {
	b, err := ReadSmall(dir(tid) + "/schedstat")
	if err != nil {
		return Schedstat{}, gone(tid, err)
	}
	return ParseSchedstat(b)
}

// ReadCPUIdle reads the host's idle time so far from /proc/stat (all
// CPUs together; 10 ms resolution).
func ReadCPUIdle() (time.Duration, error) {
	b, err := os.ReadFile(Root + "/stat")
	if err != nil {
		return 0, err
	}
	return ParseCPUIdle(b)
}
