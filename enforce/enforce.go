package enforce

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lanes-qos/lanes/cpu"
	"github.com/lanes-qos/lanes/disk"
	"github.com/lanes-qos/lanes/internal/cgroup"
	"github.com/lanes-qos/lanes/internal/features"
	"github.com/lanes-qos/lanes/lane"
	"github.com/lanes-qos/lanes/state"
)

// Net is the network side of a lane, when network enforcement is on: it
// binds a lane's cgroup to its traffic class and makes a moved process's
// existing sockets follow it.
type Net interface {
	BindLane(laneName, cgroupV2Dir string) error
	MoveSockets(pid int, laneName string) error
}

// Engine applies lanes to processes. Safe for concurrent use.
type Engine struct {
	H     *cgroup.Hierarchy
	CPU   *cpu.Enforcer
	Disk  *disk.Enforcer
	store *state.Store
	logf  func(string, ...any)
	// debugf logs each change to a thread's scheduling (SetDebugf).
	debugf func(string, ...any)
	// groupName maps a lane name to its cgroup name (the daemon uses
	// "lanes-<lane>"; a daemon-less `lanes run` a private group).
	groupName func(laneName string) string

	// placement says how groups are made (systemd units or cgroupfs) and
	// why, for doctor.
	placement features.Mechanism

	mu  sync.Mutex
	net Net
	// settler checks a placement batch for what it left behind (SetSettler);
	// settleFails counts its failures, logged once a minute at most.
	settler      Settler
	settleFails  int
	settleLogged time.Time

	// recorded holds (at least) the PIDs with a process record, so that
	// Forget, called on every exit on the host, looks up the store only
	// for processes lanes moved.
	recMu    sync.Mutex
	recorded map[int]recMeta

	// ensured is the lane each group was last made to match (EnsureLane),
	// so that a storm of rule placements does not rewrite its settings.
	ensured map[string]*lane.Lane
	// existsAt is when ensureCached last found each group's directories.
	existsAt map[string]time.Time
	// tuned holds controllers' run-time changes of lanes' CPU settings
	// (tune.go), which EnsureLane keeps. cpuMu guards it and orders the
	// writes of CPU settings.
	cpuMu sync.Mutex
	tuned map[string]cpuTune
	// procs holds the cgroup.procs files of groups open (PlaceBatch).
	procs map[string]*cgroup.Procs

	// notes: the second record of each moved process, kept by its lane's
	// group (see note.go); batch: the notes of placement batches.
	notes noteState
	batch batchNotes
}

// ProcRecord is what the state store keeps of a process lanes moved.
type ProcRecord struct {
	PID       int               `json:"pid"`
	StartTime uint64            `json:"start"`
	Lane      string            `json:"lane"`
	Why       string            `json:"why"`
	Orig      cgroup.Membership `json:"orig"`
	IOPrio    disk.Saved        `json:"ioprio,omitempty"`
	Moved     time.Time         `json:"moved"`
}

// GroupRecord is what the state store keeps of a cgroup lanes created.
type GroupRecord struct {
	Name string   `json:"name"`
	Lane string   `json:"lane"`
	Dirs []string `json:"dirs"`
}

// Options configure an Engine.
type Options struct {
	Store *state.Store // where changes are recorded (required)
	Logf  func(string, ...any)
	// GroupName maps a lane to its cgroup name; nil means "lanes-<lane>".
	GroupName func(laneName string) string
}

// SetDebugf sets where the engine logs each change it makes to a
// thread's scheduling (a reservation's SCHED_DEADLINE and what it gives
// back): lanesd's debug level. nil logs nothing.
func (e *Engine) SetDebugf(f func(string, ...any)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.debugf = f
}

// debug logs through the debug logger, if any.
func (e *Engine) debug(format string, args ...any) {
	e.mu.Lock()
	f := e.debugf
	e.mu.Unlock()
	if f != nil {
		f(format, args...)
	}
}

