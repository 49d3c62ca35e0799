package cgroup

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// IDs name a process's groups by their kernfs ids, as the kernel (and
// BPF) knows them: the inode numbers of the groups' directories. V2 is its
// group in the v2 hierarchy, CPU and IO its groups in the hierarchies of
// the cpu and io (blkio) controllers; 0 where there is none.
type IDs struct{ V2, CPU, IO uint64 }

// membershipCacheMax bounds the cache; it is emptied when full.
const membershipCacheMax = 4096

// MembershipCache turns a process's group ids into its Membership in the
// hierarchies lanes moves processes in (v2, and the v1 hierarchies of cpu
// and blkio with the controllers mounted with them), reading
// /proc/PID/cgroup only for ids it has not seen. A group's id is never
// reused, so an entry stays true while the group exists; entries are
// made only after each path's directory was found to have the id. A
// group renamed after its entry was made keeps its old path here.
// Safe for concurrent use.
type MembershipCache struct {
	h  *Hierarchy
	mu sync.Mutex
	m  map[IDs]Membership
}

// NewMembershipCache returns an empty cache for hierarchy h.
func NewMembershipCache(h *Hierarchy) *MembershipCache {
	return &MembershipCache{h: h, m: map[IDs]Membership{}}
}

// key keeps the ids of the hierarchies h has: on a v2-only host the cpu
// and io ids are v2 groups (the nearest ancestor with the controller),
// which say nothing more.
func (c *MembershipCache) key(ids IDs) IDs {
	var k IDs
	if c.h.V2Root != "" {
		k.V2 = ids.V2
	}
	if c.h.CPURoot != "" {
		k.CPU = ids.CPU
	}
	if c.h.BlkioRoot != "" && c.h.BlkioRoot != c.h.CPURoot {
		k.IO = ids.IO
	}
	return k
}

// Lookup returns the membership of the groups ids names; where they are
// not known it calls read for the text of the process's /proc/PID/cgroup
// and, when every group's directory has its id, remembers the answer. The
// Membership returned is shared: callers must not change its V1 map. It
// holds the v2 path and the paths of the hierarchies lanes moves
// processes in; a caller that needs others (name=systemd) reads the file.
func (c *MembershipCache) Lookup(ids IDs, read func() ([]byte, error)) (Membership, error) {
	k := c.key(ids)
	c.mu.Lock()
	m, ok := c.m[k]
	c.mu.Unlock()
	if ok {
		return m, nil
	}
	b, err := read()
	if err != nil {
		return Membership{}, err
	}
	full, err := ParseMembership(string(b))
	if err != nil {
		return Membership{}, err
	}
	m = c.trim(full)
	if c.verify(k, m) {
		c.mu.Lock()
		if len(c.m) >= membershipCacheMax {
			clear(c.m)
		}
		c.m[k] = m
		c.mu.Unlock()
	}
	return m, nil
}

// trim keeps the v2 path and the v1 paths of the hierarchies of cpu and
// blkio (every controller mounted with them).
func (c *MembershipCache) trim(full Membership) Membership {
	m := Membership{V2: full.V2, V1: map[string]string{}}
	for ctrl, p := range full.V1 {
		if root := c.h.V1[ctrl]; root != "" && (root == c.h.CPURoot || root == c.h.BlkioRoot) {
			m.V1[ctrl] = p
		}
	}
	return m
}

// verify checks that each path of m in a hierarchy the key holds is the
// directory with the key's id (the process may have moved between its ids
// and the reading of its file). An id of 0 in such a hierarchy (the kernel
// did not say) is not verified, and not remembered.
func (c *MembershipCache) verify(k IDs, m Membership) bool {
	check := func(id uint64, root, path string, present bool) bool {
		if id == 0 || !present {
			return false
		}
		ino, err := dirIno(filepath.Join(root, filepath.Clean("/"+path)))
		return err == nil && ino == id
	}
	if c.h.V2Root != "" && !check(k.V2, c.h.V2Root, m.V2, m.V2 != "") {
		return false
	}
	if c.h.CPURoot != "" {
		p, ok := m.V1[CPU]
		if !check(k.CPU, c.h.CPURoot, p, ok) {
			return false
		}
	}
	if c.h.BlkioRoot != "" && c.h.BlkioRoot != c.h.CPURoot {
		p, ok := m.V1["blkio"]
		if !check(k.IO, c.h.BlkioRoot, p, ok) {
			return false
		}
	}
	return true
}

// Len is the number of entries (tests).
func (c *MembershipCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// dirIno is the inode number of a directory (a group's kernfs id).
func dirIno(dir string) (uint64, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return 0, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, fmt.Errorf("stat %s: no inode number", dir)
	}
	return uint64(st.Ino), nil
}

// GroupIDs returns the ids of the groups of membership m in h (the
// directories' inode numbers), for tests and for callers that hold a
// membership but not ids.
func (h *Hierarchy) GroupIDs(m Membership) (IDs, error) {
	var ids IDs
	var err error
	if h.V2Root != "" && m.V2 != "" {
		if ids.V2, err = dirIno(filepath.Join(h.V2Root, filepath.Clean("/"+m.V2))); err != nil {
			return IDs{}, err
		}
	}
	if p, ok := m.V1[CPU]; ok && h.CPURoot != "" {
		if ids.CPU, err = dirIno(filepath.Join(h.CPURoot, filepath.Clean("/"+p))); err != nil {
			return IDs{}, err
		}
	}
	if p, ok := m.V1["blkio"]; ok && h.BlkioRoot != "" {
		if ids.IO, err = dirIno(filepath.Join(h.BlkioRoot, filepath.Clean("/"+p))); err != nil {
			return IDs{}, err
		}
	}
	return ids, nil
}
