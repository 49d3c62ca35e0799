package netprobe

import (
	"errors"
	"fmt"
	"github.com/lanes-qos/lanes/internal/features"
	"runtime"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	ebpffeatures "github.com/cilium/ebpf/features"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

var qdiscProbes features.ProbeSet

// HaveQdisc says whether the kernel has the qdisc kind (e.g. "fq_codel",
// "htb", "bfifo", "clsact"). The probe is conclusive: it creates the qdisc
// on the loopback device of a throwaway network namespace.
func HaveQdisc(kind string) error {
	return qdiscProbes.Get("qdisc "+kind, func() error { return probeQdisc(kind) }).Result()
}

func probeQdisc(kind string) error {
	return inThrowawayNetns(func(h *netlink.Handle) error {
		lo, err := h.LinkByName("lo")
		if err != nil {
			return fmt.Errorf("find lo: %w", err)
		}
		parent := uint32(netlink.HANDLE_ROOT)
		if kind == "clsact" || kind == "ingress" {
			parent = netlink.HANDLE_CLSACT
		}
		attrs := netlink.QdiscAttrs{LinkIndex: lo.Attrs().Index, Parent: parent, Handle: netlink.MakeHandle(1, 0)}
		var q netlink.Qdisc
		switch kind {
		case "htb":
			q = netlink.NewHtb(attrs)
		case "fq_codel":
			q = netlink.NewFqCodel(attrs)
		case "clsact":
			attrs.Handle = netlink.MakeHandle(0xffff, 0)
			q = &netlink.Clsact{QdiscAttrs: attrs}
		case "tbf":
			q = &netlink.Tbf{QdiscAttrs: attrs, Rate: 125000, Limit: 10000, Buffer: 10000}
		default:
			q = &netlink.GenericQdisc{QdiscAttrs: attrs, QdiscType: kind}
		}
		err = h.QdiscAdd(q)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, unix.ENOENT), errors.Is(err, unix.EOPNOTSUPP):
			return features.Missing("qdisc "+kind, "CONFIG_NET_SCH_"+kconfigName(kind), err)
		default:
			return fmt.Errorf("add qdisc %s on lo: %w", kind, err)
		}
	})
}

func kconfigName(kind string) string {
	switch kind {
	case "bfifo", "pfifo", "pfifo_head_drop":
		return "FIFO"
	case "clsact", "ingress":
		return "INGRESS"
	}
	b := []byte(kind)
	for i, c := range b {
		switch {
		case c >= 'a' && c <= 'z':
			b[i] = c - 'a' + 'A'
		case c == '-':
			b[i] = '_'
		}
	}
	return string(b)
}

var ifbProbe = &features.Probe{Name: "ifb device", Fn: func() error {
	return inThrowawayNetns(func(h *netlink.Handle) error {
		err := h.LinkAdd(&netlink.Ifb{LinkAttrs: netlink.LinkAttrs{Name: "lanesprobe0"}})
		switch {
		case err == nil:
			return nil
		case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENOENT):
			return features.Missing("ifb device", "CONFIG_IFB", err)
		default:
			return fmt.Errorf("add ifb link: %w", err)
		}
	})
}}

// HaveIFB says whether IFB devices can be created (download shaping).
func HaveIFB() error { return ifbProbe.Result() }

var redirectProbe = &features.Probe{Name: "tc u32 filter with mirred redirect", Fn: func() error {
	return inThrowawayNetns(func(h *netlink.Handle) error {
		lo, err := h.LinkByName("lo")
		if err != nil {
			return fmt.Errorf("find lo: %w", err)
		}
		idx := lo.Attrs().Index
		err = h.QdiscAdd(&netlink.Clsact{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: idx, Parent: netlink.HANDLE_CLSACT, Handle: netlink.MakeHandle(0xffff, 0)}})
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EOPNOTSUPP) {
			return features.Missing("qdisc clsact", "CONFIG_NET_SCH_INGRESS", err)
		} else if err != nil {
			return fmt.Errorf("add clsact on lo: %w", err)
		}
		err = h.FilterAdd(&netlink.U32{
			FilterAttrs: netlink.FilterAttrs{LinkIndex: idx, Parent: netlink.HANDLE_MIN_INGRESS, Priority: 1, Protocol: unix.ETH_P_ALL},
			RedirIndex:  idx,
		})
		switch {
		case err == nil:
			return nil
		case errors.Is(err, unix.ENOENT), errors.Is(err, unix.EOPNOTSUPP):
			return features.Missing("tc u32 filter with mirred action", "CONFIG_NET_CLS_U32 and CONFIG_NET_ACT_MIRRED", err)
		default:
			return fmt.Errorf("add u32 mirred filter on lo: %w", err)
		}
	})
}}

// HaveMirredRedirect says whether a u32 filter with a mirred redirect
// action can be attached (how downloads reach an IFB).
func HaveMirredRedirect() error { return redirectProbe.Result() }

var bpfHelperProbes features.ProbeSet

