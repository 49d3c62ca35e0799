package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/lanes-qos/lanes/internal/procfs"
)

// Detect finds the cgroup hierarchies from /proc/self/mountinfo. On a
// unified host it makes sure the cpu and io controllers are enabled in the
// root's cgroup.subtree_control, recording in Enabled those it enabled
// itself (see Undo).
func Detect() (*Hierarchy, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("detect cgroups: %w", err)
	}
	h, err := detectMounts(string(b))
	if err != nil {
		return nil, err
	}
	if h.Mode == ModeUnified {
		if err := h.enable("cpu", "io"); err != nil {
			return h, err
		}
	}
	return h, nil
}

// enable turns on the controllers that the v2 root offers but does not yet
// delegate. A controller the kernel does not offer is left for the
// enforcers' probes to report.
func (h *Hierarchy) enable(ctrls ...string) error {
	avail, err := os.ReadFile(filepath.Join(h.V2Root, "cgroup.controllers"))
	if err != nil {
		return fmt.Errorf("read cgroup v2 controllers: %w", err)
	}
	on, err := os.ReadFile(filepath.Join(h.V2Root, "cgroup.subtree_control"))
	if err != nil {
		return fmt.Errorf("read cgroup v2 subtree_control: %w", err)
	}
	var errs []error
	for _, c := range ctrls {
		if !hasWord(string(avail), c) || hasWord(string(on), c) {
			continue
		}
		if err := writeFile(filepath.Join(h.V2Root, "cgroup.subtree_control"), "+"+c); err != nil {
			errs = append(errs, fmt.Errorf("enable cgroup v2 controller %s: %w", c, err))
			continue
		}
		h.Enabled = append(h.Enabled, c)
	}
	return errors.Join(errs...)
}

// Undo disables the controllers Detect enabled.
func (h *Hierarchy) Undo() error {
	var errs []error
	for i := len(h.Enabled) - 1; i >= 0; i-- {
		c := h.Enabled[i]
		if err := writeFile(filepath.Join(h.V2Root, "cgroup.subtree_control"), "-"+c); err != nil {
			errs = append(errs, fmt.Errorf("disable cgroup v2 controller %s: %w", c, err))
			continue
		}
		h.Enabled = h.Enabled[:i]
	}
	return errors.Join(errs...)
}

func hasWord(s, w string) bool {
	for _, f := range strings.Fields(s) {
		if f == w {
			return true
		}
	}
	return false
}

// Create makes the group's directory in every hierarchy. It is idempotent:
// created is true when at least one directory was new.
func (g Group) Create() (created bool, err error) {
	if g.units != nil {
		created, err := g.units.EnsureSlice(g.slice)
		if err != nil {
			return created, fmt.Errorf("create cgroup %s: %w", g.name, err)
		}
		return created, nil
	}
	for _, d := range g.Dirs() {
		err := os.Mkdir(d, 0o755)
		switch {
		case err == nil:
			created = true
		case errors.Is(err, os.ErrExist):
		default:
			return created, fmt.Errorf("create cgroup %s: %w", d, err)
		}
	}
	return created, nil
}

// Exists reports whether the group's directory exists in every hierarchy.
func (g Group) Exists() bool {
	dirs := g.Dirs()
	for _, d := range dirs {
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			return false
		}
	}
	return len(dirs) > 0
}

