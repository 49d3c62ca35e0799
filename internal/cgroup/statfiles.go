package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// StatFiles reads a group's counter files (CPUStat, IOStat) through file
// descriptors it keeps open, reading each again from offset 0: cgroupfs
// regenerates a file's text on a read at offset 0, and a poll every 100
// ms of ten lanes then costs reads only, not a path walk and an open per
// file (which were most of the lane monitors' CPU time). A file that
// fails is closed and opened again on the next read; one that does not
// exist is not tried again. Not safe for concurrent use. Close it.
type StatFiles struct {
	g       Group
	files   map[string]*os.File
	missing map[string]bool
	buf     []byte
	procsID uint64 // ProcsDirID's, 0 until asked
}

// StatFiles returns a reader of g's counter files.
func (g Group) StatFiles() *StatFiles {
	return &StatFiles{g: g, files: map[string]*os.File{}, missing: map[string]bool{}, buf: make([]byte, 4096)}
}

// CPUStat is Group.CPUStat through the open files.
func (s *StatFiles) CPUStat() (CPUStat, error) { return s.g.cpuStat(s.read, s.has) }

// IOStat is Group.IOStat through the open files.
func (s *StatFiles) IOStat() (IOStat, error) { return s.g.ioStat(s.read) }

// ReadFile reads one of the group's files through an open descriptor
// (Group.ReadFile's text).
func (s *StatFiles) ReadFile(ctrl, file string) (string, error) { return s.read(ctrl, file) }

// CountProcs is how many processes the group holds, for a gauge: from the
// v2 group where there is one (on hybrid hosts it holds the same
// processes as the v1 cpu group, and the kernel lists a v2 group's
// without building and sorting the pid list v1 keeps), counted without
// parsing.
func (s *StatFiles) CountProcs() (int, error) {
	ctrl := V2
	switch {
	case s.g.members != "":
		ctrl = Members
	case s.g.v2 == "" && s.g.cpu != "":
		ctrl = CPU
	}
	text, err := s.read(ctrl, "cgroup.procs")
	if s.g.members != "" && errors.Is(err, fs.ErrNotExist) {
		return 0, nil // no scope: no processes
	}
	if err != nil {
		return 0, err
	}
	if text == "" {
		return 0, nil
	}
	return strings.Count(text, "\n") + 1, nil
}

// ProcsDirID is the cgroup v2 id (the directory's inode) of the group
// whose processes CountProcs counts, for a count made in the kernel
// (package procwatch's Counter); an error where that group is a v1 one
// (no v2 id) or does not exist. The id is kept until ForgetProcsDirID.
func (s *StatFiles) ProcsDirID() (uint64, error) {
	if s.procsID != 0 {
		return s.procsID, nil
	}
	var dir string
	switch {
	case s.g.members != "":
		dir = s.g.members // the scope, in v2
	case s.g.v2 != "":
		dir = s.g.v2
	default:
		return 0, fmt.Errorf("group %s: no cgroup v2 group", s.g.name)
	}
	id, err := dirIno(dir)
	if err != nil {
		return 0, err
	}
	s.procsID = id
	return id, nil
}

// ForgetProcsDirID drops the id ProcsDirID keeps: its group is gone (a
// scope ended) and may be made again under another.
func (s *StatFiles) ForgetProcsDirID() { s.procsID = 0 }

// Close closes the files.
func (s *StatFiles) Close() error {
	var errs []error
	for k, f := range s.files {
		errs = append(errs, f.Close())
		delete(s.files, k)
	}
	return errors.Join(errs...)
}

func (s *StatFiles) has(ctrl, file string) bool {
	_, err := s.open(ctrl, file)
	return err == nil
}

func (s *StatFiles) open(ctrl, file string) (*os.File, error) {
	key := ctrl + "/" + file
	if f := s.files[key]; f != nil {
		return f, nil
	}
	if s.missing[key] {
		return nil, fmt.Errorf("group %s: %s: %w", s.g.name, file, fs.ErrNotExist)
	}
	dir, err := s.g.Dir(ctrl)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(filepath.Join(dir, file))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) && ctrl != Members {
			s.missing[key] = true // a scope comes and goes; the rest stays
		}
		return nil, fmt.Errorf("read %s: %w", filepath.Join(dir, file), err)
	}
	s.files[key] = f
	return f, nil
}

func (s *StatFiles) read(ctrl, file string) (string, error) {
	f, err := s.open(ctrl, file)
	if err != nil {
		return "", err
	}
	// A counter file's text is one seq_file record, which a read at
	// offset 0 copies whole when it fits: one pread, where ReadAt makes a
	// second to see the end. cgroup.procs is a record per process, and a
	// read stops at the first that does not fit: it is read to the end.
	whole := file != "cgroup.procs"
	n := 0
	for {
		m, err := preadAt(f, s.buf[n:], int64(n))
		n += m
		if err != nil {
			f.Close()
			delete(s.files, ctrl+"/"+file)
			return "", fmt.Errorf("read %s: %w", f.Name(), err)
		}
		if m == 0 || (whole && n < len(s.buf)) {
			break
		}
		if n == len(s.buf) {
			if whole {
				n = 0 // a larger buffer, and the record read again whole
			}
			s.buf = append(s.buf, make([]byte, len(s.buf))...)
		}
	}
	return strings.TrimRight(string(s.buf[:n]), "\n"), nil
}

// preadAt is one pread(2): unlike File.ReadAt it does not read on to
// fill b.
func preadAt(f *os.File, b []byte, off int64) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	var n int
	var rerr error
	if err := rc.Read(func(fd uintptr) bool {
		n, rerr = syscall.Pread(int(fd), b, off)
		return true
	}); err != nil {
		return 0, err
	}
	if rerr != nil {
		return 0, rerr
	}
	return n, nil
}
