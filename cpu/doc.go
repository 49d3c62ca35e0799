// Package cpu applies a lane's CPU settings (weight, idle, cap) to its
// cgroup, choosing at start between the cgroup v2 files (cpu.weight,
// cpu.idle, cpu.max) and the v1 fallbacks (cpu.shares, cpu.idle or
// SCHED_IDLE per thread, CFS quota). The daemon and `lanes run` use it;
// API, CLI and planner code must not import it.
package cpu
