package intnw

import (
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// watchAddresses follows the kernel's address changes (rtnetlink, in the
// caller's network namespace): a path's local address removed takes the
// path down at once, without waiting for its socket to time out, and one
// added dials it. It returns a function that stops watching.
func (c *Conn) watchAddresses() func() {
	ch := make(chan netlink.AddrUpdate, 64)
	done := make(chan struct{})
	o := netlink.AddrSubscribeOptions{ErrorCallback: func(err error) { c.opts.Logf("address watch: %v", err) }}
	if c.opts.Namespace != "" {
		ns, err := netns.GetFromPath(c.opts.Namespace)
		if err != nil {
			c.opts.Logf("address watch: %v (paths are noticed gone by their sockets only)", err)
			return func() {}
		}
		defer ns.Close()
		o.Namespace = &ns
	}
	if err := netlink.AddrSubscribeWithOptions(ch, done, o); err != nil {
		c.opts.Logf("address watch: %v (paths are noticed gone by their sockets only)", err)
		return func() {}
	}
	go func() {
		for u := range ch {
			if u.NewAddr {
				select {
				case c.redial <- struct{}{}:
				default:
				}
				continue
			}
			c.addressGone(u.LinkAddress.IP)
		}
	}()
	return func() { close(done) }
}
