package cgroup

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Mode says how the cgroup filesystems are laid out on a host.
type Mode int

const (
	// ModeUnified is cgroup v2 only, with the controllers in the v2 tree.
	ModeUnified Mode = iota
	// ModeHybrid has the v1 cpu controller (and possibly blkio) plus a v2
	// hierarchy without those controllers, used for BPF attachment.
	ModeHybrid
	// ModeV1 has v1 controllers and no v2 hierarchy at all.
	ModeV1
)

func (m Mode) String() string {
	switch m {
	case ModeUnified:
		return "unified"
	case ModeHybrid:
		return "hybrid"
	case ModeV1:
		return "v1"
	}
	return "mode(" + strconv.Itoa(int(m)) + ")"
}

// Controller names accepted by Group.WriteFile and Group.ReadFile. V2
// ("") selects the v2 directory, whatever the file.
const (
	V2    = ""
	CPU   = "cpu"
	Blkio = "blkio"
	// Members is the directory that holds the processes (the v1 cpu
	// group, the scope under systemd, else the v2 group): for cgroup.procs.
	Members = "members"
)

// Hierarchy is the set of cgroup filesystems lanes works in. Roots are
// absolute mount points; "" means absent.
type Hierarchy struct {
	Mode      Mode
	V2Root    string // cgroup2 mount ("" on ModeV1)
	CPURoot   string // v1 mount holding the cpu controller ("" on ModeUnified)
	BlkioRoot string // v1 mount holding blkio ("" when absent)
	// V1 maps every mounted v1 controller (and "name=<x>" hierarchies) to
	// its mount point.
	V1 map[string]string
	// Enabled lists the controllers Detect enabled in the v2 root's
	// cgroup.subtree_control, so that Undo can disable them again.
	Enabled []string
	// Via is "" when the roots are this mount namespace's mounts, or the
	// path prefix through which Detect reached another mount namespace's
	// when this one has none (lanesd started by `ip netns exec`, which
	// remounts /sys): "/proc/1/root", or for an ancestor's namespace a
	// descriptor this process holds open to its root
	// ("/proc/self/fd/N"), which outlives the ancestor.
	Via string
	// ViaPID is the process whose mount namespace Via reaches (0: none).
	ViaPID int
	// Units is systemd's unit manager where systemd owns the cgroup tree
	// (set by the caller after Detect, on unified hosts only): each group
	// is then a slice with a scope for its processes, created and stopped
	// through it. nil: lanes creates its groups in cgroupfs itself.
	Units Units
}

// Units is what lanes asks of systemd where systemd owns the cgroup tree:
// a program may not create cgroups there, nor move processes out of their
// units into groups of its own. internal/systemd implements it over D-Bus.
type Units interface {
	// EnsureSlice starts the transient slice unless it is active; created
	// says it was not.
	EnsureSlice(slice string) (created bool, err error)
	// StartScope starts a transient scope in slice holding pid.
	StartScope(scope, slice string, pid int) error
	// Stop stops a unit and waits until it is; a unit systemd does not
	// know is not an error.
	Stop(unit string) error
	// SetCgroupFile sets, at run time, the unit property that systemd
	// writes to a cgroup file, so that systemd keeps value there (it
	// writes its own on every daemon-reload). ok is false where systemd
	// has no property for the file.
	SetCgroupFile(unit, file, value string) (ok bool, err error)
}

// Prefix starts the name of every cgroup lanes creates for a lane.
const Prefix = "lanes-"

// RunPrefix starts the names of the private groups of a daemon-less
// `lanes run`: RunPrefix + "<pid>-<lane>".
const RunPrefix = Prefix + "run-"

// LaneOfGroup returns the lane of a lanes group name ("lanes-background"
// and "lanes-run-12-background" are both "background"), "" for a name
// that is not a lanes group.
func LaneOfGroup(name string) string {
	if rest, ok := strings.CutPrefix(name, RunPrefix); ok {
		if i := strings.IndexByte(rest, '-'); i >= 0 {
			return rest[i+1:]
		}
		return ""
	}
	if rest, ok := strings.CutPrefix(name, Prefix); ok {
		return rest
	}
	return ""
}

