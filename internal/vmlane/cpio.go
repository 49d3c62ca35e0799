package vmlane

import (
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
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
		ino, e.mode, 0, 0, nlink, 0, len(data), 0, 0, e.major, e.minor, len(name)+1, 0)
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
