package netprobe

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	"github.com/lanes-qos/lanes/internal/features"
)

// What each of netsched's mechanisms needs of the kernel. netsched.New
// decides with these, and `lanes doctor` without a daemon reports them
// (Probe), so the two cannot disagree about a requirement.

// HaveClassifierBPF says whether packets can be classified by BPF: clsact,
// cgroup sock and sched_cls programs, and the helpers the classifier calls.
func HaveClassifierBPF() error {
	return firstErr(
		HaveQdisc("clsact"),
		HaveBPFProgramType(ebpf.CGroupSock),
		HaveBPFProgramType(ebpf.SchedCLS),
		HaveBPFHelper(ebpf.SchedCLS, asm.FnSkbAncestorCgroupId),
		HaveBPFHelper(ebpf.CGroupSock, asm.FnGetCurrentAncestorCgroupId),
		HaveBPFHelper(ebpf.CGroupSock, asm.FnSkStorageGet),
	)
}

// HaveIngressBPF says whether downloads can be shaped with BPF
// classification (beyond HaveClassifierBPF): an IFB the traffic is
// redirected to, and the socket lookups that find a packet's local socket.
func HaveIngressBPF() error {
	return firstErr(
		HaveIFB(),
		HaveMirredRedirect(),
		HaveBPFHelper(ebpf.SchedCLS, asm.FnSkLookupTcp),
		HaveBPFHelper(ebpf.SchedCLS, asm.FnSkLookupUdp),
		HaveBPFHelper(ebpf.SchedCLS, asm.FnSkStorageGet),
	)
}

// HaveIngressPorts says whether downloads can be shaped with u32 port
// rules: an IFB and a u32 filter redirecting to it.
func HaveIngressPorts() error {
	return firstErr(HaveQdisc("clsact"), HaveIFB(), HaveMirredRedirect())
}

// HaveSockAddrSetsockopt says whether lanes can mark a UDP socket itself
// (bpf/sockmark.c): cgroup sock_addr programs calling bpf_setsockopt.
func HaveSockAddrSetsockopt() error {
	return firstErr(
		HaveBPFProgramType(ebpf.CGroupSockAddr),
		HaveBPFHelper(ebpf.CGroupSockAddr, asm.FnSetsockopt),
	)
}

