package procfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

var errNoPID = unix.ESRCH

// atFDCWD is a variable: uintptr of the negative constant does not compile.
var atFDCWD = unix.AT_FDCWD

// ReadSmall reads a small /proc or cgroupfs file with three system calls
// (open, read, close), where os.ReadFile needs five or more (it also stats
// the file and reads until EOF). It relies on those file systems filling a
// read as far as the file goes, so it is not for regular files. Files
// larger than 64 KiB are read whole by os.ReadFile. Errors are
// *fs.PathError, as os.ReadFile's.
func ReadSmall(path string) ([]byte, error) {
	p, err := unix.BytePtrFromString(path)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	return readPtr(path, p, make([]byte, 0, 4096))
}

// readInto is ReadSmall of a NUL-terminated path into buf's storage
// (grown when the file is larger).
func readInto(path []byte, buf []byte) ([]byte, error) {
	if cap(buf) < 4096 {
		buf = make([]byte, 0, 4096)
	}
	return readPtr("", &path[0], buf)
}

func readPtr(name string, p *byte, buf []byte) ([]byte, error) {
	pathErr := func(op string, err error) error {
		if name == "" {
			name = unix.BytePtrToString(p)
		}
		return &fs.PathError{Op: op, Path: name, Err: err}
	}
	var fd int
	for {
		r, _, e := syscall.Syscall6(unix.SYS_OPENAT, uintptr(atFDCWD), uintptr(unsafe.Pointer(p)),
			uintptr(unix.O_RDONLY|unix.O_CLOEXEC), 0, 0, 0)
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return buf[:0], pathErr("open", e)
		}
		fd = int(r)
		break
	}
	defer unix.Close(fd)
	buf = buf[:cap(buf)]
	n := 0
	for {
		m, err := unix.Read(fd, buf[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return buf[:0], pathErr("read", err)
		}
		if m == 0 {
			return buf[:n], nil
		}
		n += m
		if n < len(buf) {
			// procfs (seq_file) and kernfs fill the buffer as far as the
			// file goes: a short read is the end.
			return buf[:n], nil
		}
		if len(buf) >= 64<<10 {
			if name == "" {
				name = unix.BytePtrToString(p)
			}
			b, err := os.ReadFile(name)
			return b, err
		}
		buf = append(buf, make([]byte, len(buf))...)
		buf = buf[:cap(buf)]
	}
}

// readlinkInto reads a symbolic link (NUL-terminated path) into buf.
func readlinkInto(path []byte, buf []byte) (int, error) {
	for {
		r, _, e := syscall.Syscall6(unix.SYS_READLINKAT, uintptr(atFDCWD), uintptr(unsafe.Pointer(&path[0])),
			uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), 0, 0)
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return 0, &fs.PathError{Op: "readlink", Path: string(path[:len(path)-1]), Err: e}
		}
		if int(r) == len(buf) {
			return 0, &fs.PathError{Op: "readlink", Path: string(path[:len(path)-1]), Err: unix.ENAMETOOLONG}
		}
		return int(r), nil
	}
}

// listNumeric lists the numeric names in directory path (PIDs, TIDs) with
// getdents into one buffer: os.ReadDir also stats, sorts and allocates an
// entry per name.
func listNumeric(path string) ([]int, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	for err == unix.EINTR {
		fd, err = unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	var out []int
	buf := make([]byte, 8192)
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "getdents", Path: path, Err: err}
		}
		if n <= 0 {
			return out, nil
		}
		for b := buf[:n]; len(b) >= 19; {
			// struct linux_dirent64: ino u64, off s64, reclen u16, type u8, name.
			reclen := int(b[16]) | int(b[17])<<8
			if reclen < 19 || reclen > len(b) {
				return nil, &fs.PathError{Op: "getdents", Path: path, Err: errors.New("malformed entry")}
			}
			name := b[19:reclen]
			if i := indexNUL(name); i >= 0 {
				name = name[:i]
			}
			if v, err := atoi(name); err == nil && v > 0 {
				out = append(out, v)
			}
			b = b[reclen:]
		}
	}
}

func indexNUL(b []byte) int {
	for i, c := range b {
		if c == 0 {
			return i
		}
	}
	return -1
}

// CPUClock reads a process's CPU time (all its threads) from its CPU
// clock (clock_gettime of MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED)),
// which, unlike /proc's counters, includes the slice running now: exact
// to the nanosecond at any moment.
func CPUClock(pid int) (time.Duration, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(int32((^pid)<<3|2), &ts); err != nil {
		return 0, gone(pid, fmt.Errorf("CPU clock of %d: %w", pid, err))
	}
	return time.Duration(ts.Nano()), nil
}

// Started is when a process started, on the wall clock: its start time
// (ticks after boot) against the boot-time clock, read together with the
// wall clock (a caller's earlier reading of the wall clock would put the
// start early by the time since). Exact to a tick (10 ms).
func Started(pid int) (time.Time, error) {
	st, err := ReadStat(pid)
	if err != nil {
		return time.Time{}, err
	}
	var ts unix.Timespec
	now := time.Now()
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return time.Time{}, fmt.Errorf("boot-time clock: %w", err)
	}
	ago := time.Duration(ts.Nano()) - time.Duration(st.StartTime)*(time.Second/UserHZ)
	return now.Add(-ago), nil
}
