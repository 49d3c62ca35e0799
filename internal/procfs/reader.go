package procfs

import "strconv"

// Reader reads /proc/PID files of many processes into buffers it reuses:
// the placement of a process storm reads a few files of every exec. A
// Reader is not safe for concurrent use; what its methods return as
// []byte is valid until the next call.
type Reader struct {
	path []byte // "/proc/PID/name\x00"
	buf  []byte
}

// setPath builds /proc/PID/name, NUL-terminated, in r.path.
func (r *Reader) setPath(pid int, name string) {
	p := append(r.path[:0], Root...)
	p = append(p, '/')
	p = strconv.AppendInt(p, int64(pid), 10)
	p = append(p, '/')
	p = append(p, name...)
	r.path = append(p, 0)
}

// File reads /proc/PID/name (e.g. "cgroup").
func (r *Reader) File(pid int, name string) ([]byte, error) {
	if pid <= 0 {
		return nil, &goneError{pid: pid, err: errNoPID}
	}
	r.setPath(pid, name)
	b, err := readInto(r.path, r.buf[:0])
	if cap(b) > cap(r.buf) {
		r.buf = b[:0]
	}
	if err != nil {
		return nil, gone(pid, err)
	}
	return b, nil
}

// Stat reads and parses /proc/PID/stat.
func (r *Reader) Stat(pid int) (Stat, error) {
	b, err := r.File(pid, "stat")
	if err != nil {
		return Stat{}, err
	}
	return ParseStat(b)
}

// UIDs reads the uids of pid from /proc/PID/status.
func (r *Reader) UIDs(pid int) (UIDs, error) {
	b, err := r.File(pid, "status")
	if err != nil {
		return UIDs{}, err
	}
	u, err := ParseStatus(b)
	if err != nil && !Exists(pid) {
		return u, &goneError{pid: pid, err: err}
	}
	return u, err
}

// Exe is the package's Exe, reading the link into r's buffer.
func (r *Reader) Exe(pid int) (string, error) {
	if pid <= 0 {
		return "", &goneError{pid: pid, err: errNoPID}
	}
	r.setPath(pid, "exe")
	if cap(r.buf) < 4096 {
		r.buf = make([]byte, 0, 4096)
	}
	n, err := readlinkInto(r.path, r.buf[:cap(r.buf)])
	if err != nil {
		return exeResult(pid, "", err)
	}
	return exeResult(pid, string(r.buf[:n]), nil)
}

// Children is the package's Children through r's buffers.
func (r *Reader) Children(pid, tid int) ([]int, error) {
	b, err := r.File(pid, "task/"+strconv.Itoa(tid)+"/children")
	if err != nil || len(b) == 0 {
		return nil, err
	}
	return ParsePIDs(b)
}
