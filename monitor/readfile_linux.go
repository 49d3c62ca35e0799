package monitor

import (
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// ReadSmall reads a small /proc or cgroupfs file with three system calls
// (open, read, close), where os.ReadFile needs five or more (it also stats
// the file and reads until EOF): the placement of a process storm reads
// several per process. It relies on those file systems filling a read as
// far as the file goes, so it is not for regular files. Files larger than 64 KiB are read whole by
// os.ReadFile. Errors are *fs.PathError, as os.ReadFile's.
func ReadSmall(path string) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	for err == unix.EINTR {
		fd, err = unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	buf := make([]byte, 4096)
	n := 0
	for {
		m, err := unix.Read(fd, buf[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
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
		if n == len(buf) {
			if len(buf) >= 64<<10 {
				return os.ReadFile(path)
			}
			buf = append(buf, make([]byte, len(buf))...)
		}
	}
}
