//go:build !linux

package netprobe

import (
	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/lanes-qos/lanes/internal/features"
)

// HaveQdisc says whether the kernel has the qdisc kind.
func HaveQdisc(kind string) error { return features.Missing("qdisc "+kind, "Linux", nil) }

// HaveIFB says whether IFB devices can be created.
func HaveIFB() error { return features.Missing("ifb device", "Linux", nil) }

// HaveMirredRedirect says whether a u32 filter with a mirred redirect can
// be attached.
func HaveMirredRedirect() error {
	return features.Missing("tc u32 filter with mirred action", "Linux", nil)
}

// HaveBPFHelper says whether programs of type pt may call helper fn.
func HaveBPFHelper(pt ebpf.ProgramType, fn asm.BuiltinFunc) error {
	return features.Missing("bpf helper "+fn.String(), "Linux", nil)
}

// HaveBPFProgramType says whether programs of type pt can be loaded.
func HaveBPFProgramType(pt ebpf.ProgramType) error {
	return features.Missing("bpf program type "+pt.String(), "Linux", nil)
}

// HaveBPFMapType says whether maps of type mt can be created.
func HaveBPFMapType(mt ebpf.MapType) error {
	return features.Missing("bpf map type "+mt.String(), "Linux", nil)
}

// HaveBPFMmapableArray says whether an array map can be mapped into user
// space.
func HaveBPFMmapableArray() error { return features.Missing("bpf mmapable array", "Linux", nil) }

// DefaultRouteLink is unsupported off Linux.
func DefaultRouteLink() (Link, error) { return Link{}, features.Missing("network links", "Linux", nil) }

// HaveStructOpsCC says whether TCP congestion controls can be written in
// BPF.
func HaveStructOpsCC() error {
	return features.Missing("bpf struct_ops tcp_congestion_ops", "Linux", nil)
}

// HaveTCPIter says whether BPF TCP iterators exist.
func HaveTCPIter() error { return features.Missing("bpf TCP iterator", "Linux", nil) }