// New probes the host and returns an engine.
func New(opts Options) (*Engine, error) {
	if opts.Store == nil {
		return nil, errors.New("enforce: a state store is required")
	}
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	h, err := cgroup.Detect()
	if err != nil {
		return nil, err
	}
	placement := usePlacement(h, logf)
	if h.Units != nil {
		// systemd keeps the root's subtree_control as its units need it:
		// what Detect enabled there is not lanes' to disable on stop.
		h.Enabled = nil
	}
	for _, c := range h.Enabled {
		if err := opts.Store.Put(state.KindSubtree, c, h.V2Root); err != nil {
			return nil, err
		}
	}
	ce, err := cpu.New(h, logf)
	if err != nil {
		return nil, fmt.Errorf("cpu enforcer: %w", err)
	}
	de, err := disk.New(h, logf)
	if err != nil {
		return nil, fmt.Errorf("disk enforcer: %w", err)
	}
	gn := opts.GroupName
	if gn == nil {
		gn = func(l string) string { return cgroup.Prefix + l }
	}
	return &Engine{H: h, CPU: ce, Disk: de, store: opts.Store, logf: logf, groupName: gn, placement: placement, recorded: map[int]recMeta{}, ensured: map[string]*lane.Lane{}, existsAt: map[string]time.Time{}, tuned: map[string]cpuTune{}, procs: map[string]*cgroup.Procs{}}, nil
}

// SetNet turns network classification on (n != nil) or off.
func (e *Engine) SetNet(n Net) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.net = n
}

// SetSettler makes PlaceBatch ask s, after a batch's moves, what its
// processes still have outside their lane (threads, children, sockets),
// instead of listing each one's in /proc; nil lists.
func (e *Engine) SetSettler(s Settler) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.settler = s
}

// Mechanisms lists the backends in use, for `lanes doctor`.
func (e *Engine) Mechanisms() []features.Mechanism {
	grouping := features.Mechanism{Resource: "process grouping", OK: true}
	switch e.H.Mode {
	case cgroup.ModeUnified:
		grouping.Backend, grouping.Preferred = "cgroup v2 unified ("+e.H.V2Root+")", true
		grouping.Reason = "cgroup2 mounted with the controllers lanes needs"
	case cgroup.ModeHybrid:
		grouping.Backend = "hybrid: v1 cpu (" + e.H.CPURoot + ") + v2 (" + e.H.V2Root + ") for BPF"
		grouping.Reason = "the cpu controller is bound to a v1 hierarchy"
	default:
		grouping.Backend = "cgroup v1 only (" + e.H.CPURoot + ")"
		grouping.Reason = "no cgroup2 mount: no BPF classification by cgroup"
	}
	if e.H.Via != "" {
		grouping.Reason += fmt.Sprintf("; reached through %s (the mount namespace of pid %d): this mount namespace hides /sys/fs/cgroup (lanesd started by `ip netns exec`?)", e.H.Via, e.H.ViaPID)
	}
	return []features.Mechanism{grouping, e.placement, e.CPU.Mechanism(), e.Disk.Mechanism()}
}

// Group returns the cgroup of a lane.
func (e *Engine) Group(laneName string) cgroup.Group { return e.H.Group(e.groupName(laneName)) }

// EnsureLane creates the lane's cgroup if needed (recording it) and makes
// its CPU and disk settings match l. Idempotent.
func (e *Engine) EnsureLane(l *lane.Lane) (cgroup.Group, error) {
	g := e.Group(l.Name)
	created, err := g.Create()
	if err != nil {
		return g, fmt.Errorf("lane %s: %w", l.Name, err)
	}
	if created {
		e.closeProcs(g.Name()) // files of an earlier group of that name
		if err := e.store.Put(state.KindGroup, g.Name(), GroupRecord{Name: g.Name(), Lane: l.Name, Dirs: g.Dirs()}); err != nil {
			g.Remove()
			return g, err
		}
		e.logf("created cgroup %s", g.Name())
	} else if err := e.store.Get(state.KindGroup, g.Name(), &GroupRecord{}); errors.Is(err, state.ErrNotFound) {
		// Existing group not in our records (state lost): adopt it.
		if err := e.store.Put(state.KindGroup, g.Name(), GroupRecord{Name: g.Name(), Lane: l.Name, Dirs: g.Dirs()}); err != nil {
			return g, err
		}
		e.logf("adopted cgroup %s", g.Name())
	}
	e.cpuMu.Lock()
	err = e.applyCPU(l)
	e.cpuMu.Unlock()
	if err != nil {
		return g, fmt.Errorf("lane %s: %w", l.Name, err)
	}
	if err := e.Disk.Apply(g, l.Disk); err != nil {
		return g, fmt.Errorf("lane %s: %w", l.Name, err)
	}
	e.mu.Lock()
	n := e.net
	e.mu.Unlock()
	if n != nil && g.V2Path() != "" {
		if err := n.BindLane(l.Name, g.V2Path()); err != nil {
			return g, fmt.Errorf("lane %s: bind traffic class: %w", l.Name, err)
		}
	}
	e.mu.Lock()
	e.ensured[l.Name] = l
	e.mu.Unlock()
	return g, nil
}