// DetectAt works out the hierarchy from the text of a
// /proc/self/mountinfo file. It reads nothing else, so it is pure.
func DetectAt(mountinfo string) (*Hierarchy, error) {
	h := &Hierarchy{V1: map[string]string{}}
	sc := bufio.NewScanner(strings.NewReader(mountinfo))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		fields := strings.Fields(text)
		sep := -1
		for i, f := range fields {
			if f == "-" {
				sep = i
				break
			}
		}
		if sep < 5 || len(fields) < sep+3 {
			return nil, fmt.Errorf("parse mountinfo line %d: malformed: %q", line, text)
		}
		mnt := unescapeMount(fields[4])
		fstype := fields[sep+1]
		super := fields[sep+3]
		switch fstype {
		case "cgroup2":
			if h.V2Root == "" {
				h.V2Root = mnt
			}
		case "cgroup":
			for _, opt := range strings.Split(super, ",") {
				if !isV1Controller(opt) {
					continue
				}
				if _, ok := h.V1[opt]; !ok {
					h.V1[opt] = mnt
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	h.CPURoot = h.V1["cpu"]
	h.BlkioRoot = h.V1["blkio"]
	switch {
	case h.CPURoot != "" && h.V2Root != "":
		h.Mode = ModeHybrid
	case h.CPURoot != "":
		h.Mode = ModeV1
	case h.V2Root != "":
		h.Mode = ModeUnified
		h.BlkioRoot = "" // blkio in v1 with cpu in v2 is not a layout lanes manages
	default:
		return nil, fmt.Errorf("detect cgroups: %w", ErrNoCgroups)
	}
	return h, nil
}

// ErrNoCgroups says no usable cgroup hierarchy is mounted.
var ErrNoCgroups = errors.New("neither a cgroup2 mount nor a v1 cpu controller mount found")

// isV1Controller reports whether a super option of a "cgroup" mount names
// a controller (or a named hierarchy) rather than a mount option.
func isV1Controller(opt string) bool {
	switch opt {
	case "rw", "ro", "noprefix", "xattr", "clone_children", "cpuset_v2_mode", "favordynmods", "nofavordynmods":
		return false
	}
	if strings.HasPrefix(opt, "name=") {
		return true
	}
	return !strings.Contains(opt, "=")
}

// unescapeMount undoes the octal escapes (\040 for space) of mountinfo.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Group is one lane's cgroup: the same name at the top of every hierarchy
// lanes manages. The zero value is not usable; get one from
// Hierarchy.Group.
type Group struct {
	name  string
	v2    string // "" when the hierarchy has no v2
	cpu   string // "" on unified
	blkio string // "" when absent

	// Where systemd owns the tree: the group's slice (its v2 directory,
	// which holds the settings and counts for all of it) and the scope in
	// it that holds the processes (members, its directory).
	units   Units
	slice   string
	scope   string
	members string
}

// Group returns the group for name, e.g. "lanes-background". Lane groups
// live at the top of each hierarchy, flat, so that CFS weights compete
// with the root's other groups and tasks as siblings. Where systemd owns
// the tree (h.Units) the group is the top-level slice SliceUnit(name)
// (flat too: systemd nests "lanes-background.slice" in "lanes.slice",
// where an idle or small weight would compete with other lanes only),
// and its processes are in the scope ScopeUnit(name) inside it.
func (h *Hierarchy) Group(name string) Group {
	g := Group{name: name}
	if h.Units != nil && h.Mode == ModeUnified && h.V2Root != "" {
		g.units, g.slice, g.scope = h.Units, SliceUnit(name), ScopeUnit(name)
		g.v2 = filepath.Join(h.V2Root, g.slice)
		g.members = filepath.Join(g.v2, g.scope)
		return g
	}
	if h.V2Root != "" {
		g.v2 = filepath.Join(h.V2Root, name)
	}
	if h.CPURoot != "" {
		g.cpu = filepath.Join(h.CPURoot, name)
	}
	if h.BlkioRoot != "" {
		g.blkio = filepath.Join(h.BlkioRoot, name)
	}
	return g
}

// LaneGroup returns the group of the named lane: "lanes-<lane>".
func (h *Hierarchy) LaneGroup(lane string) Group { return h.Group(Prefix + lane) }

// Name returns the group's name ("lanes-background"): its directory's
// under cgroupfs, the one its slice and scope are named after under
// systemd.
func (g Group) Name() string { return g.name }

// Units returns the names of the group's slice and scope where systemd
// owns the tree, "" otherwise.
func (g Group) Units() (slice, scope string) { return g.slice, g.scope }

// MemberPath is the path, relative to a hierarchy's root, of the group
// that holds the processes, as /proc/PID/cgroup shows it: "/lanes-bg", or
// "/lanes_bg.slice/lanes_bg.scope" under systemd.
func (g Group) MemberPath() string {
	if g.slice != "" {
		return "/" + g.slice + "/" + g.scope
	}
	return "/" + g.name
}

// SlicePrefix starts the name of every slice lanes creates.
const SlicePrefix = "lanes_"

// SliceUnit names the slice of the group name ("lanes-background" is
// "lanes_background.slice"): a top-level slice, as every character that
// systemd would read as nesting ("-") or could not take is escaped as
// systemd-escape does ("lanes-run-12-bg" is "lanes_run\x2d12\x2dbg.slice").
func SliceUnit(group string) string {
	return SlicePrefix + unitEscape(strings.TrimPrefix(group, Prefix)) + ".slice"
}

// ScopeUnit names the scope that holds the processes of the group name,
// inside its slice: "lanes_background.scope".
func ScopeUnit(group string) string {
	return SlicePrefix + unitEscape(strings.TrimPrefix(group, Prefix)) + ".scope"
}

// DelegatedUnit returns the outermost systemd unit on a v2 path (as
// /proc/PID/cgroup shows it) whose cgroups systemd delegated to a manager
// of their own ("user@1000.service", a container's scope), "" for none. A
// unit is delegated when its cgroup carries systemd's trusted.delegate or
// user.delegate attribute (Delegate=yes, systemd 251 and later), when it
// is a user manager (user@UID.service), or when the path goes on below a
// service (systemd makes no groups inside a service it did not delegate).
// Below such a unit the tree is that manager's, not PID 1's: lanes leaves
// it alone.
func (h *Hierarchy) DelegatedUnit(v2 string) string {
	if h.V2Root == "" {
		return ""
	}
	dir := h.V2Root
	parts := strings.Split(strings.Trim(v2, "/"), "/")
	for i, c := range parts {
		if c == "" || c == "." || c == ".." {
			return ""
		}
		dir += "/" + c
		service := strings.HasSuffix(c, ".service")
		if !service && !strings.HasSuffix(c, ".scope") {
			continue
		}
		if service && (strings.HasPrefix(c, "user@") || i < len(parts)-1) || delegated(dir) {
			return c
		}
	}
	return ""
}

// GroupOfPath returns the name of the lanes group a cgroup path (as
// /proc/PID/cgroup shows it) is in, from its first component, under either
// layout: "/lanes-bg/x" and "/lanes_bg.slice/lanes_bg.scope" are both in
// "lanes-bg". It returns "" for a path in no group of lanes.
func GroupOfPath(path string) string {
	first := strings.TrimPrefix(path, "/")
	if i := strings.IndexByte(first, '/'); i >= 0 {
		first = first[:i]
	}
	if strings.HasPrefix(first, Prefix) {
		return first
	}
	if stem, ok := strings.CutSuffix(first, ".slice"); ok {
		if rest, ok := strings.CutPrefix(stem, SlicePrefix); ok && rest != "" {
			if name, ok := unitUnescape(rest); ok {
				return Prefix + name
			}
		}
	}
	return ""
}

// SystemSlices lists the slices of systemd's system manager above a
// cgroup path, nearest first: the path's ".slice" components that no
// ".service" component precedes (below a service, such as a user's
// user@UID.service, the groups are that service's own, delegated to it).
// The root slice "-.slice" is not listed.
func SystemSlices(path string) []string {
	var out []string
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i, p := range parts {
		if strings.HasSuffix(p, ".service") {
			break
		}
		if strings.HasSuffix(p, ".slice") && i < len(parts)-1 {
			out = append([]string{"/" + strings.Join(parts[:i+1], "/")}, out...)
		}
	}
	return out
}

// unitEscape escapes s for a unit name as systemd-escape does: "-", "\\"
// and every byte outside [A-Za-z0-9:_.] become \xNN, and so does a
// leading ".".
func unitEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == ':' || c == '_' || c == '.' && i > 0
		if ok {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, `\x%02x`, c)
		}
	}
	return b.String()
}

