package cgroup

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Notes are small records a group keeps about itself, as extended
// attributes of its directory (where membership is read): lanes' second
// record of where each process it moved came from, which outlives a lost
// or corrupt state database as long as the group exists. cgroupfs keeps
// "trusted." attributes for root on v1 and v2 hierarchies, without the
// count and size limits it puts on "user." ones (kernel 5.7 and later:
// 128 per directory); the namespace is probed on first use.

// notePrefix is the attribute name of a note after its namespace.
const notePrefix = "lanes."

var (
	nsOnce sync.Once
	ns     string // "trusted.", "user.", or "" when neither works
	nsErr  error
)

// ErrNoNotes says this host's cgroupfs keeps no extended attributes lanes
// can write.
var ErrNoNotes = errors.New("cgroupfs keeps no trusted. or user. extended attributes here")

// probeNamespace finds which xattr namespace dir accepts.
func probeNamespace(dir string) {
	var errs []string
	for _, n := range []string{"trusted.", "user."} {
		name := n + notePrefix + "probe"
		err := unix.Setxattr(dir, name, []byte("1"), 0)
		if err == nil {
			unix.Removexattr(dir, name)
			ns = n
			return
		}
		errs = append(errs, fmt.Sprintf("%s: %v", n, err))
	}
	nsErr = fmt.Errorf("%w (%s)", ErrNoNotes, strings.Join(errs, "; "))
}

// NoteNamespace returns the xattr namespace notes use ("trusted." or
// "user."), probing on g if not yet done; an error wrapping ErrNoNotes when
// neither works.
func (g Group) NoteNamespace() (string, error) {
	d := g.noteDir()
	if d == "" {
		return "", fmt.Errorf("group %s: %w", g.name, ErrNoHierarchy)
	}
	nsOnce.Do(func() { probeNamespace(d) })
	return ns, nsErr
}

// SetNote stores val under key (e.g. "p.4242") in the group.
func (g Group) SetNote(key string, val []byte) error {
	n, err := g.NoteNamespace()
	if err != nil {
		return err
	}
	if err := unix.Setxattr(g.noteDir(), n+notePrefix+key, val, 0); err != nil {
		return fmt.Errorf("group %s: note %s: %w", g.name, key, err)
	}
	return nil
}

// RemoveNote removes the note key; a missing note (or group) is not an error.
func (g Group) RemoveNote(key string) error {
	n, err := g.NoteNamespace()
	if err != nil {
		return err
	}
	err = unix.Removexattr(g.noteDir(), n+notePrefix+key)
	if err == nil || errors.Is(err, unix.ENODATA) || errors.Is(err, unix.ENOENT) {
		return nil
	}
	return fmt.Errorf("group %s: remove note %s: %w", g.name, key, err)
}

// Notes returns the group's notes whose keys start with prefix, by key.
func (g Group) Notes(prefix string) (map[string][]byte, error) {
	n, err := g.NoteNamespace()
	if err != nil {
		return nil, err
	}
	dir := g.noteDir()
	size, err := unix.Listxattr(dir, nil)
	if err != nil {
		return nil, fmt.Errorf("group %s: list notes: %w", g.name, err)
	}
	buf := make([]byte, size+4096)
	size, err = unix.Listxattr(dir, buf)
	if err != nil {
		return nil, fmt.Errorf("group %s: list notes: %w", g.name, err)
	}
	out := map[string][]byte{}
	want := n + notePrefix + prefix
	var errs []error
	for _, name := range strings.Split(string(buf[:size]), "\x00") {
		if !strings.HasPrefix(name, want) {
			continue
		}
		val, err := getxattr(dir, name)
		if err != nil {
			if errors.Is(err, unix.ENODATA) {
				continue // removed meanwhile
			}
			errs = append(errs, fmt.Errorf("group %s: read note %s: %w", g.name, name, err))
			continue
		}
		out[strings.TrimPrefix(name, n+notePrefix)] = val
	}
	return out, errors.Join(errs...)
}

func getxattr(path, name string) ([]byte, error) {
	for {
		size, err := unix.Getxattr(path, name, nil)
		if err != nil {
			return nil, err
		}
		buf := make([]byte, size)
		n, err := unix.Getxattr(path, name, buf)
		if errors.Is(err, unix.ERANGE) {
			continue // grew meanwhile
		}
		if err != nil {
			return nil, err
		}
		return buf[:n], nil
	}
}

// noteDir holds the notes: where membership is read, but the slice under
// systemd (its scope comes and goes with the processes).
func (g Group) noteDir() string {
	if g.members != "" {
		return g.v2
	}
	return g.membersDir()
}

// delegated says whether systemd delegated the cgroup at dir (an absolute
// path in the v2 mount) to a manager of its own: the attribute systemd
// sets on a Delegate=yes unit's cgroup.
func delegated(dir string) bool {
	var b [8]byte
	for _, name := range []string{"trusted.delegate", "user.delegate"} {
		if n, err := unix.Getxattr(dir, name, b[:]); err == nil && n > 0 && b[0] == '1' {
			return true
		}
	}
	return false
}