// moved is one process changed by a Move, with what it was before, for rollback.
type moved struct {
	pid     int
	pre     cgroup.Membership
	preIO   disk.Saved
	hadRec  bool
	prevRec ProcRecord
}

// Candidate is a process a Move is about to change, as the Move sees it
// just before it changes it.
type Candidate struct {
	PID int
	// Root is the requested PID whose tree the process belongs to (PID
	// itself for a requested process).
	Root int
	Info ProcInfo
	// From is where the process is now: the lane (if any) it would leave.
	From cgroup.Membership
}

// Check decides whether a Move may change a process. An error refuses the
// whole move: Move returns that error (not wrapped) with nothing moved.
type Check func(Candidate) error

// refusal carries a Check's error through a move, to tell it from a
// kernel error.
type refusal struct{ err error }

func (r *refusal) Error() string { return r.err.Error() }
func (r *refusal) Unwrap() error { return r.err }

// Move puts each PID and its descendants into lane l, all or nothing: if a
// requested PID does not exist or exits during the move, every process
// already moved by this call goes back where it was. Descendants that exit
// during the move are skipped. why records the reason ("move", "rule:12").
func (e *Engine) Move(pids []int, l *lane.Lane, why string) ([]int, error) {
	return e.MoveChecked(pids, l, why, nil)
}

// MoveChecked is Move with a check on every process the move would change:
// the requested PIDs and every descendant it takes along. Before anything
// changes, check sees the whole tree; then, as the move goes, it sees each
// process again just before and just after it joins the lane (with what
// /proc says at that moment), and each child forked meanwhile before it is
// taken. A refusal at any point puts back everything this call moved and
// returns check's error.
func (e *Engine) MoveChecked(pids []int, l *lane.Lane, why string, check Check) ([]int, error) {
	for _, root := range pids {
		if _, err := ReadProc(root); err != nil {
			return nil, err
		}
	}
	if check != nil {
		// Ask about the whole tree first, so that a refusal changes nothing.
		for _, root := range pids {
			for _, pid := range tree(root) {
				err := e.approve(pid, root, check)
				if err == nil {
					continue
				}
				if r, ok := err.(*refusal); ok {
					return nil, r.err
				}
				if pid != root && isGone(err) {
					continue
				}
				if isGone(err) {
					return nil, fmt.Errorf("process %d exited during the move: %w", pid, ErrNoProcess)
				}
				return nil, fmt.Errorf("check process %d: %w", pid, err)
			}
		}
	}
	g, err := e.EnsureLane(l)
	if err != nil {
		return nil, err
	}
	var done []moved
	rollback := func() {
		for i := len(done) - 1; i >= 0; i-- {
			m := done[i]
			if err := e.H.Restore(m.pid, m.pre); err != nil && !isGone(err) {
				e.logf("rollback: process %d: %v", m.pid, err)
			}
			disk.RestoreProcess(m.pid, m.preIO)
			e.undoRecord(m, strconv.Itoa(m.pid), g)
		}
	}
	seen := map[int]bool{}
	var out []int
	for _, root := range pids {
		// A process forking while its tree moves may leave a child in the
		// old group (forked after the scan, before its parent moved):
		// scan again until a pass finds nothing new.
		for pass := 0; pass < 5; pass++ {
			found := false
			for _, pid := range tree(root) {
				if seen[pid] {
					continue
				}
				seen[pid], found = true, true
				m, err := e.moveOne(pid, root, g, l, why, check)
				if err != nil {
					if r, ok := err.(*refusal); ok {
						rollback()
						return nil, r.err
					}
					if pid != root && isGone(err) {
						continue // a descendant exited: nothing to move
					}
					rollback()
					if isGone(err) {
						return nil, fmt.Errorf("process %d exited during the move: %w", pid, ErrNoProcess)
					}
					return nil, fmt.Errorf("move process %d to %s: %w", pid, l.Name, err)
				}
				done = append(done, m)
				out = append(out, pid)
			}
			if !found {
				break
			}
		}
	}
	e.mu.Lock()
	n := e.net
	e.mu.Unlock()
	if n != nil {
		for _, pid := range out {
			if err := n.MoveSockets(pid, l.Name); err != nil && !isGone(err) {
				e.logf("move sockets of %d to %s: %v", pid, l.Name, err)
			}
		}
	}
	return out, nil
}