// unitUnescape undoes unitEscape; ok is false for text it cannot have made.
func unitUnescape(s string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		if i+3 >= len(s) || s[i+1] != 'x' {
			return "", false
		}
		v, err := strconv.ParseUint(s[i+2:i+4], 16, 8)
		if err != nil {
			return "", false
		}
		b.WriteByte(byte(v))
		i += 3
	}
	return b.String(), true
}

// V2Path returns the group's absolute path in the v2 hierarchy (for BPF
// attachment), or "" when there is no v2 hierarchy.
func (g Group) V2Path() string { return g.v2 }

// Dirs returns every directory of the group, one per hierarchy, the
// controller hierarchies first.
func (g Group) Dirs() []string {
	var dirs []string
	for _, d := range []string{g.cpu, g.blkio, g.v2} {
		if d != "" && (len(dirs) == 0 || dirs[len(dirs)-1] != d) {
			dirs = append(dirs, d) // co-mounted cpu,blkio share one
		}
	}
	return dirs
}

// membersDir is where membership is read: the v1 cpu hierarchy when there
// is one, the scope under systemd, v2 otherwise.
func (g Group) membersDir() string {
	switch {
	case g.cpu != "":
		return g.cpu
	case g.members != "":
		return g.members
	}
	return g.v2
}

// procDirs are the directories a process is written into to join the
// group: one per hierarchy, or the scope under systemd.
func (g Group) procDirs() []string {
	if g.members != "" {
		return []string{g.members}
	}
	return g.Dirs()
}

