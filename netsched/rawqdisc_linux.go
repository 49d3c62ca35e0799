package netsched

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// The netlink library sends the FIFOs without options and fq_codel without
// its target, so these leaves are built here: tcmsg, TCA_KIND and
// TCA_OPTIONS as tc(8) sends them.

// replaceFifo creates or replaces a FIFO qdisc (kind bfifo, pfifo or
// pfifo_head_drop) with a limit in bytes or packets (TCA_OPTIONS is
// struct tc_fifo_qopt).
func (e *Enforcer) replaceFifo(attrs netlink.QdiscAttrs, kind string, limit uint32) error {
	opt := make([]byte, 4)
	binary.NativeEndian.PutUint32(opt, limit)
	return e.replaceQdiscRaw(attrs, kind, nl.NewRtAttr(nl.TCA_OPTIONS, opt))
}

// replaceFqCodel creates or replaces an fq_codel qdisc with the target
// delay (interval: 20 targets, at least the kernel's 100 ms), ECN on, and
// a packet limit unless 0.
func (e *Enforcer) replaceFqCodel(attrs netlink.QdiscAttrs, target time.Duration, limit uint32) error {
	interval := max(100*time.Millisecond, 20*target)
	opts := nl.NewRtAttr(nl.TCA_OPTIONS, nil)
	opts.AddRtAttr(nl.TCA_FQ_CODEL_TARGET, nl.Uint32Attr(uint32(target/time.Microsecond)))
	opts.AddRtAttr(nl.TCA_FQ_CODEL_INTERVAL, nl.Uint32Attr(uint32(interval/time.Microsecond)))
	opts.AddRtAttr(nl.TCA_FQ_CODEL_ECN, nl.Uint32Attr(1))
	if limit > 0 {
		opts.AddRtAttr(nl.TCA_FQ_CODEL_LIMIT, nl.Uint32Attr(limit))
	}
	return e.replaceQdiscRaw(attrs, "fq_codel", opts)
}

func (e *Enforcer) replaceQdiscRaw(attrs netlink.QdiscAttrs, kind string, options *nl.RtAttr) error {
	req := nl.NewNetlinkRequest(unix.RTM_NEWQDISC, unix.NLM_F_CREATE|unix.NLM_F_REPLACE|unix.NLM_F_ACK)
	if e.ns.IsOpen() {
		s, err := nl.GetNetlinkSocketAt(e.ns, netns.None(), unix.NETLINK_ROUTE)
		if err != nil {
			return fmt.Errorf("netlink socket in netns: %w", err)
		}
		defer s.Close()
		req.Sockets = map[int]*nl.SocketHandle{unix.NETLINK_ROUTE: {Socket: s}}
	}
	req.AddData(&nl.TcMsg{
		Family:  nl.FAMILY_ALL,
		Ifindex: int32(attrs.LinkIndex),
		Handle:  attrs.Handle,
		Parent:  attrs.Parent,
	})
	req.AddData(nl.NewRtAttr(nl.TCA_KIND, nl.ZeroTerminated(kind)))
	req.AddData(options)
	_, err := req.Execute(unix.NETLINK_ROUTE, 0)
	return err
}
