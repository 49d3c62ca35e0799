package netsched

import (
	"fmt"

	"github.com/lanes-qos/lanes/internal/netprobe"
	"github.com/lanes-qos/lanes/lane"
)

// Classifier chooses how an Enforcer puts packets in lanes.
type Classifier int

// Classifiers.
const (
	// ClassifyAuto classifies by process with BPF where the kernel can
	// (the socket's lane), and by the lanes' port rules (tc u32 filters
	// built from net.ports) where it cannot. The default.
	ClassifyAuto Classifier = iota
	// ClassifyU32 uses only the port rules, as on a kernel without the BPF
	// features lanes needs; for tests of the fallback, and as a way out
	// should the BPF programs misbehave on some kernel.
	ClassifyU32
)

// String returns the name ParseClassifier accepts.
func (c Classifier) String() string {
	switch c {
	case ClassifyAuto:
		return "auto"
	case ClassifyU32:
		return "u32"
	}
	return fmt.Sprintf("Classifier(%d)", int(c))
}

// ParseClassifier parses "auto" or "u32".
func ParseClassifier(s string) (Classifier, error) {
	for _, c := range []Classifier{ClassifyAuto, ClassifyU32} {
		if s == c.String() {
			return c, nil
		}
	}
	return 0, fmt.Errorf("unknown classifier %q (want auto or u32)", s)
}

// ClassifierOf is the classifier cfg asks for (net.classifier): "ports"
// is ClassifyU32, anything else ClassifyAuto.
func ClassifierOf(cfg *lane.Config) Classifier {
	if cfg.Net.Classifier == "ports" {
		return ClassifyU32
	}
	return ClassifyAuto
}

// WithClassifier makes the Enforcer classify with c instead of choosing
// by the kernel's features (ClassifyAuto).
func WithClassifier(c Classifier) Option { return func(o *options) { o.classifier = c } }

// ErrU32Forced is why BPF classification is off under
// WithClassifier(ClassifyU32).
var ErrU32Forced = netprobe.ErrU32Forced

// forced returns ErrU32Forced when c rules BPF out.
func (c Classifier) forced() error {
	if c == ClassifyU32 {
		return ErrU32Forced
	}
	return nil
}

// portBlock is a set of ports u32 can match with one key: the ports p
// with p&Mask == Val.
type portBlock struct {
	Val, Mask uint16
}

// portBlocks splits the range lo..hi into the fewest aligned power-of-two
// blocks (at most 30 for a 16-bit range), which u32 matches with a value
// and a mask each.
func portBlocks(lo, hi uint16) []portBlock {
	var out []portBlock
	for l, h := uint32(lo), uint32(hi); l <= h; {
		size := uint32(1)
		for size < 1<<16 && l&(2*size-1) == 0 && l+2*size-1 <= h {
			size *= 2
		}
		out = append(out, portBlock{Val: uint16(l), Mask: uint16(^(size - 1))})
		l += size
	}
	return out
}

// maxPortNodes is how many port-rule filters one u32 table can hold
// (12-bit node ids): the IPv4 and the IPv6 table each get one filter per
// protocol, port block and end (source, destination) of every rule.
const maxPortNodes = 0xfff

// checkPorts rejects a plan whose port rules need more u32 filters than a
// table holds.
func checkPorts(p Plan) error {
	n := 0
	for _, c := range p.Classes {
		for _, r := range c.Ports {
			n += 2 * len(r.Protos()) * len(portBlocks(r.Lo, r.Hi))
		}
	}
	if n > maxPortNodes {
		return fmt.Errorf("%w: interface %s: the lanes' port rules need %d u32 filters per IP version, more than %d; use fewer or narrower ranges", ErrBadPlan, p.Iface, n, maxPortNodes)
	}
	return nil
}