// Dir returns the directory holding ctrl's files: CPU, Blkio, or V2 ("").
// On unified hosts every controller lives in the v2 directory.
func (g Group) Dir(ctrl string) (string, error) {
	var d string
	switch ctrl {
	case V2:
		d = g.v2
	case Members:
		d = g.membersDir()
	case CPU:
		d = g.cpu
		if d == "" && g.v2 != "" {
			d = g.v2
		}
	case Blkio:
		d = g.blkio
		if d == "" && g.cpu == "" {
			d = g.v2 // unified: io.* lives in v2
		}
	default:
		return "", fmt.Errorf("group %s: unknown controller %q", g.name, ctrl)
	}
	if d == "" {
		return "", fmt.Errorf("group %s: no %s hierarchy: %w", g.name, ctrlName(ctrl), ErrNoHierarchy)
	}
	return d, nil
}

// ErrBusy says a group could not be removed because it still has
// processes (or child groups).
var ErrBusy = errors.New("still has processes")

// ErrNoHierarchy says the group has no directory for a controller.
var ErrNoHierarchy = errors.New("hierarchy not mounted")

func ctrlName(ctrl string) string {
	if ctrl == V2 {
		return "cgroup v2"
	}
	return ctrl
}

// HasFile reports whether the group's directory for ctrl has file.
func (g Group) HasFile(ctrl, file string) bool {
	d, err := g.Dir(ctrl)
	if err != nil {
		return false
	}
	_, err = os.Stat(filepath.Join(d, file))
	return err == nil
}

// ReadFile reads a controller file of the group, without the trailing
// newline.
func (g Group) ReadFile(ctrl, file string) (string, error) {
	d, err := g.Dir(ctrl)
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(filepath.Join(d, file))
	if err != nil {
		return "", fmt.Errorf("read %s: %w", filepath.Join(d, file), err)
	}
	return strings.TrimRight(string(b), "\n"), nil
}

// WriteFile writes value to a controller file of the group. Under
// systemd a file systemd has a property for (cpu.weight, cpu.max,
// io.weight, cpu.idle) is set through the slice's property first, so
// that systemd keeps it; the file is then written as well.
func (g Group) WriteFile(ctrl, file, value string) error {
	d, err := g.Dir(ctrl)
	if err != nil {
		return err
	}
	if g.units != nil && d == g.v2 {
		if _, err := g.units.SetCgroupFile(g.slice, file, value); err != nil {
			return fmt.Errorf("write %s of %s: %w", file, g.slice, err)
		}
	}
	return writeFile(filepath.Join(d, file), value)
}

func writeFile(path, value string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, werr := f.WriteString(value)
	cerr := f.Close()
	if werr != nil {
		return fmt.Errorf("write %q to %s: %w", value, path, werr)
	}
	if cerr != nil {
		return fmt.Errorf("write %q to %s: %w", value, path, cerr)
	}
	return nil
}

// Membership is where a process sits in each hierarchy, as
// /proc/PID/cgroup says: V2 is the v2 path, V1 maps each v1 controller
// (or "name=<x>") to its path.
type Membership struct {
	V2 string
	V1 map[string]string
}

// ParseMembership parses the text of a /proc/PID/cgroup file.
func ParseMembership(text string) (Membership, error) {
	m := Membership{V1: map[string]string{}}
	for i, line := range strings.Split(strings.TrimSpace(text), "\n") {
		if line == "" {
			continue
		}
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			return Membership{}, fmt.Errorf("parse cgroup line %d: malformed: %q", i+1, line)
		}
		if parts[0] == "0" && parts[1] == "" {
			m.V2 = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c != "" {
				m.V1[c] = parts[2]
			}
		}
	}
	return m, nil
}

// ProcessError says a process does not exist (any more).
type ProcessError struct{ PID int }

func (e *ProcessError) Error() string { return fmt.Sprintf("process %d does not exist", e.PID) }

// Is makes errors.Is(err, os.ErrNotExist) true.
func (e *ProcessError) Is(target error) bool { return target == os.ErrNotExist }

// sortedInts returns the keys of a set in order.
func sortedInts(set map[int]bool) []int {
	out := make([]int, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}

func sortedNames(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Files reads and writes groups' controller files. FS does it on the real
// filesystem; enforcers take a Files so that a test can count the writes
// an Apply issues.
type Files interface {
	ReadFile(g Group, ctrl, file string) (string, error)
	WriteFile(g Group, ctrl, file, value string) error
}

// FS is Files on the mounted cgroup filesystems.
type FS struct{}

// ReadFile reads a controller file of g.
func (FS) ReadFile(g Group, ctrl, file string) (string, error) { return g.ReadFile(ctrl, file) }

// WriteFile writes a controller file of g.
func (FS) WriteFile(g Group, ctrl, file, value string) error { return g.WriteFile(ctrl, file, value) }