// Remove deletes the group's directory in every hierarchy. A directory
// that is already gone is not an error.
func (g Group) Remove() error {
	if g.units != nil {
		return g.removeUnits()
	}
	var errs []error
	for _, d := range g.Dirs() {
		err := unix.Rmdir(d)
		switch {
		case err == nil, errors.Is(err, unix.ENOENT):
		case errors.Is(err, unix.EBUSY):
			errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, ErrBusy))
		default:
			errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

// AddProc moves a whole process, all its threads, into the group in every
// hierarchy. Threads it creates later stay with it; children it forks
// later start in the group. The threads' CPU affinity is kept even where
// the kernel would reset it (v2 groups with a cpuset). Under systemd the
// process joins the group's scope, which systemd starts with it when
// there is none.
func (g Group) AddProc(pid int) error {
	dirs := g.procDirs()
	if len(dirs) == 0 {
		return fmt.Errorf("move process %d: group %s has no hierarchy", pid, g.name)
	}
	var saved map[int]unix.CPUSet
	if g.v2 != "" && g.HasFile(V2, "cpuset.cpus.effective") {
		// Joining a v2 group with a cpuset resets every thread's affinity
		// to the group's CPUs; keep what the process had (e.g. taskset).
		saved = affinities(pid)
	}
	for _, d := range dirs {
		if g.units != nil {
			if err := g.joinScope(pid); err != nil {
				return err
			}
			continue
		}
		if err := moveProc(d, pid); err != nil {
			return err
		}
	}
	if saved != nil {
		restoreAffinities(pid, saved)
	}
	return nil
}

// restoreAffinities puts back the affinities saved before a move. Threads
// created meanwhile, which the move may have reset (a thread started by
// one not yet given its affinity back inherits the reset one), get the
// process's common affinity when all saved threads shared one (a process
// pinned as a whole, e.g. by taskset). It goes over the threads until two
// passes in a row find every one as it should be (at most 10 passes): a
// clone begun before its parent got its affinity back shows up only after
// the pass that fixed the parent. Best effort: a
// thread may have exited, or the group's cpuset may exclude its old CPUs
// (EINVAL), and then the kernel's choice stands.
func restoreAffinities(pid int, saved map[int]unix.CPUSet) {
	var common *unix.CPUSet
	for _, set := range saved {
		if common == nil {
			c := set
			common = &c
		} else if *common != set {
			common = nil
			break
		}
	}
	failed := map[int]bool{} // refused once: the kernel's choice stands
	clean := 0
	for pass := 0; pass < 10 && clean < 2; pass++ {
		wrong := 0
		for tid, cur := range affinities(pid) {
			want, ok := saved[tid]
			if !ok {
				if common == nil {
					continue
				}
				want = *common
			}
			if cur == want || failed[tid] {
				continue
			}
			wrong++
			if unix.SchedSetaffinity(tid, &want) != nil {
				failed[tid] = true
			}
		}
		if wrong == 0 {
			clean++
		} else {
			clean = 0
		}
	}
}

// affinities reads the CPU affinity of every thread of pid.
func affinities(pid int) map[int]unix.CPUSet {
	tids, err := procfs.Threads(pid)
	if err != nil {
		return nil
	}
	out := map[int]unix.CPUSet{}
	for _, tid := range tids {
		var set unix.CPUSet
		if unix.SchedGetaffinity(tid, &set) == nil {
			out[tid] = set
		}
	}
	return out
}

func moveProc(dir string, pid int) error {
	if pid <= 0 {
		return fmt.Errorf("move process %d to %s: %w", pid, dir, &ProcessError{PID: pid})
	}
	err := writeFile(filepath.Join(dir, "cgroup.procs"), strconv.Itoa(pid))
	if errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("move process %d to %s: %w", pid, dir, &ProcessError{PID: pid})
	}
	if err != nil {
		return fmt.Errorf("move process %d: %w", pid, err)
	}
	return nil
}

// AddTree moves pid and all its descendants into the group, repeating
// the walk until it finds no new descendant (at most 5 times), so that
// children forked during the move are caught; children forked after their
// parent moved start in the group anyway. It returns the PIDs moved.
// Descendants that exit during the move are skipped.
func (g Group) AddTree(pid int) ([]int, error) {
	if err := g.AddProc(pid); err != nil {
		return nil, err
	}
	moved := map[int]bool{pid: true}
	for round := 0; round < 5; round++ {
		desc, err := Descendants(pid)
		if err != nil {
			return sortedInts(moved), err
		}
		fresh := 0
		for _, p := range desc {
			if moved[p] {
				continue
			}
			err := g.AddProc(p)
			var pe *ProcessError
			if errors.As(err, &pe) {
				continue
			}
			if err != nil {
				return sortedInts(moved), err
			}
			moved[p] = true
			fresh++
		}
		if fresh == 0 {
			break
		}
	}
	return sortedInts(moved), nil
}