// tree is root and its descendants as they are now (just root if it is
// gone: the move then reports it).
func tree(root int) []int {
	t := []int{root}
	if d, err := cgroup.Descendants(root); err == nil {
		t = append(t, d...)
	}
	return t
}

// approve asks check about pid as /proc shows it now. A *refusal is
// check's answer; other errors are from reading /proc (isGone: it exited).
func (e *Engine) approve(pid, root int, check Check) error {
	pi, err := ReadProc(pid)
	if err != nil {
		return err
	}
	from, err := cgroup.ProcMembership(pid)
	if err != nil {
		return err
	}
	return e.ask(check, Candidate{PID: pid, Root: root, Info: pi, From: from})
}

func (e *Engine) ask(check Check, c Candidate) error {
	if check == nil {
		return nil
	}
	if err := check(c); err != nil {
		return &refusal{err}
	}
	return nil
}

func (e *Engine) moveOne(pid, root int, g cgroup.Group, l *lane.Lane, why string, check Check) (moved, error) {
	m := moved{pid: pid}
	pi, err := ReadProc(pid)
	if err != nil {
		return m, err
	}
	// Every failure of a process that has exited meanwhile (ESRCH or
	// ENOENT from any of its /proc files, a cgroup write the kernel
	// ignored) says so, so that a descendant that exits is skipped.
	fail := func(err error) (moved, error) {
		if _, ok := err.(*refusal); ok || isGone(err) {
			return m, err
		}
		if now, perr := ReadProc(pid); perr != nil || now.Exiting || now.StartTime != pi.StartTime {
			return m, fmt.Errorf("process %d exited (%w): %v", pid, ErrNoProcess, err)
		}
		return m, err
	}
	pre, err := cgroup.ProcMembership(pid)
	if err != nil {
		return fail(err)
	}
	m.pre = pre
	if err := e.ask(check, Candidate{PID: pid, Root: root, Info: pi, From: pre}); err != nil {
		return m, err
	}
	key := strconv.Itoa(pid)
	rec := ProcRecord{PID: pid, StartTime: pi.StartTime, Lane: l.Name, Why: why, Moved: time.Now()}
	m.hadRec = e.store.Get(state.KindProc, key, &m.prevRec) == nil
	if m.hadRec && m.prevRec.StartTime == pi.StartTime {
		// Moving between lanes: where it came from originally stays.
		rec.Orig, rec.IOPrio = m.prevRec.Orig, m.prevRec.IOPrio
	} else {
		rec.Orig = e.origin(pid, pre, e.storedRecord)
	}
	// Record before changing anything: a crash after the change still
	// knows where the process came from.
	e.noteRecordedStart(pid, pi.StartTime, l.Name)
	if err := e.store.Put(state.KindProc, key, rec); err != nil {
		return m, err
	}
	e.writeNote(g, rec)
	if err := g.AddProc(pid); err != nil {
		e.undoRecord(m, key, g)
		return fail(err)
	}
	// The kernel ignores writes for a process that exits meanwhile: check.
	if now, err := cgroup.ProcMembership(pid); err != nil || !e.inGroup(now, g) {
		e.H.Restore(pid, pre)
		e.undoRecord(m, key, g)
		if err != nil {
			return fail(err)
		}
		return fail(fmt.Errorf("process %d did not join %s", pid, g.Name()))
	}
	if check != nil {
		// What joined is still what was approved (no setuid exec between
		// the check and the write).
		err := e.approve(pid, root, check)
		if err == nil {
			if now, perr := ReadProc(pid); perr == nil && now.StartTime != pi.StartTime {
				err = fmt.Errorf("process %d was replaced during the move (%w)", pid, ErrNoProcess)
			}
		}
		if err != nil {
			e.H.Restore(pid, pre)
			e.undoRecord(m, key, g)
			return fail(err)
		}
	}
	saved, err := disk.ApplyProcess(pid, l.Disk)
	m.preIO = saved
	if err != nil {
		e.H.Restore(pid, pre)
		e.undoRecord(m, key, g)
		return fail(err)
	}
	if err := e.CPU.JoinThreads(pid, l.CPU); err != nil {
		e.H.Restore(pid, pre)
		disk.RestoreProcess(pid, saved)
		e.undoRecord(m, key, g)
		return fail(err)
	}
	if rec.IOPrio == nil {
		rec.IOPrio = saved
	} else {
		for tid, v := range saved {
			if _, ok := rec.IOPrio[tid]; !ok {
				rec.IOPrio[tid] = v
			}
		}
	}
	if err := e.store.Put(state.KindProc, key, rec); err != nil {
		return m, err
	}
	e.writeNote(g, rec)
	if m.hadRec && m.prevRec.Lane != "" && m.prevRec.Lane != l.Name {
		e.removeNote(m.prevRec.Lane, pid)
	}
	return m, nil
}

