package e2e

import (
	"encoding/binary"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// dscpCapture counts, for d, the DSCPs of the UDP packets to port 9 that
// arrive on dev in namespace ns. Read the result from the channel.
func dscpCapture(t *testing.T, ns, dev string, d time.Duration) <-chan map[int]int {
	t.Helper()
	out := make(chan map[int]int, 1)
	ready := make(chan error, 1)
	go func() {
		seen := map[int]int{}
		defer func() { out <- seen }()
		// The thread enters ns and is discarded afterwards.
		runtime.LockOSThread()
		target, err := netns.GetFromPath("/run/netns/" + ns)
		if err == nil {
			err = netns.Set(target)
			target.Close()
		}
		var fd int
		if err == nil {
			fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM, int(htons(unix.ETH_P_IP)))
		}
		if err == nil {
			defer unix.Close(fd)
			var ifi *net.Interface
			if ifi, err = net.InterfaceByName(dev); err == nil {
				err = unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_IP), Ifindex: ifi.Index})
			}
		}
		if err == nil {
			tv := unix.NsecToTimeval(int64(50 * time.Millisecond))
			err = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
		}
		ready <- err
		if err != nil {
			return
		}
		buf := make([]byte, 64)
		for end := time.Now().Add(d); time.Now().Before(end); {
			n, _, err := unix.Recvfrom(fd, buf, unix.MSG_TRUNC)
			if err != nil || n < 28 || buf[0]>>4 != 4 || buf[9] != unix.IPPROTO_UDP {
				continue
			}
			ihl := int(buf[0]&0xf) * 4
			if min(n, len(buf)) >= ihl+4 && binary.BigEndian.Uint16(buf[ihl+2:]) == 9 {
				seen[int(buf[1]>>2)]++
			}
		}
	}()
	if err := <-ready; err != nil {
		t.Fatalf("capture on %s: %v", dev, err)
	}
	return out
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// With no [net] rate lanesd shapes nothing, yet a background lane's
// sockets leave marked DSCP LE (set on the socket by lanes' cgroup
// programs) and a normal lane's do not; lanes doctor says the network is
// per socket only; a stop leaves the interface and the host as found.
func TestNetworkSocketsOnly(t *testing.T) {
	p := newNetPair(t)
	e := newEnv(t, senderCPU)
	before := p.qdiscs(t)
	e.startIn(p)
	if q := p.qdiscs(t); q != before {
		t.Fatalf("no rate, yet %s changed:\n%s\nwas:\n%s", p.dev, q, before)
	}
	if r := e.lanes("doctor"); !strings.Contains(r.stdout, "per socket only") {
		t.Errorf("lanes doctor does not say the network is per socket only:\n%s", r.stdout)
	}
	send := func(laneName string) map[int]int {
		t.Helper()
		got := dscpCapture(t, p.peer, p.dev+"p", 3*time.Second)
		script := "for i in $(seq 20); do echo x > /dev/udp/198.18.99.2/9; done"
		argv := p.in(e.bin, "--socket", e.socket, "run", "-l", laneName, "--", "bash", "-c", script)
		c := exec.Command(argv[0], argv[1:]...)
		c.Env = append(os.Environ(), roleEnv+"=lanes")
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("lanes run -l %s: %v %s", laneName, err, out)
		}
		return <-got
	}
	if got := send("background"); got[1] != 20 || len(got) != 1 {
		t.Errorf("background: DSCPs seen %v, want 20 packets all LE (1)", got)
	}
	if got := send("normal"); got[0] != 20 || len(got) != 1 {
		t.Errorf("normal: DSCPs seen %v, want 20 packets all 0", got)
	}
	e.stop()
	if q := p.qdiscs(t); q != before {
		t.Errorf("after stop:\n%s\nwant the original:\n%s", q, before)
	}
	noLanesObjects(t)
}