// HaveIdleGateMaps says whether the idletime gates' maps can exist: a ring
// buffer for the wake-up events and an array user space can mmap. (The
// programs' compare-and-swap is checked when lanesd loads them.)
func HaveIdleGateMaps() error {
	return firstErr(HaveBPFMapType(ebpf.RingBuf), HaveBPFMmapableArray())
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// ErrU32Forced is why BPF classification is off when the config says
// classifier = "ports".
var ErrU32Forced = errors.New("BPF classification turned off: u32 port rules forced (classifier u32)")

// Leaf qdisc kinds, by preference.
const (
	LeafFqCodel  = "fq_codel"
	LeafHeadDrop = "pfifo_head_drop"
)

// Net is what the kernel offers lanes' network enforcement: one answer per
// mechanism (nil: lanes uses it). lanesd fills it from its own probes and
// the programs it loaded; Probe fills it from the probes alone.
type Net struct {
	HTB        error // HTB: network enforcement at all
	FqCodel    error // fq_codel leaves; else head-drop FIFOs
	Classifier error // BPF classification; else u32 port rules on egress
	// Ingress is BPF classification of downloads; IngressPorts, where it
	// is missing, u32 port rules on the IFB.
	Ingress      error
	IngressPorts error
	Idle         error // idletime gates; else background is only the lowest priority
	// CC is lanes_ledbat for lanes with net.cc = "ledbat" (BPF struct_ops
	// and lanes' sock_ops program); else their sockets keep the host's
	// default. CCRegistered: lanesd registered it (a plan asked for it).
	CC           error
	CCRegistered bool
	// Mark is per-socket DSCP LE for the UDP sockets of marked lanes
	// (cgroup sock_addr programs calling bpf_setsockopt; TCP sockets are
	// marked by the sock_ops program that needs only Classifier). Else
	// their packets are marked only where a tree's egress classifier
	// sees them. MarkLoaded: lanesd loaded those programs.
	Mark       error
	MarkLoaded bool
	// Recv is the receive side of net.cc = "ledbat" (rLEDBAT: a BPF TCP
	// iterator bounding background downloads' receive windows); probed
	// only by loading it (lanesd). RecvRunning: lanesd runs it.
	Recv        error
	RecvRunning bool
	// Loaded: lanes' BPF programs were loaded (by lanesd), not only the
	// kernel's features probed.
	Loaded bool
}

// Probe asks the kernel (read-only: throwaway namespaces, the verifier)
// what Net holds, without lanes' BPF objects: what `lanes doctor` reports
// when no daemon runs. The objects' loading (and the compare-and-swap the
// idletime gates use) is checked by lanesd when it starts.
func Probe() Net {
	n := Net{HTB: HaveQdisc("htb"), FqCodel: HaveQdisc("fq_codel"), Classifier: HaveClassifierBPF()}
	n.Ingress = firstErr(n.Classifier, HaveIngressBPF())
	if n.Ingress != nil {
		n.IngressPorts = HaveIngressPorts()
	}
	n.CC = firstErr(n.Classifier, HaveStructOpsCC())
	n.Mark = firstErr(n.Classifier, HaveSockAddrSetsockopt())
	n.Recv = firstErr(n.Classifier, HaveTCPIter())
	n.Idle = n.Classifier
	if n.Idle == nil {
		n.Idle = firstErr(HaveQdisc("tbf"), HaveIdleGateMaps())
	}
	return n
}

// Leaf returns the leaf qdisc kind lanes uses with n, and why.
func (n Net) Leaf() (kind, why string) {
	if n.FqCodel == nil {
		return LeafFqCodel, "fq_codel present"
	}
	return LeafHeadDrop, fmt.Sprintf("fq_codel unavailable (%v); head-drop packet FIFO sized to each lane's target delay", n.FqCodel)
}

// Mechanisms are n's lines of `lanes doctor`; ifaces, lines about the
// interfaces lanes shapes, go before the background transport's.
func (n Net) Mechanisms(ifaces ...features.Mechanism) []features.Mechanism {
	leaf, why := n.Leaf()
	ms := []features.Mechanism{{
		Resource: "net scheduling", Backend: "HTB, one class per lane, leaf " + leaf,
		Preferred: n.FqCodel == nil, Reason: why, OK: n.HTB == nil,
	}}
	if n.HTB != nil {
		ms[0].Backend, ms[0].Preferred, ms[0].Reason = "none", false, fmt.Sprintf("network enforcement: %v", n.HTB)
		return ms
	}
	if n.Classifier == nil {
		ms = append(ms, features.Mechanism{Resource: "net classification", Backend: "BPF cgroup sock_create priority + tc clsact egress classifier by socket cgroup", Preferred: true, Reason: "probed: cgroup sock programs, clsact, bpf_skb_ancestor_cgroup_id", OK: true})
	} else {
		ms = append(ms, features.Mechanism{
			Resource: "net classification",
			Backend:  "u32 port rules: tc u32 filters on the HTB root put TCP/UDP packets from or to a lane's net.ports in that lane; the rest in the default lane",
			Reason:   bpfWhy("BPF classification", n.Classifier),
			OK:       true,
		})
	}
	switch {
	case n.Ingress == nil:
		ms = append(ms, features.Mechanism{Resource: "net ingress", Backend: "IFB + HTB (u32 + mirred redirect), lane from the local socket (bpf_sk_lookup)", Preferred: true, Reason: "probed: ifb, u32 + mirred, bpf_sk_lookup_tcp/udp and bpf_sk_storage_get in tc", OK: true})
	case n.IngressPorts == nil:
		ms = append(ms, features.Mechanism{
			Resource: "net ingress",
			Backend:  "IFB + HTB (u32 + mirred redirect), lane from u32 port rules on the IFB",
			Reason:   bpfWhy("BPF ingress classification", n.Ingress),
			OK:       true,
		})
	default:
		ms = append(ms, features.Mechanism{Resource: "net ingress", Backend: "none: downloads are not shaped", Reason: n.IngressPorts.Error()})
	}
	if n.Ingress == nil {
		ms = append(ms, features.Mechanism{Resource: "net receive window", Backend: "tc egress lowers the window shaped downloads' ACKs advertise to receive_window x lane ceiling x RTT", Preferred: true, Reason: "uses the download classification's socket lookup and storage", OK: true})
	} else {
		ms = append(ms, features.Mechanism{Resource: "net receive window", Backend: "none: a download's sender may queue at the bottleneck, before lanes' IFB", Reason: bpfWhy("BPF ingress classification", n.Ingress)})
	}
	if n.Idle == nil {
		probed := "probed: tbf, BPF ring buffer and mmapable array, compare-and-swap in tc programs"
		if !n.Loaded {
			probed = "probed: tbf, BPF ring buffer and mmapable array (compare-and-swap in tc programs: checked when lanesd loads its programs)"
		}
		ms = append(ms, features.Mechanism{Resource: "net idletime", Backend: "tbf hold + daemon (BPF wake-up)", Preferred: true, Reason: probed + "; the kernel has no preemption-interval qdisc, so the daemon holds and releases a TBF leaf per background lane", OK: true})
	} else {
		ms = append(ms, features.Mechanism{Resource: "net idletime", Backend: "none: background lanes are only lowest-priority HTB classes (preemption interval 0)", Reason: n.Idle.Error()})
	}
	switch {
	case n.Classifier != nil:
		ms = append(ms, features.Mechanism{Resource: "net marking", Backend: "none: background packets leave unmarked", Reason: bpfWhy("BPF classification", n.Classifier), OK: true})
	case n.Mark == nil:
		state := "loaded when a lane is marked"
		if n.MarkLoaded {
			state = "loaded"
		}
		ms = append(ms, features.Mechanism{Resource: "net marking", Backend: "DSCP LE on marked lanes' sockets themselves: TCP by the sock_ops program, UDP by cgroup connect/sendmsg programs, both by lanes move; shaped interfaces' tc egress too", Preferred: true, Reason: "probed: bpf_setsockopt in cgroup sock_addr programs; " + state, OK: true})
	default:
		ms = append(ms, features.Mechanism{Resource: "net marking", Backend: "DSCP LE on marked lanes' TCP sockets (sock_ops) and by lanes move; UDP sockets only where a shaped interface's tc egress marks them", Reason: fmt.Sprintf("UDP socket marking unavailable: %v", n.Mark), OK: true})
	}
	switch {
	case n.Classifier != nil:
	case n.Recv != nil:
		ms = append(ms, features.Mechanism{Resource: "net background downloads", Backend: "none: a background download takes what its sender's congestion control takes (with ingress shaping: the lowest class on the IFB)", Reason: fmt.Sprintf("receive-window program unavailable: %v", n.Recv), OK: true})
	default:
		state := "probed: BPF TCP iterators in the kernel's BTF; loaded by lanesd when a lane has net.cc = \"ledbat\" (the TCP iterator's bpf_setsockopt is checked then)"
		switch {
		case n.RecvRunning:
			state = "running"
		case n.Loaded:
			state = "started when a lane has net.cc = \"ledbat\""
		}
		ms = append(ms, features.Mechanism{Resource: "net background downloads", Backend: "rLEDBAT: the receive window of lanes with net.cc = \"ledbat\" follows the delay the receiver measures (BPF TCP iterator, every 20 ms while background downloads run and every 250 ms otherwise, TCP_WINDOW_CLAMP)", Preferred: true, Reason: state, OK: true})
	}
	ms = append(ms, ifaces...)
	if n.CC == nil {
		state := "registered when a plan has a lane with net.cc = \"ledbat\""
		if n.CCRegistered {
			state = "registered"
		}
		return append(ms, features.Mechanism{
			Resource:  "net background transport",
			Backend:   "lanes_ledbat (LEDBAT++-style delay-based TCP congestion control, BPF struct_ops) on the TCP sockets of lanes with net.cc = \"ledbat\", set by a cgroup sock_ops program and by lanes move; lowest HTB priority",
			Preferred: true,
			Reason:    "probed: struct_ops tcp_congestion_ops in the kernel's BTF; " + state,
			OK:        true,
		})
	}
	return append(ms, features.Mechanism{Resource: "net background transport", Backend: "lowest HTB priority, borrows only idle capacity; TCP sockets keep the host's default congestion control", Reason: fmt.Sprintf("lanes_ledbat unavailable: %v", n.CC), OK: true})
}

// bpfWhy says why the BPF mechanism what is not used.
func bpfWhy(what string, err error) string {
	if errors.Is(err, ErrU32Forced) {
		return err.Error()
	}
	return fmt.Sprintf("%s unavailable: %v", what, err)
}
