package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// joinScope moves pid into the group's scope, which systemd starts with
// pid when it is not there (no process of the lane yet, or all exited and
// systemd stopped it). A scope that is stopping as pid comes is waited
// out and started again.
func (g Group) joinScope(pid int) error {
	var last error
	for attempt := 0; attempt < 20; attempt++ {
		err := moveProc(g.members, pid)
		var pe *ProcessError
		if err == nil || errors.As(err, &pe) {
			return err
		}
		if !errors.Is(err, os.ErrNotExist) {
			return err
		}
		err = g.units.StartScope(g.scope, g.slice, pid)
		if err == nil {
			return nil
		}
		if _, serr := os.Stat(fmt.Sprintf("/proc/%d", pid)); serr != nil {
			return fmt.Errorf("move process %d to %s: %w", pid, g.scope, &ProcessError{PID: pid})
		}
		last = err
		time.Sleep(25 * time.Millisecond) // the old scope is going away
	}
	return fmt.Errorf("move process %d to %s: %w", pid, g.scope, last)
}

// removeUnits stops the group's scope and slice once the scope holds no
// process (ErrBusy while it does), and checks that systemd removed the
// slice's directory.
func (g Group) removeUnits() error {
	if pids, err := readPids(filepath.Join(g.members, "cgroup.procs")); err == nil && len(pids) > 0 {
		return fmt.Errorf("remove %s: %w", g.scope, ErrBusy)
	}
	if err := g.units.Stop(g.scope); err != nil {
		return fmt.Errorf("remove %s: %w", g.scope, err)
	}
	// Units a user put in the lane (Slice= in their unit files) keep the
	// slice: stopping it would stop them.
	if others := g.otherUnits(); len(others) > 0 {
		return fmt.Errorf("remove %s: it holds units lanes did not start (%s): %w", g.slice, strings.Join(others, ", "), ErrBusy)
	}
	if err := g.units.Stop(g.slice); err != nil {
		return fmt.Errorf("remove %s: %w", g.slice, err)
	}
	for i := 0; i < 100; i++ {
		if _, err := os.Stat(g.v2); errors.Is(err, os.ErrNotExist) {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("remove %s: systemd stopped it but %s is still there: %w", g.slice, g.v2, ErrBusy)
}

// restoreUnit puts pid back into the cgroup path it came from under
// systemd (its unit's group, which systemd counts as the unit's again).
// Where that group is gone (its unit stopped meanwhile, or a scope lanes
// moved whole, which systemd then let go), a scope is started again under
// its old name in the slice that held it; where that cannot be, the
// process goes into a new scope, "lanes-restored-PID.scope", in that
// slice or the nearest slice above that is still there.
func (h *Hierarchy) restoreUnit(pid int, path string) error {
	rel := filepath.Clean("/" + path)
	err := moveProc(filepath.Join(h.V2Root, rel), pid)
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		return err
	}
	slice := "-.slice"
	for _, d := range SystemSlices(rel) {
		if _, serr := os.Stat(filepath.Join(h.V2Root, d)); serr == nil {
			slice = filepath.Base(d)
			break
		}
	}
	if base := filepath.Base(rel); strings.HasSuffix(base, ".scope") && filepath.Base(filepath.Dir(rel)) == slice {
		if err := h.Units.StartScope(base, slice, pid); err == nil {
			return nil
		}
	}
	scope := "lanes-restored-" + strconv.Itoa(pid) + ".scope"
	if err := h.Units.StartScope(scope, slice, pid); err != nil {
		return fmt.Errorf("put process %d back (its group %s is gone) into %s in %s: %w", pid, rel, scope, slice, err)
	}
	return nil
}

// otherUnits lists the units in the group's slice other than its scope
// (their cgroups, which systemd names after them).
func (g Group) otherUnits() []string {
	ents, err := os.ReadDir(g.v2)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() && n != g.scope && (strings.HasSuffix(n, ".service") || strings.HasSuffix(n, ".scope") || strings.HasSuffix(n, ".slice")) {
			out = append(out, n)
		}
	}
	return out
}
