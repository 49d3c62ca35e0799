package lane

import (
	"path"
	"strconv"
	"strings"
)

// Match returns the lane of the first rule that p matches, and that rule;
// ("", nil) when no rule matches (the caller then uses c.Default).
func (c *Config) Match(p Process) (lane string, rule *Rule) {
	for i := range c.Rules {
		if c.Rules[i].Matches(p) {
			return c.Rules[i].Lane, &c.Rules[i]
		}
	}
	return "", nil
}

// Matches reports whether p matches every non-empty match field of r. A
// rule without match fields matches nothing.
func (r *Rule) Matches(p Process) bool {
	if r.Exe == "" && r.Comm == "" && r.User == "" && r.Cgroup == "" && r.Unit == "" {
		return false
	}
	// Cheap comparisons first, the glob last.
	if r.Comm != "" && r.Comm != p.Comm {
		return false
	}
	if r.User != "" && !matchUser(r.User, p) {
		return false
	}
	if r.Cgroup != "" && !CgroupHasPrefix(p.Cgroup, r.Cgroup) {
		return false
	}
	if r.Unit != "" {
		unit := p.Unit
		if unit == "" {
			unit = UnitOf(p.Cgroup)
		}
		if unit != r.Unit {
			return false
		}
	}
	if r.Exe != "" && !matchExe(r.Exe, p.Exe) {
		return false
	}
	return true
}

func matchUser(want string, p Process) bool {
	if uid, err := strconv.Atoi(want); err == nil {
		return uid == p.UID
	}
	return p.User != "" && want == p.User
}

// CgroupHasPrefix reports whether cgroup path p lies at or below prefix,
// comparing whole path elements: "/user.slice" is a prefix of
// "/user.slice/x" but not of "/user.slicex".
func CgroupHasPrefix(p, prefix string) bool {
	prefix = strings.TrimRight(prefix, "/")
	if prefix == "" {
		return strings.HasPrefix(p, "/")
	}
	if !strings.HasPrefix(p, prefix) {
		return false
	}
	rest := p[len(prefix):]
	return rest == "" || rest[0] == '/'
}

// cgroupUnitSuffixes are the systemd unit types that have cgroups of their
// own, slices aside.
var cgroupUnitSuffixes = []string{".service", ".scope", ".socket", ".mount", ".swap"}

// UnitOf returns the systemd unit of a cgroup path: its deepest element
// naming a service, scope, socket, mount or swap unit, e.g.
// "/system.slice/backup.service" -> "backup.service" and
// "/user.slice/user-1000.slice/user@1000.service/app.slice/app-x.scope" ->
// "app-x.scope". Slices are not units of processes; a path with no such
// element gives "".
func UnitOf(cgroupPath string) string {
	elems := strings.Split(cgroupPath, "/")
	for i := len(elems) - 1; i >= 0; i-- {
		e := elems[i]
		for _, suf := range cgroupUnitSuffixes {
			if len(e) > len(suf) && strings.HasSuffix(e, suf) {
				return e
			}
		}
	}
	return ""
}

// matchExe matches an executable path against a rule's exe pattern. A
// pattern without "/" matches the executable's base name; otherwise it
// matches the whole path, element by element, where an element "**"
// matches any number of elements (zero included).
func matchExe(pattern, exe string) bool {
	if exe == "" {
		return false
	}
	if !strings.Contains(pattern, "/") {
		ok, _ := path.Match(pattern, path.Base(exe))
		return ok
	}
	return matchElems(strings.Split(pattern, "/"), strings.Split(exe, "/"))
}

// matchElems matches path elements against pattern elements, "**"
// matching any number of elements. Dynamic programming over (pattern,
// name) positions keeps it O(len(pat)*len(name)) whatever the pattern.
func matchElems(pat, name []string) bool {
	// ok[j] reports whether pat[i:] matches name[j:], for the current i,
	// computed from the last pattern element backwards.
	ok := make([]bool, len(name)+1)
	next := make([]bool, len(name)+1)
	ok[len(name)] = true // empty pattern matches empty name
	for i := len(pat) - 1; i >= 0; i-- {
		ok, next = next, ok
		clear(ok)
		if pat[i] == "**" {
			// pat[i:] matches name[j:] if pat[i+1:] matches name[k:] for some k >= j.
			any := false
			for j := len(name); j >= 0; j-- {
				any = any || next[j]
				ok[j] = any
			}
			continue
		}
		for j := len(name) - 1; j >= 0; j-- {
			if next[j+1] {
				m, _ := path.Match(pat[i], name[j])
				ok[j] = m
			}
		}
	}
	return ok[0]
}

// validGlob checks every element of an exe pattern.
func validGlob(pattern string) error {
	for _, e := range strings.Split(pattern, "/") {
		if e == "**" {
			continue
		}
		if _, err := path.Match(e, ""); err != nil {
			return err
		}
	}
	return nil
}