// origin is where a process about to move is to go back to, given where
// it is now (pre). A lane's group is never that place: a process already in
// one is a child forked inside the lane (as a child forked between its
// parent's move and its own is) and goes back where its nearest recorded
// ancestor came from, or to the root groups if it has none. Recording the
// lane itself would leave the process in the group on stop, and the group
// impossible to remove.
func (e *Engine) origin(pid int, pre cgroup.Membership, record func(int) (ProcRecord, bool)) cgroup.Membership {
	if !e.inLaneGroup(pre) {
		return pre
	}
	return e.ancestorOrigin(pid, record)
}

// ancestorOrigin is where the nearest recorded ancestor of pid came from,
// or the root groups if none has a record.
func (e *Engine) ancestorOrigin(pid int, record func(int) (ProcRecord, bool)) cgroup.Membership {
	for p, i := pid, 0; i < 64; i++ {
		pp, err := cgroup.ParentPID(p)
		if err != nil || pp <= 1 {
			break
		}
		if r, ok := record(pp); ok && !e.inLaneGroup(r.Orig) && (r.Orig.V2 != "" || len(r.Orig.V1) > 0) {
			return r.Orig
		}
		p = pp
	}
	return e.rootMembership()
}

// storedRecord is the state store's record of a live process.
func (e *Engine) storedRecord(pid int) (ProcRecord, bool) {
	var r ProcRecord
	if e.store.Get(state.KindProc, strconv.Itoa(pid), &r) != nil || !alive(pid, r.StartTime) {
		return r, false
	}
	return r, true
}

// rootMembership places a process in the root group of every hierarchy
// lanes manages.
func (e *Engine) rootMembership() cgroup.Membership {
	m := cgroup.Membership{V1: map[string]string{}}
	if e.H.V2Root != "" {
		m.V2 = "/"
	}
	for c := range e.H.V1 {
		m.V1[c] = "/"
	}
	return m
}

// inLaneGroup reports whether m puts a process in one of this engine's
// lane groups in any hierarchy. The daemon's groups are "lanes-<lane>";
// the private groups of a live daemon-less `lanes run` are that run's, not
// the daemon's.
func (e *Engine) inLaneGroup(m cgroup.Membership) bool {
	prefix := e.groupName("")
	ours := func(path string) bool {
		first := cgroup.GroupOfPath(path)
		if first == "" || !strings.HasPrefix(first, prefix) {
			return false
		}
		return prefix != cgroup.Prefix || !isPrivateRunGroup(first)
	}
	if ours(m.V2) {
		return true
	}
	for _, p := range m.V1 {
		if ours(p) {
			return true
		}
	}
	return false
}

// inGroup reports whether a membership puts the process in g (checked in
// the hierarchy that carries the lane: v1 cpu where there is one, else v2).
func (e *Engine) inGroup(m cgroup.Membership, g cgroup.Group) bool {
	want := g.MemberPath()
	if p, ok := m.V1[cgroup.CPU]; ok && e.H.CPURoot != "" {
		return p == want
	}
	return m.V2 == want
}

func (e *Engine) undoRecord(m moved, key string, g cgroup.Group) {
	if !m.hadRec {
		e.store.Delete(state.KindProc, key)
		e.dropNote(g, m.pid)
		return
	}
	e.store.Put(state.KindProc, key, m.prevRec)
	e.noteRecordedStart(m.pid, m.prevRec.StartTime, m.prevRec.Lane)
	if m.prevRec.Lane == "" {
		return
	}
	prev := e.Group(m.prevRec.Lane)
	if prev.Name() != g.Name() {
		g.RemoveNote(noteKey(m.pid))
	}
	e.writeNote(prev, m.prevRec)
}

