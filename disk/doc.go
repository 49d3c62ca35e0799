// Package disk applies a lane's I/O settings: the I/O scheduling class and
// level of every thread (ioprio_set), and the group's proportional I/O
// weight (io.weight on cgroup v2, blkio.bfq.weight on v1) where the host
// has one. The daemon and `lanes run` use it; API, CLI and planner code
// must not import it.
package disk
