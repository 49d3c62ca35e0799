// Package netprobe probes the kernel's network mechanisms that netsched
// uses: qdisc kinds (by creating one in a throwaway network namespace), IFB
// devices, u32 + mirred redirection, BPF program types and helpers (by
// asking the verifier). Answers follow internal/features' convention: nil,
// a conclusive ErrNotSupported, or an inconclusive error that is never
// cached. It is separate from features so that packages needing only the
// cgroup probes do not link netlink and cilium/ebpf.
package netprobe