// isGone reports whether err says a process does not exist (any more):
// ENOENT or ESRCH from its /proc files or a cgroup write.
func isGone(err error) bool {
	var pe *cgroup.ProcessError
	return errors.Is(err, ErrNoProcess) || errors.As(err, &pe) || errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH)
}

// Records returns the stored records of moved processes that are still
// alive, by PID. Records of processes that are gone are dropped.
func (e *Engine) Records() (map[int]ProcRecord, error) {
	recs, err := e.store.List(state.KindProc)
	if err != nil {
		return nil, err
	}
	out := map[int]ProcRecord{}
	for _, r := range recs {
		var pr ProcRecord
		if json.Unmarshal(r.Data, &pr) != nil || !alive(pr.PID, pr.StartTime) {
			e.store.Delete(state.KindProc, r.Key)
			if pr.Lane != "" {
				e.removeNote(pr.Lane, pr.PID)
			}
			continue
		}
		out[pr.PID] = pr
		e.noteRecordedStart(pr.PID, pr.StartTime, pr.Lane)
	}
	return out, nil
}

// Forget drops the record of pid if that process has exited (or its PID
// now names another process): called on the process's exit event, so that
// records of dead processes do not pile up. A live process's record stays.
func (e *Engine) Forget(pid int) error {
	e.recMu.Lock()
	_, known := e.recorded[pid]
	e.recMu.Unlock()
	if !known {
		return nil
	}
	key := strconv.Itoa(pid)
	var r ProcRecord
	if err := e.store.Get(state.KindProc, key, &r); err != nil {
		if errors.Is(err, state.ErrNotFound) {
			return nil
		}
		return fmt.Errorf("forget process %d: %w", pid, err)
	}
	if alive(pid, r.StartTime) {
		return nil
	}
	e.recMu.Lock()
	delete(e.recorded, pid)
	e.recMu.Unlock()
	if err := e.store.Delete(state.KindProc, key); err != nil {
		return err
	}
	e.removeNote(r.Lane, pid)
	return nil
}

// recMeta is what the engine keeps in memory of a process record (zero
// when only the PID is known).
type recMeta struct {
	start uint64
	lane  string
}

func (e *Engine) noteRecorded(pid int) {
	e.recMu.Lock()
	if _, ok := e.recorded[pid]; !ok {
		e.recorded[pid] = recMeta{}
	}
	e.recMu.Unlock()
}

func (e *Engine) noteRecordedStart(pid int, start uint64, laneName string) {
	e.recMu.Lock()
	e.recorded[pid] = recMeta{start: start, lane: laneName}
	e.recMu.Unlock()
}

func (e *Engine) dropRecorded(pid int) {
	e.recMu.Lock()
	delete(e.recorded, pid)
	e.recMu.Unlock()
}

// Members returns the PIDs in a lane's group.
func (e *Engine) Members(laneName string) ([]int, error) {
	g := e.Group(laneName)
	if !g.Exists() {
		return nil, nil
	}
	p, err := g.Procs()
	sort.Ints(p)
	return p, err
}

// ReleaseLane moves every process out of a lane's group (each back to where
// it came from, see Release) and removes the group. Used when a lane
// disappears from the config and on stop.
func (e *Engine) ReleaseLane(groupName string, recs map[int]ProcRecord) error {
	g := e.H.Group(groupName)
	e.closeProcs(groupName)
	if g.Exists() {
		// Bounded: processes may fork while we empty the group, and an
		// exiting task keeps the group busy until it is gone (seen on slow,
		// emulated machines): empty, try to remove, and again for up to 2 s.
		var errs []error
		for attempt := 0; ; attempt++ {
			errs = errs[:0]
			for range 5 {
				pids, err := g.Procs()
				if err != nil || len(pids) == 0 {
					break
				}
				for _, pid := range pids {
					if err := e.release(pid, recs); err != nil && !isGone(err) {
						errs = append(errs, err)
					}
				}
			}
			err := g.Remove()
			if err == nil {
				break
			}
			if attempt >= 40 {
				if pids, perr := g.Procs(); perr == nil && len(pids) > 0 {
					err = fmt.Errorf("%w (processes %v remain)", err, pids)
				}
				errs = append(errs, err)
				return errors.Join(errs...)
			}
			time.Sleep(50 * time.Millisecond)
		}
		e.logf("removed cgroup %s", groupName)
	}
	return e.store.Delete(state.KindGroup, groupName)
}

