// Package netsched enforces lanes on the network: per managed interface an
// HTB tree with one class per lane (leaf fq_codel, or a byte FIFO sized to a
// target delay where the kernel lacks fq_codel), BPF classification of
// every socket by its lane's cgroup, and an IFB with the same tree for the
// download direction. BuildPlan turns a configuration into a Plan (pure);
// an Enforcer applies plans to the kernel, reports per-lane counters and
// undoes what it did. Only the daemon and `lanes run` use it; the CLI and
// the API types must not import it.
package netsched
