package monitor

import "strings"

// CgroupPath picks the cgroup path rules match from /proc/PID/cgroup: the
// systemd hierarchy's ("name=systemd", on hybrid and legacy hosts systemd
// keeps its units there while the unified hierarchy may be rearranged),
// else the cgroup v2 path ("0::").
func CgroupPath(procCgroup []byte) string {
	var v2 string
	haveV2 := false
	for _, line := range strings.Split(string(procCgroup), "\n") {
		id, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		ctrl, path, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		if ctrl == "name=systemd" {
			return path
		}
		if id == "0" && ctrl == "" {
			v2, haveV2 = path, true
		}
	}
	if haveV2 {
		return v2
	}
	return ""
}
