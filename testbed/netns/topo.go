package netns

import (
	"fmt"
	"net/netip"
	"os"
)

// Topology is a set of namespaces built by New. Src and Dst are joined by
// one path per router; each path has its own addresses so that a program
// picks a path by choosing the destination (or source) address.
type Topology struct {
	// Prefix is the unique name prefix of every namespace of this topology.
	Prefix string
	// Src and Dst are the names of the end namespaces (usable with
	// `ip netns exec`).
	Src, Dst string
	// Paths lists the paths from Src to Dst, one per router.
	Paths []*Path

	logf func(string, ...any)
}

// Path is one route from Src to Dst through a router namespace. Traffic
// from Src enters the router on RtrSrcDev and leaves through TunUp: the
// process holding TunUp reads it and must write it to TunDown, whence the
// kernel forwards it to Dst. The reverse direction goes TunDown → TunUp.
type Path struct {
	Router string // router namespace name
	// Device names: SrcDev in Src, DstDev in Dst, and the router's ends.
	SrcDev, DstDev       string
	RtrSrcDev, RtrDstDev string
	// Addresses of the end hosts on this path.
	SrcAddr, DstAddr netip.Addr
	// TUN devices in the router: packets src→dst are read from TunUp and
	// must be written to TunDown; packets dst→src are read from TunDown and
	// must be written to TunUp. Each read or write is one IPv4 packet.
	TunUp, TunDown *os.File
	// TunUpName and TunDownName are the TUN device names.
	TunUpName, TunDownName string
}

// pathAddrs returns the addresses of path i: src side 198.18.(10+i).0/24,
// dst side 198.18.(20+i).0/24, the router being .2 on both.
func pathAddrs(i int) (src, rtrSrc, dst, rtrDst netip.Addr) {
	a := func(c, d int) netip.Addr { return netip.AddrFrom4([4]byte{198, 18, byte(c), byte(d)}) }
	return a(10+i, 1), a(10+i, 2), a(20+i, 1), a(20+i, 2)
}

// namePrefix is the unique prefix of a topology: lt<pid>_<n>. With a pid
// up to 7 digits and n up to 3 it is 13 bytes, leaving 2 for device names
// within the 15-byte limit.
func namePrefix(pid, n int) string {
	return fmt.Sprintf("lt%d_%d", pid, n%1000)
}
