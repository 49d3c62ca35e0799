//go:build !linux

package cgroup

import (
	"errors"
	"fmt"
)

var errUnsupported = fmt.Errorf("cgroups: %w", errors.ErrUnsupported)

// Detect is not supported outside Linux.
func Detect() (*Hierarchy, error) { return nil, errUnsupported }

// Undo is not supported outside Linux.
func (h *Hierarchy) Undo() error { return errUnsupported }

// Create is not supported outside Linux.
func (g Group) Create() (bool, error) { return false, errUnsupported }

// Exists is always false outside Linux.
func (g Group) Exists() bool { return false }

// Remove is not supported outside Linux.
func (g Group) Remove() error { return errUnsupported }

// AddProc is not supported outside Linux.
func (g Group) AddProc(pid int) error { return errUnsupported }

// Procs is not supported outside Linux.
func (g Group) Procs() ([]int, error) { return nil, errUnsupported }

// ProcMembership is not supported outside Linux.
func ProcMembership(pid int) (Membership, error) { return Membership{}, errUnsupported }

// Restore is not supported outside Linux.
func (h *Hierarchy) Restore(pid int, m Membership) error { return errUnsupported }

// ListGroups is not supported outside Linux.
func (h *Hierarchy) ListGroups(prefix string) ([]Group, error) { return nil, errUnsupported }

// Descendants is not supported outside Linux.
func Descendants(pid int) ([]int, error) { return nil, errUnsupported }

// Threads is not supported outside Linux.
func Threads(pid int) ([]int, error) { return nil, errUnsupported }

// ParentPID is not supported outside Linux.
func ParentPID(pid int) (int, error) { return 0, errUnsupported }

// AddTree is not supported outside Linux.
func (g Group) AddTree(pid int) ([]int, error) { return nil, errUnsupported }

// ErrNoNotes says this host keeps no group notes.
var ErrNoNotes = errUnsupported

// NoteNamespace is not supported outside Linux.
func (g Group) NoteNamespace() (string, error) { return "", errUnsupported }

// SetNote is not supported outside Linux.
func (g Group) SetNote(key string, val []byte) error { return errUnsupported }

// RemoveNote is not supported outside Linux.
func (g Group) RemoveNote(key string) error { return errUnsupported }

// Notes is not supported outside Linux.
func (g Group) Notes(prefix string) (map[string][]byte, error) { return nil, errUnsupported }

// Procs is not supported outside Linux.
type Procs struct{}

// OpenProcs is not supported outside Linux.
func (g Group) OpenProcs() (*Procs, error) { return nil, errUnsupported }

// Add is not supported outside Linux.
func (p *Procs) Add(pid int) error { return errUnsupported }

// Close is not supported outside Linux.
func (p *Procs) Close() error { return errUnsupported }

// ReadProcs is not supported outside Linux.
func ReadProcs(h *Hierarchy, path string) ([]int, error) { return nil, errUnsupported }

// delegated is always false outside Linux.
func delegated(dir string) bool { return false }