// Procs lists the group's member processes (from the v1 cpu hierarchy on
// hybrid and v1 hosts, from the scope under systemd — none when there is
// no scope — and from v2 otherwise).
func (g Group) Procs() ([]int, error) {
	d := g.membersDir()
	if d == "" {
		return nil, fmt.Errorf("list processes of %s: no hierarchy", g.name)
	}
	pids, err := readPids(filepath.Join(d, "cgroup.procs"))
	if g.units != nil && errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return pids, err
}

func readPids(path string) ([]int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		p, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("list processes: parse %s: %w", path, err)
		}
		pids = append(pids, p)
	}
	return pids, nil
}

// ProcMembership reads where pid sits in each hierarchy.
func ProcMembership(pid int) (Membership, error) {
	b, err := procfs.ReadSmall(fmt.Sprintf("/proc/%d/cgroup", pid))
	if errors.Is(procfs.Gone(pid, err), procfs.ErrNoProcess) {
		return Membership{}, fmt.Errorf("read cgroups of %d: %w", pid, &ProcessError{PID: pid})
	}
	if err != nil {
		return Membership{}, fmt.Errorf("read cgroups of %d: %w", pid, err)
	}
	return ParseMembership(string(b))
}

// Restore moves pid back to the groups recorded in m, in each hierarchy
// lanes manages (v2, cpu, blkio). Used when the daemon stops.
func (h *Hierarchy) Restore(pid int, m Membership) error {
	var errs []error
	type target struct{ root, path string }
	var targets []target
	if h.CPURoot != "" {
		if p, ok := m.V1["cpu"]; ok {
			targets = append(targets, target{h.CPURoot, p})
		}
	}
	if h.BlkioRoot != "" && h.BlkioRoot != h.CPURoot {
		if p, ok := m.V1["blkio"]; ok {
			targets = append(targets, target{h.BlkioRoot, p})
		}
	}
	if h.V2Root != "" && m.V2 != "" {
		targets = append(targets, target{h.V2Root, m.V2})
	}
	for _, t := range targets {
		dir := filepath.Join(t.root, filepath.Clean("/"+t.path))
		if h.Units != nil && t.root == h.V2Root {
			if err := h.restoreUnit(pid, t.path); err != nil {
				var pe *ProcessError
				if errors.As(err, &pe) {
					return fmt.Errorf("restore process %d: %w", pid, err)
				}
				errs = append(errs, fmt.Errorf("restore process %d: %w", pid, err))
			}
			continue
		}
		if err := moveProc(dir, pid); err != nil {
			var pe *ProcessError
			if errors.As(err, &pe) {
				return fmt.Errorf("restore process %d: %w", pid, err)
			}
			errs = append(errs, fmt.Errorf("restore process %d: %w", pid, err))
		}
	}
	return errors.Join(errs...)
}

// ListGroups finds the top-level groups whose names start with prefix in
// any hierarchy, e.g. leftovers of a crashed daemon ("lanes-").
func (h *Hierarchy) ListGroups(prefix string) ([]Group, error) {
	names := map[string]bool{}
	if h.Units != nil && h.Mode == ModeUnified {
		// Slices named after groups; a lanes-* directory at the top too
		// (left by a run that had no systemd to ask).
		ents, err := os.ReadDir(h.V2Root)
		if err != nil {
			return nil, fmt.Errorf("list groups in %s: %w", h.V2Root, err)
		}
		for _, e := range ents {
			if n := GroupOfPath(e.Name()); e.IsDir() && n != "" && strings.HasPrefix(n, prefix) {
				names[n] = true
			}
		}
		var out []Group
		for _, n := range sortedNames(names) {
			g := h.Group(n)
			if _, err := os.Stat(g.v2); err != nil {
				g = Group{name: n, v2: filepath.Join(h.V2Root, n)}
			}
			out = append(out, g)
		}
		return out, nil
	}
	for _, root := range []string{h.CPURoot, h.BlkioRoot, h.V2Root} {
		if root == "" {
			continue
		}
		ents, err := os.ReadDir(root)
		if err != nil {
			return nil, fmt.Errorf("list groups in %s: %w", root, err)
		}
		for _, e := range ents {
			if e.IsDir() && strings.HasPrefix(e.Name(), prefix) {
				names[e.Name()] = true
			}
		}
	}
	var out []Group
	for _, n := range sortedNames(names) {
		out = append(out, h.Group(n))
	}
	return out, nil
}

