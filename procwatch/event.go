package procwatch

import (
	"github.com/lanes-qos/lanes/events"
	"github.com/lanes-qos/lanes/internal/cgroup"
)

// Source is the Source of the events this package publishes.
const Source = "monitor/procwatch"

// Exec is what an exec event of this package carries.
type Exec struct {
	PID int
	// Start is the process's start time in clock ticks since boot, as
	// /proc/PID/stat's starttime.
	Start uint64
	Comm  string
	UID   int
	// Cgroups are the kernfs ids (the directories' inode numbers) of its
	// v2 group and of its groups in the hierarchies of the cpu and io
	// controllers (on a v2-only host these are v2 groups: the nearest
	// ancestor with the controller enabled); 0 where there is none.
	Cgroups cgroup.IDs
}

// ExeID names the file a process executed, opaquely: see Watch.ExeID.
type ExeID struct{ Mount, Dentry, Inode uint64 }

// Payload keys of exec and exit events beyond the proc connector's "pid"
// and "ppid".
const (
	KeyStart     = "start"      // uint64: start time in clock ticks since boot
	KeyComm      = "comm"       // string
	KeyUID       = "uid"        // int64: the real uid
	KeyCgroupV2  = "cgroup_v2"  // uint64: kernfs id of the v2 group
	KeyCgroupCPU = "cgroup_cpu" // uint64: of the cpu controller's group
	KeyCgroupIO  = "cgroup_io"  // uint64: of the io (blkio) controller's group
)

// ExecOf decodes an exec event this package published; ok is false for
// any other event (the proc connector's, which carry only the pid).
func ExecOf(ev events.Event) (x Exec, ok bool) {
	if ev.Source != Source {
		return Exec{}, false
	}
	p := ev.Payload
	pid, ok1 := p["pid"].(int64)
	start, ok2 := p[KeyStart].(uint64)
	comm, ok3 := p[KeyComm].(string)
	uid, ok4 := p[KeyUID].(int64)
	if !ok1 || !ok2 || !ok3 || !ok4 || pid <= 0 {
		return Exec{}, false
	}
	v2, _ := p[KeyCgroupV2].(uint64)
	c, _ := p[KeyCgroupCPU].(uint64)
	io, _ := p[KeyCgroupIO].(uint64)
	return Exec{PID: int(pid), Start: start, Comm: comm, UID: int(uid),
		Cgroups: cgroup.IDs{V2: v2, CPU: c, IO: io}}, true
}

// ExitStart returns the start time an exit event of this package carries:
// the event is then the exit of the process's last thread (the whole
// process is gone). ok is false for other events (the proc connector's
// exit of a process's main thread, which a thread's exec also reports).
func ExitStart(ev events.Event) (start uint64, ok bool) {
	if ev.Source != Source {
		return 0, false
	}
	start, ok = ev.Payload[KeyStart].(uint64)
	return start, ok
}
