package intnw

import (
	"net"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// sockStats is what the kernel says of a path's TCP socket.
type sockStats struct {
	rtt, minRTT  time.Duration
	deliveryRate float64 // bytes per second
	appLimited   bool    // the rate sample was limited by us, not the network
	outq         int     // bytes written and not yet acknowledged by the peer's TCP
	delivered    uint32  // segments delivered so far: a new rate sample when it moves
	bytesAcked   uint64  // payload bytes the peer has acknowledged so far
	mss          uint32  // the MSS the kernel counts each delivered segment as
	retrans      uint32  // segments sent again so far
	ok           bool
}

// readSockStats reads TCP_INFO and SIOCOUTQ of c.
func readSockStats(c *net.TCPConn) sockStats {
	rc, err := c.SyscallConn()
	if err != nil {
		return sockStats{}
	}
	var st sockStats
	_ = rc.Control(func(fd uintptr) {
		info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		if err != nil {
			return
		}
		// tcpi_delivery_rate_app_limited is bit 0 of the byte after
		// tcpi_options' window scales (offset 7), which the Go struct
		// leaves as padding.
		st.appLimited = (*[8]byte)(unsafe.Pointer(info))[7]&1 != 0
		st.rtt = time.Duration(info.Rtt) * time.Microsecond
		st.minRTT = time.Duration(info.Min_rtt) * time.Microsecond
		st.deliveryRate = float64(info.Delivery_rate)
		st.delivered = info.Delivered
		st.bytesAcked = info.Bytes_acked
		st.mss = info.Snd_mss
		st.retrans = info.Total_retrans
		st.outq, _ = unix.IoctlGetInt(int(fd), unix.SIOCOUTQ)
		st.ok = true
	})
	return st
}

// tuneSocket sets what a path's socket needs: no Nagle delay for small
// IROBs, and a user timeout so that a path whose network has gone fails
// within timeout instead of retransmitting for many minutes.
func tuneSocket(c *net.TCPConn, timeout time.Duration) error {
	if err := c.SetNoDelay(true); err != nil {
		return err
	}
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(timeout/time.Millisecond))
	}); err != nil {
		return err
	}
	return serr
}

// bindToDevice returns a dialer control that binds the socket to device.
func bindToDevice(device string) func(network, address string, c syscall.RawConn) error {
	return func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptString(int(fd), unix.SOL_SOCKET, unix.SO_BINDTODEVICE, device)
		}); err != nil {
			return err
		}
		return serr
	}
}

// socketQueue is the bytes c holds that its peer's TCP has not
// acknowledged (SIOCOUTQ): what new data would queue behind.
func socketQueue(c *net.TCPConn) int {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0
	}
	var n int
	_ = rc.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.SIOCOUTQ) })
	return n
}
