package cgroup

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
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
	n := 0
	for {
		m, err := f.ReadAt(s.buf[n:], int64(n))
		n += m
		if err == io.EOF || (err == nil && n < len(s.buf)) {
			break
		}
		if err != nil {
			f.Close()
			delete(s.files, ctrl+"/"+file)
			return "", fmt.Errorf("read %s: %w", f.Name(), err)
		}
		s.buf = append(s.buf, make([]byte, len(s.buf))...) // full: read on into a larger buffer
	}
	return strings.TrimRight(string(s.buf[:n]), "\n"), nil
}
