package monitor

import (
	"encoding/binary"
	"unsafe"

	"golang.org/x/sys/unix"
)

// batchReceiver receives many netlink datagrams per system call
// (recvmmsg), so that a process storm's events (a fork, an exec and an
// exit per process) do not cost a receive each, plus the poller's wake-up.
type batchReceiver struct {
	msgs []mmsghdr
	iovs []unix.Iovec
	bufs [][]byte
}

// mmsghdr is struct mmsghdr (linux/socket.h).
type mmsghdr struct {
	hdr unix.Msghdr
	len uint32
	_   [4]byte
}

const (
	// recvBatch is how many datagrams one receive takes at most.
	recvBatch = 64
	// datagramSize holds any proc connector message (they are < 100 bytes).
	datagramSize = 1024
)

func newBatchReceiver() *batchReceiver {
	r := &batchReceiver{
		msgs: make([]mmsghdr, recvBatch),
		iovs: make([]unix.Iovec, recvBatch),
		bufs: make([][]byte, recvBatch),
	}
	for i := range r.msgs {
		r.bufs[i] = make([]byte, datagramSize)
		r.iovs[i].Base = &r.bufs[i][0]
		r.iovs[i].SetLen(datagramSize)
		r.msgs[i].hdr.Iov = &r.iovs[i]
		r.msgs[i].hdr.SetIovlen(1)
	}
	return r
}

// recv receives what is queued on fd without blocking: the number of
// datagrams (0 with EAGAIN when there is none).
func (r *batchReceiver) recv(fd int) (int, error) {
	for {
		n, _, errno := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(fd), uintptr(unsafe.Pointer(&r.msgs[0])),
			uintptr(len(r.msgs)), unix.MSG_DONTWAIT, 0, 0)
		switch errno {
		case 0:
			return int(n), nil
		case unix.EINTR:
			continue
		default:
			return 0, errno
		}
	}
}

// datagram returns the i-th datagram of the last recv.
func (r *batchReceiver) datagram(i int) []byte {
	n := int(r.msgs[i].len)
	if r.msgs[i].hdr.Flags&unix.MSG_TRUNC != 0 || n > datagramSize {
		n = min(n, datagramSize)
	}
	return r.bufs[i][:n]
}

// nlmsgHdrLen is the size of struct nlmsghdr.
const nlmsgHdrLen = 16

// parseDatagram calls fn with the payload of each netlink message in a
// datagram (len, type, flags, seq, pid; payload; aligned to 4 bytes). A
// malformed header ends the datagram.
func parseDatagram(b []byte, fn func(payload []byte)) {
	for len(b) >= nlmsgHdrLen {
		l := int(binary.NativeEndian.Uint32(b[0:]))
		if l < nlmsgHdrLen || l > len(b) {
			return
		}
		fn(b[nlmsgHdrLen:l])
		next := (l + 3) &^ 3
		if next >= len(b) {
			return
		}
		b = b[next:]
	}
}
