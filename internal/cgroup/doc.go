// Package cgroup is lanes' one way into the cgroup filesystems: it finds
// the hierarchies (unified v2, hybrid v1+v2, or v1 only), creates and
// removes the flat top-level "lanes-<lane>" groups in each of them, moves
// whole processes in and back out, and reads and writes controller files.
// Enforcers (cpu, disk) and the daemon use it; API, CLI and planner code
// must not import it.
package cgroup