// release puts one process back where lanes found it: its own record if it
// has one, else the record of its nearest recorded ancestor (it was forked
// inside the lane), else the root groups with the default I/O priority.
func (e *Engine) release(pid int, recs map[int]ProcRecord) error {
	rec, own := recs[pid]
	orig := rec.Orig
	if !own || orig.V2 == "" && len(orig.V1) == 0 || e.inLaneGroup(orig) {
		// Forked inside the lane, or a record that names a lane group
		// (written before origin() existed): see origin.
		orig = e.ancestorOrigin(pid, func(p int) (ProcRecord, bool) {
			r, ok := recs[p]
			return r, ok
		})
	}
	err := e.H.Restore(pid, orig)
	if own {
		disk.RestoreProcess(pid, rec.IOPrio)
		e.store.Delete(state.KindProc, strconv.Itoa(pid))
		e.removeNote(rec.Lane, pid)
	} else if tids, terr := cgroup.Threads(pid); terr == nil {
		for _, t := range tids {
			disk.SetIOPrio(t, lane.IONone, 0)
		}
	}
	if err != nil {
		return fmt.Errorf("release process %d: %w", pid, err)
	}
	return nil
}

// RestoreAll undoes everything recorded: every process goes back where it
// was found, every group lanes created is removed, controllers lanes
// enabled are disabled again. Used on a clean stop and by --cleanup.
func (e *Engine) RestoreAll() error {
	recs, err := e.Records()
	if err != nil {
		return err
	}
	var errs []error
	if _, err := e.RestoreBoosts(); err != nil {
		errs = append(errs, err)
	}
	if _, err := e.RestoreReserves(); err != nil {
		errs = append(errs, err)
	}
	groups, err := e.store.List(state.KindGroup)
	if err != nil {
		return err
	}
	names := map[string]bool{}
	for _, r := range groups {
		names[r.Key] = true
	}
	// Leftovers not in the records (a lost state dir) are ours too.
	if found, err := e.H.ListGroups(cgroup.Prefix); err == nil {
		for _, g := range found {
			names[g.Name()] = true
		}
	}
	sorted := slices.Sorted(func(yield func(string) bool) {
		for n := range names {
			if !yield(n) {
				return
			}
		}
	})
	for _, n := range sorted {
		if isPrivateRunGroup(n) {
			continue // belongs to a live `lanes run`
		}
		if err := e.ReleaseLane(n, recs); err != nil {
			errs = append(errs, err)
		}
	}
	// Records of processes that were not in any group any more.
	for pid, r := range recs {
		disk.RestoreProcess(pid, r.IOPrio)
		e.store.Delete(state.KindProc, strconv.Itoa(pid))
	}
	subs, _ := e.store.List(state.KindSubtree)
	if len(subs) > 0 {
		for _, s := range subs {
			e.H.Enabled = appendUnique(e.H.Enabled, s.Key)
		}
		if err := e.H.Undo(); err != nil {
			errs = append(errs, err)
		} else {
			for _, s := range subs {
				e.store.Delete(state.KindSubtree, s.Key)
			}
		}
	}
	return errors.Join(errs...)
}

func appendUnique(s []string, v string) []string {
	if slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}

// RunGroupPrefix names the private groups of daemon-less `lanes run`:
// lanes-run-<pid>-<lane>.
const RunGroupPrefix = cgroup.RunPrefix

// isPrivateRunGroup reports whether name is the group of a `lanes run`
// whose process is still alive.
func isPrivateRunGroup(name string) bool {
	rest, ok := cutPrefix(name, RunGroupPrefix)
	if !ok {
		return false
	}
	var pid int
	for i := 0; i < len(rest) && rest[i] >= '0' && rest[i] <= '9'; i++ {
		pid = pid*10 + int(rest[i]-'0')
	}
	if pid == 0 {
		return false
	}
	_, err := ReadProc(pid)
	return err == nil
}

func cutPrefix(s, p string) (string, bool) {
	if len(s) >= len(p) && s[:len(p)] == p {
		return s[len(p):], true
	}
	return s, false
}