// Threads lists the thread IDs of pid (a *ProcessError if pid is gone).
func Threads(pid int) ([]int, error) {
	tids, err := procfs.Threads(pid)
	if errors.Is(err, procfs.ErrNoProcess) {
		return nil, &ProcessError{PID: pid}
	}
	if err != nil {
		return nil, fmt.Errorf("list threads of %d: %w", pid, err)
	}
	return tids, nil
}

// Descendants returns every descendant process of pid (children,
// grandchildren, ...), read from /proc/PID/task/*/children, or by scanning
// /proc when the kernel lacks that file.
func Descendants(pid int) ([]int, error) {
	if !procfs.Exists(pid) {
		return nil, fmt.Errorf("list descendants of %d: %w", pid, &ProcessError{PID: pid})
	}
	if !procfs.HasChildrenFile() {
		return descendantsByScan(pid)
	}
	seen := map[int]bool{}
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		tasks, err := procfs.Threads(p)
		if err != nil {
			continue // exited meanwhile
		}
		for _, t := range tasks {
			kids, err := procfs.Children(p, t)
			if err != nil {
				continue
			}
			for _, c := range kids {
				if seen[c] || c == pid {
					continue
				}
				seen[c] = true
				queue = append(queue, c)
			}
		}
	}
	return sortedInts(seen), nil
}

func descendantsByScan(pid int) ([]int, error) {
	pids, err := procfs.PIDs()
	if err != nil {
		return nil, fmt.Errorf("list descendants of %d: %w", pid, err)
	}
	children := map[int][]int{}
	for _, p := range pids {
		s, err := procfs.ReadStat(p)
		if err != nil {
			continue
		}
		children[s.PPID] = append(children[s.PPID], p)
	}
	seen := map[int]bool{}
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			if !seen[c] {
				seen[c] = true
				queue = append(queue, c)
			}
		}
	}
	return sortedInts(seen), nil
}

// ParentPID reads the parent of pid from /proc/PID/stat.
func ParentPID(pid int) (int, error) {
	s, err := procfs.ReadStat(pid)
	if errors.Is(err, procfs.ErrNoProcess) {
		return 0, fmt.Errorf("read parent of %d: %w", pid, &ProcessError{PID: pid})
	}
	if err != nil {
		return 0, fmt.Errorf("read parent of %d: %w", pid, err)
	}
	return s.PPID, nil
}

// DetectMounts is Detect without its changes to the hierarchy (no
// controller enabled): what the probes read.
func DetectMounts() (*Hierarchy, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("detect cgroups: %w", err)
	}
	return detectMounts(string(b))
}

// detectMounts reads this mount namespace's mounts, else another's.
func detectMounts(mountinfo string) (*Hierarchy, error) {
	h, err := DetectAt(mountinfo)
	if errors.Is(err, ErrNoCgroups) {
		return detectViaInit()
	}
	return h, err
}

// detectViaInit finds the hierarchy where this mount namespace has none
// but another's has (`ip netns exec` unshares the mount namespace and
// remounts /sys, hiding /sys/fs/cgroup): a path walk through
// /proc/PID/root continues in PID's mount namespace, so the roots are
// that process's mounts reached through its /proc/PID/root, the same
// groups and files. PID 1 comes first, then this process's ancestors
// (the shell that ran `ip netns exec`), for hosts where PID 1's root is
// out of reach (a more privileged init in a container).
//
// An ancestor may exit (the shell that started lanesd in the
// background): the namespace found is held open (see holdNamespace), so
// that its mounts stay reachable for this process's life, and later
// calls reuse it.
func detectViaInit() (*Hierarchy, error) {
	held.Lock()
	defer held.Unlock()
	if held.via != "" {
		if h, err := hierarchyVia(held.mountinfo, held.via, held.pid); err == nil {
			return h, nil
		}
	}
	var tried []string
	for _, pid := range append([]int{1}, ancestors()...) {
		via := "/proc/" + strconv.Itoa(pid) + "/root"
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/mountinfo")
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s: %v", via, err))
			continue
		}
		h, err := hierarchyVia(string(b), via, pid)
		if errors.Is(err, ErrNoCgroups) {
			continue // the same namespace as ours, or no cgroups there either
		}
		if err != nil {
			tried = append(tried, err.Error())
			continue
		}
		if pid == 1 {
			return h, nil // PID 1 outlives lanesd
		}
		if hv, err := holdNamespace(pid); err == nil {
			if hh, err := hierarchyVia(string(b), hv, pid); err == nil {
				held.via, held.mountinfo, held.pid = hv, string(b), pid
				return hh, nil
			}
		}
		return h, nil // as before: valid while pid lives
	}
	msg := "no other process's mount namespace with one could be reached"
	if len(tried) > 0 {
		msg = "none could be reached through another process's mounts (" + strings.Join(tried, "; ") + ")"
	}
	return nil, fmt.Errorf("detect cgroups: %w in this mount namespace, and %s: under `ip netns exec`, start lanesd with `nsenter --net=/run/netns/NAME lanesd`, which enters only the network namespace", ErrNoCgroups, msg)
}