// HaveBPFHelper says whether programs of type pt may call helper fn on this
// kernel (the verifier is asked, not the version).
func HaveBPFHelper(pt ebpf.ProgramType, fn asm.BuiltinFunc) error {
	name := fmt.Sprintf("bpf helper %v in %v", fn, pt)
	return bpfHelperProbes.Get(name, func() error {
		return bpfAnswer(name, ebpffeatures.HaveProgramHelper(pt, fn))
	}).Result()
}

// HaveBPFProgramType says whether programs of type pt can be loaded.
func HaveBPFProgramType(pt ebpf.ProgramType) error {
	name := fmt.Sprintf("bpf program type %v", pt)
	return bpfHelperProbes.Get(name, func() error {
		return bpfAnswer(name, ebpffeatures.HaveProgramType(pt))
	}).Result()
}

// HaveBPFMapType says whether maps of type mt can be created.
func HaveBPFMapType(mt ebpf.MapType) error {
	name := fmt.Sprintf("bpf map type %v", mt)
	return bpfHelperProbes.Get(name, func() error {
		return bpfAnswer(name, ebpffeatures.HaveMapType(mt))
	}).Result()
}

// HaveBPFMmapableArray says whether an array map can be mapped into user
// space (BPF_F_MMAPABLE).
func HaveBPFMmapableArray() error {
	const name = "bpf mmapable array"
	return bpfHelperProbes.Get(name, func() error {
		return bpfAnswer(name, ebpffeatures.HaveMapFlag(ebpffeatures.BPF_F_MMAPABLE))
	}).Result()
}

// HaveStructOpsCC says whether TCP congestion controls can be written in
// BPF (struct_ops programs and the kernel's tcp_congestion_ops struct_ops
// type in its BTF): what lanes' background congestion control needs.
func HaveStructOpsCC() error {
	const name = "bpf struct_ops tcp_congestion_ops"
	return bpfHelperProbes.Get(name, func() error {
		if err := ebpffeatures.HaveProgramType(ebpf.StructOps); err != nil {
			return bpfAnswer(name, err)
		}
		spec, err := btf.LoadKernelSpec()
		if err != nil {
			return features.Missing(name, "kernel BTF (CONFIG_DEBUG_INFO_BTF)", err)
		}
		var st *btf.Struct
		if err := spec.TypeByName("bpf_struct_ops_tcp_congestion_ops", &st); err != nil {
			return features.Missing(name, "Linux 5.6 (CONFIG_BPF_JIT, TCP congestion controls in BPF)", err)
		}
		return nil
	}).Result()
}

// HaveTCPIter says whether BPF TCP iterators exist (the kernel's BTF has
// their context, struct bpf_iter__tcp): what the receive side of lanes'
// background transport runs as. Whether such a program may call
// bpf_setsockopt (Linux 5.14) shows when lanesd loads it.
func HaveTCPIter() error {
	const name = "bpf TCP iterator"
	return bpfHelperProbes.Get(name, func() error {
		spec, err := btf.LoadKernelSpec()
		if err != nil {
			return features.Missing(name, "kernel BTF (CONFIG_DEBUG_INFO_BTF)", err)
		}
		var st *btf.Struct
		if err := spec.TypeByName("bpf_iter__tcp", &st); err != nil {
			return features.Missing(name, "Linux 5.9 (BPF iterators)", err)
		}
		return nil
	}).Result()
}

// bpfAnswer turns cilium/ebpf's "not supported" into ours.
func bpfAnswer(name string, err error) error {
	if errors.Is(err, ebpf.ErrNotSupported) {
		return features.Missing(name, "", err)
	}
	return err
}

// inThrowawayNetns runs fn with a netlink handle in a new network namespace
// that is destroyed afterwards (see InThrowawayNetns).
func inThrowawayNetns(fn func(h *netlink.Handle) error) error {
	return InThrowawayNetns(func(h *netlink.Handle, _ netns.NsHandle) error { return fn(h) })
}

// InThrowawayNetns runs fn with a netlink handle in, and a handle of, a new
// network namespace that is destroyed afterwards. The calling thread is
// never left in it: the namespace is entered on a dedicated, locked thread
// that is discarded if it cannot go back.
func InThrowawayNetns(fn func(h *netlink.Handle, ns netns.NsHandle) error) error {
	type result struct {
		h   *netlink.Handle
		ns  netns.NsHandle
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("get current netns: %w", err)}
			return
		}
		defer orig.Close()
		ns, err := netns.New()
		if err != nil {
			// netns.New may have failed after unshare; do not reuse the thread.
			ch <- result{err: fmt.Errorf("create netns: %w", err)}
			return
		}
		h, herr := netlink.NewHandleAt(ns)
		if err := netns.Set(orig); err != nil {
			ns.Close()
			if h != nil {
				h.Close()
			}
			ch <- result{err: fmt.Errorf("return to netns: %w", err)} // thread stays locked and dies
			return
		}
		runtime.UnlockOSThread()
		if herr != nil {
			ns.Close()
			ch <- result{err: fmt.Errorf("netlink handle in netns: %w", herr)}
			return
		}
		ch <- result{h: h, ns: ns}
	}()
	r := <-ch
	if r.err != nil {
		return r.err
	}
	defer r.ns.Close()
	defer r.h.Close()
	return fn(r.h, r.ns)
}
