// Package netprobe probes the kernel's network mechanisms that netsched
// uses: qdisc kinds (by creating one in a throwaway network namespace), IFB
// devices, u32 + mirred redirection, BPF program types and helpers (by
// asking the verifier). Answers follow internal/features' convention: nil,
// a conclusive ErrNotSupported, or an inconclusive error that is never
// cached. It is separate from features so that packages needing only the
// cgroup probes do not link netlink and cilium/ebpf.
//
// It also says what each network mechanism needs (HaveClassifierBPF,
// HaveIngressBPF, ...; netsched.New decides with these), how a probed
// kernel reads as `lanes doctor` lines (Net), and what a device offers a
// shaper (ReadLink: offloads, segment sizes, default congestion control).
// Doctor is the network part of `lanes doctor` when no daemon runs: the
// lanes CLI links this package, never netsched or lanes' BPF objects.
package netprobe
