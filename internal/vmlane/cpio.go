package vmlane

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// Mode bits of cpio newc entries.
const (
	modeDir  = 0o040000
	modeFile = 0o100000
	modeLink = 0o120000
	modeChar = 0o020000
)

// entry is one file of an initramfs.
type entry struct {
	mode  uint32 // type and permission bits
	data  []byte // contents (files) or target (symlinks)
	from  string // or: copy the contents of this host file
	major uint32 // device numbers for device nodes
	minor uint32
	uid   uint32 // owner; root unless Chown says otherwise
	gid   uint32
}

// Tree is an initramfs being assembled: paths (without leading slash) to
// entries. Parent directories are added as needed.
type Tree map[string]entry

// Dir adds a directory.
func (t Tree) Dir(p string) {
	p = clean(p)
	for d := p; d != "." && d != "/" && d != ""; d = path.Dir(d) {
		if _, ok := t[d]; !ok {
			t[d] = entry{mode: modeDir | 0o755}
		}
	}
}

// File adds a file with the given contents.
func (t Tree) File(p string, perm uint32, data []byte) {
	p = clean(p)
	t.Dir(path.Dir(p))
	t[p] = entry{mode: modeFile | perm, data: data}
}

// Copy adds a file with the contents of a host file, read when the
// archive is written.
func (t Tree) Copy(p string, perm uint32, from string) {
	p = clean(p)
	t.Dir(path.Dir(p))
	t[p] = entry{mode: modeFile | perm, from: from}
}

// Symlink adds a symbolic link.
func (t Tree) Symlink(p, target string) {
	p = clean(p)
	t.Dir(path.Dir(p))
	t[p] = entry{mode: modeLink | 0o777, data: []byte(target)}
}

// CharDev adds a character device node.
func (t Tree) CharDev(p string, major, minor uint32) {
	p = clean(p)
	t.Dir(path.Dir(p))
	t[p] = entry{mode: modeChar | 0o600, major: major, minor: minor}
}

// Chmod sets the permission bits of an entry already in the tree,
// setuid, setgid and sticky (0o7777) included.
func (t Tree) Chmod(p string, perm uint32) {
	p = clean(p)
	if e, ok := t[p]; ok {
		e.mode = e.mode&0o170000 | perm&0o7777
		t[p] = e
	}
}

// Chown sets the owner of an entry already in the tree.
func (t Tree) Chown(p string, uid, gid uint32) {
	p = clean(p)
	if e, ok := t[p]; ok {
		e.uid, e.gid = uid, gid
		t[p] = e
	}
}

// CopyTree adds the host directory src at dst: directories, regular
// files and symlinks with their modes and owners. skip, given the path
// relative to src ("." for src itself), leaves a directory's contents or
// a file out. Device nodes, sockets and fifos are left out; hard links
// become separate copies.
func (t Tree) CopyTree(dst, src string, skip func(rel string) bool) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("copy %s: %w", src, err)
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if skip != nil && skip(filepath.ToSlash(rel)) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		info, err := os.Lstat(p)
		if err != nil {
			return fmt.Errorf("copy %s: %w", src, err)
		}
		to := path.Join(dst, filepath.ToSlash(rel))
		switch m := info.Mode(); {
		case m.IsDir():
			t.Dir(to)
		case m.IsRegular():
			t.Copy(to, 0, p)
		case m&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return fmt.Errorf("copy %s: %w", src, err)
			}
			t.Symlink(to, target)
			return nil
		default:
			return nil
		}
		t.Chmod(to, permBits(info.Mode()))
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			t.Chown(to, st.Uid, st.Gid)
		}
		return nil
	})
}

// permBits converts a Go file mode's permission, setuid, setgid and
// sticky bits to their Unix values.
func permBits(m fs.FileMode) uint32 {
	perm := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		perm |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		perm |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		perm |= 0o1000
	}
	return perm
}

func clean(p string) string { return strings.TrimPrefix(path.Clean("/"+p), "/") }

// WriteCpio writes the tree as a cpio archive in the "newc" format the
// kernel unpacks, parents before children.
func (t Tree) WriteCpio(w io.Writer) (int64, error) {
	names := make([]string, 0, len(t))
	for n := range t {
		names = append(names, n)
	}
	sort.Strings(names) // a parent sorts before its children
	cw := &countWriter{w: w}
	for i, n := range names {
		e := t[n]
		data := e.data
		if e.from != "" {
			b, err := os.ReadFile(e.from)
			if err != nil {
				return cw.n, fmt.Errorf("initramfs %s: %w", n, err)
			}
			data = b
		}
		if err := writeCpioEntry(cw, uint32(i+1), n, e, data); err != nil {
			return cw.n, err
		}
	}
	if err := writeCpioEntry(cw, 0, "TRAILER!!!", entry{}, nil); err != nil {
		return cw.n, err
	}
	return cw.n, nil
}

func writeCpioEntry(w *countWriter, ino uint32, name string, e entry, data []byte) error {
	nlink := uint32(1)
	if e.mode&0o170000 == modeDir {
		nlink = 2
	}
	hdr := fmt.Sprintf("070701%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x",
		ino, e.mode, e.uid, e.gid, nlink, 0, len(data), 0, 0, e.major, e.minor, len(name)+1, 0)
	if _, err := io.WriteString(w, hdr+name+"\x00"); err != nil {
		return fmt.Errorf("write initramfs: %w", err)
	}
	if err := w.pad(); err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		return fmt.Errorf("write initramfs: %w", err)
	}
	return w.pad()
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func (c *countWriter) pad() error {
	if r := c.n % 4; r != 0 {
		if _, err := c.Write(make([]byte, 4-r)); err != nil {
			return fmt.Errorf("write initramfs: %w", err)
		}
	}
	return nil
}