// held is the mount namespace detectViaInit holds open.
var held struct {
	sync.Mutex
	via, mountinfo string
	pid            int
	files          []*os.File // never closed: held for the process's life
}

// hierarchyVia is the hierarchy of another mount namespace's mountinfo,
// its roots reached through the path prefix via (pid: whose namespace,
// for ViaPID); an error if its root cannot be reached.
func hierarchyVia(mountinfo, via string, pid int) (*Hierarchy, error) {
	h, err := DetectAt(mountinfo)
	if err != nil {
		return nil, err
	}
	probe := h.V2Root
	if probe == "" {
		probe = h.CPURoot
	}
	if _, err := os.Stat(via + probe); err != nil {
		return nil, fmt.Errorf("%s%s: %w", via, probe, err)
	}
	h.Via, h.ViaPID = via, pid
	for _, root := range []*string{&h.V2Root, &h.CPURoot, &h.BlkioRoot} {
		if *root != "" {
			*root = via + *root
		}
	}
	for k, v := range h.V1 {
		h.V1[k] = via + v
	}
	return h, nil
}

// holdNamespace opens pid's mount namespace and its root directory and
// keeps both open, and returns a path prefix to that root through this
// process's descriptor (/proc/self/fd/N): it walks into that namespace's
// mounts after pid has exited. The namespace descriptor keeps the
// namespace, and so its mount tree, alive once no process is in it
// (without it the mounts under the held root would be detached).
func holdNamespace(pid int) (string, error) {
	dir := "/proc/" + strconv.Itoa(pid)
	ns, err := os.Open(dir + "/ns/mnt")
	if err != nil {
		return "", fmt.Errorf("hold the mount namespace of pid %d: %w", pid, err)
	}
	fd, err := unix.Open(dir+"/root", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		ns.Close()
		return "", fmt.Errorf("hold the root of pid %d: %w", pid, err)
	}
	root := os.NewFile(uintptr(fd), dir+"/root")
	held.files = append(held.files, ns, root)
	return "/proc/self/fd/" + strconv.Itoa(fd), nil
}

// ancestors are this process's parent, its parent's, and so on up to
// (not including) PID 1.
func ancestors() []int {
	var out []int
	pid := os.Getpid()
	for i := 0; i < 64; i++ {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			break
		}
		_, rest, ok := strings.Cut(string(b), ") ")
		f := strings.Fields(rest)
		if !ok || len(f) < 2 {
			break
		}
		ppid, err := strconv.Atoi(f[1])
		if err != nil || ppid <= 1 {
			break
		}
		out = append(out, ppid)
		pid = ppid
	}
	return out
}

// ReadProcs lists the processes of the v2 group at path (relative to the
// v2 root, as /proc/PID/cgroup shows it).
func ReadProcs(h *Hierarchy, path string) ([]int, error) {
	if h.V2Root == "" {
		return nil, fmt.Errorf("list processes of %s: no cgroup v2 hierarchy", path)
	}
	return readPids(filepath.Join(h.V2Root, filepath.Clean("/"+path), "cgroup.procs"))
}
