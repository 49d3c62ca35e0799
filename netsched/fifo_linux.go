package netsched

import (
	"encoding/binary"
	"fmt"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// replaceBfifo creates or replaces a bfifo qdisc with a byte limit. The
// netlink library knows bfifo only without options, so the request is
// built here: tcmsg, TCA_KIND "bfifo", TCA_OPTIONS struct tc_fifo_qopt.
func (e *Enforcer) replaceBfifo(attrs netlink.QdiscAttrs, limit uint32) error {
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
	req.AddData(nl.NewRtAttr(nl.TCA_KIND, nl.ZeroTerminated("bfifo")))
	opt := make([]byte, 4)
	binary.NativeEndian.PutUint32(opt, limit)
	req.AddData(nl.NewRtAttr(nl.TCA_OPTIONS, opt))
	_, err := req.Execute(unix.NETLINK_ROUTE, 0)
	return err
}
