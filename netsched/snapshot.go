package netsched

import (
	"errors"
	"fmt"
	"strings"
)

// TreeSnapshot is an interface's root qdisc tree as the kernel dumped it
// before lanes replaced it: every qdisc under the root, every class and
// every filter, each as its tcmsg, kind and the attributes tc sends to
// create it (statistics dropped). Replaying the objects in order rebuilds
// the tree. It is what the daemon keeps in the interface's state record,
// so that the start after a crash can give the tree back.
type TreeSnapshot struct {
	Objects []TCObject `json:"objects"`
}

// TCObject is one qdisc, class or filter of a TreeSnapshot.
type TCObject struct {
	Type   string `json:"type"` // "qdisc", "class" or "filter"
	Parent uint32 `json:"parent"`
	Handle uint32 `json:"handle"`
	// Info is a filter's priority and protocol (tcm_info); a class's
	// leaf qdisc as dumped (compared, not sent).
	Info uint32 `json:"info,omitempty"`
	Kind string `json:"kind"`
	// Attrs are the object's netlink attributes other than TCA_KIND, raw
	// (TCA_OPTIONS, TCA_STAB, TCA_CHAIN).
	Attrs []byte `json:"attrs,omitempty"`
}

func (o TCObject) String() string {
	return fmt.Sprintf("%s %s parent %x:%x handle %x:%x info %x attrs %x", o.Type, o.Kind,
		o.Parent>>16, o.Parent&0xffff, o.Handle>>16, o.Handle&0xffff, o.Info, o.Attrs)
}

// String lists the objects, one a line.
func (s *TreeSnapshot) String() string {
	if s == nil {
		return "<none>"
	}
	var b strings.Builder
	for _, o := range s.Objects {
		b.WriteString(o.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// ErrRootNotRestorable: the interface's root qdisc tree cannot be
// snapshotted and given back exactly as found, so lanes does not replace
// it unless the plan says so (Plan.ReplaceRoot, config net.replace_root).
var ErrRootNotRestorable = errors.New("its root qdisc tree cannot be restored as found")
