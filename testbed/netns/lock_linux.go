package netns

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// LockPath is the lock file that serializes testbed users on a host.
const LockPath = "/run/lanes-testbed.lock"

// LockHost waits until no other process uses the testbed on this host
// (benchmark runs and the emulator tests disturb each other's figures on a
// small machine) and returns the function that releases the host. The
// lock is released when the process exits, however it exits. A process
// whose ancestor holds the lock (`flock /run/lanes-testbed.lock go test
// ./testbed/...`) runs under that ancestor's hold: waiting for it would
// wait for itself.
func LockHost(ctx context.Context, waiting func()) (func(), error) {
	return lockFile(ctx, LockPath, waiting)
}

func lockFile(ctx context.Context, path string, waiting func()) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock testbed: %w", err)
	}
	told := false
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock testbed %s: %w", path, err)
		}
		if held, err := heldByAncestor(f); err != nil {
			f.Close()
			return nil, fmt.Errorf("lock testbed %s: %w", path, err)
		} else if held {
			f.Close()
			return func() {}, nil
		}
		if !told && waiting != nil {
			waiting()
			told = true
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("lock testbed: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// heldByAncestor tells whether the exclusive flock on f's file is held by
// this process's parent or one of its ancestors, as /proc/locks names the
// holder (the process that took the lock; waiters are marked "->").
func heldByAncestor(f *os.File) (bool, error) {
	holders, err := lockHolders(f)
	if err != nil || len(holders) == 0 {
		return false, err
	}
	for pid, seen := os.Getppid(), 0; pid > 1 && seen < 64; seen++ {
		if holders[pid] {
			return true, nil
		}
		if pid, err = parentOf(pid); err != nil {
			return false, nil // the ancestor exited: not ours
		}
	}
	return false, nil
}

// lockHolders returns the pids that hold an exclusive flock on f's file.
func lockHolders(f *os.File) (map[int]bool, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, fmt.Errorf("stat: %w", err)
	}
	locks, err := os.ReadFile("/proc/locks")
	if err != nil {
		return nil, err
	}
	return flockHolders(string(locks), unix.Major(uint64(st.Dev)), unix.Minor(uint64(st.Dev)), st.Ino), nil
}

// flockHolders returns the pids holding an exclusive FLOCK on the file
// (dev major:minor, inode) in the text of /proc/locks, e.g.
// "1: FLOCK  ADVISORY  WRITE 4830 fe:00:9773057 0 EOF".
func flockHolders(locks string, major, minor uint32, ino uint64) map[int]bool {
	want := fmt.Sprintf("%02x:%02x:%d", major, minor, ino)
	holders := map[int]bool{}
	for _, line := range strings.Split(locks, "\n") {
		fs := strings.Fields(line)
		if len(fs) < 6 || fs[1] != "FLOCK" || fs[3] != "WRITE" || !sameFileID(fs[5], want) {
			continue // waiters have "->" in fs[1]
		}
		if pid, err := strconv.Atoi(fs[4]); err == nil {
			holders[pid] = true
		}
	}
	return holders
}

// sameFileID compares /proc/locks' "maj:min:ino" fields numerically (the
// kernel prints the device numbers in hex, at least two digits).
func sameFileID(a, b string) bool {
	pa, pb := strings.Split(a, ":"), strings.Split(b, ":")
	if len(pa) != 3 || len(pb) != 3 {
		return false
	}
	for i, base := range []int{16, 16, 10} {
		x, err1 := strconv.ParseUint(pa[i], base, 64)
		y, err2 := strconv.ParseUint(pb[i], base, 64)
		if err1 != nil || err2 != nil || x != y {
			return false
		}
	}
	return true
}

// parentOf reads a process's parent from /proc/PID/stat (field 4, after
// the parenthesised command name, which may hold spaces).
func parentOf(pid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	fs := strings.Fields(s[i+1:])
	if len(fs) < 2 {
		return 0, fmt.Errorf("/proc/%d/stat: short", pid)
	}
	return strconv.Atoi(fs[1])
}
