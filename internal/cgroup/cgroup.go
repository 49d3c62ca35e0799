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
	// path prefix ("/proc/1/root", or an ancestor's) through which Detect
	// reached another mount namespace's when this one has none (lanesd
	// started by `ip netns exec`, which remounts /sys).
	Via string
}

// Prefix starts the name of every cgroup lanes creates for a lane.
const Prefix = "lanes-"

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
}

// Group returns the group for name, e.g. "lanes-background". Lane groups
// live at the top of each hierarchy, flat, so that CFS weights compete
// with the root's other groups and tasks as siblings.
func (h *Hierarchy) Group(name string) Group {
	g := Group{name: name}
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

// Name returns the group's directory name.
func (g Group) Name() string { return g.name }

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
// is one, v2 otherwise.
func (g Group) membersDir() string {
	if g.cpu != "" {
		return g.cpu
	}
	return g.v2
}

// Dir returns the directory holding ctrl's files: CPU, Blkio, or V2 ("").
// On unified hosts every controller lives in the v2 directory.
func (g Group) Dir(ctrl string) (string, error) {
	var d string
	switch ctrl {
	case V2:
		d = g.v2
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

// WriteFile writes value to a controller file of the group.
func (g Group) WriteFile(ctrl, file, value string) error {
	d, err := g.Dir(ctrl)
	if err != nil {
		return err
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
