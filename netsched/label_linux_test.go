package netsched

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lanes-qos/lanes/internal/testutil"
	"github.com/lanes-qos/lanes/lane"
)

const helperEnv = "LANES_TEST_UDP_SENDER"

// TestHelperUDPSender is not a test: started as a child process with
// helperEnv="prio delay-ms count", it opens a UDP socket, sets SO_PRIORITY
// to prio unless it is -1, waits delay (so that the test can move it), then
// sends count 200-byte datagrams to dst, 2 ms apart.
func TestHelperUDPSender(t *testing.T) {
	spec := os.Getenv(helperEnv)
	if spec == "" {
		t.Skip("helper process only")
	}
	var prio, delayMs, count int
	if _, err := fmt.Sscan(spec, &prio, &delayMs, &count); err != nil {
		fmt.Fprintln(os.Stderr, "bad spec:", err)
		os.Exit(2)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if prio >= 0 {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PRIORITY, prio); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	fmt.Println("ready")
	time.Sleep(time.Duration(delayMs) * time.Millisecond)
	to := &unix.SockaddrInet4{Port: 9}
	copy(to.Addr[:], net.ParseIP(dstAddr).To4())
	buf := make([]byte, 200)
	for i := 0; i < count; i++ {
		_ = unix.Sendto(fd, buf, 0, to)
		time.Sleep(2 * time.Millisecond)
	}
	os.Exit(0)
}

// startSender starts the helper in src, in cgroup, and waits until its
// socket exists.
func startSender(t *testing.T, ctx context.Context, tp *topo, cgroup string, prio int, delay time.Duration, count int) *exec.Cmd {
	t.Helper()
	cmd := command(t, ctx, tp.src, cgroup, os.Args[0], "-test.run=^TestHelperUDPSender$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d %d %d", helperEnv, prio, delay.Milliseconds(), count))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := startRT(cmd, rtClient); err != nil {
		t.Fatalf("start sender: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	b := make([]byte, 6)
	if _, err := out.Read(b); err != nil || !strings.HasPrefix(string(b), "ready") {
		_ = cmd.Wait()
		t.Fatalf("sender did not start: %q %v: %s", b, err, stderr.String())
	}
	return cmd
}

// TestLabelPrecedence checks which lane a socket's packets are counted in:
// lanes' own label from the cgroup, a program's explicit label, a move,
// and the cgroup fallback of the egress classifier.
func TestLabelPrecedence(t *testing.T) {
	testutil.RequireRoot(t)
	tp := newTopo(t, false)
	l := setupLanes(t, tp)
	bgClass := int(ClassID(Major, backgroundMinor))
	const count = 300
	tests := []struct {
		name   string
		cgroup string // lane whose cgroup the socket is created in ("": none)
		prio   int    // SO_PRIORITY the program sets, -1 none
		moveTo string // lane the process is moved to before sending
		late   bool   // bind the socket's cgroup to want only after the socket exists
		want   string
	}{
		{"created in a lane", lane.Interactive, -1, "", false, lane.Interactive},
		{"explicit label beats the cgroup", lane.Normal, bgClass, "", false, lane.Background},
		{"non-lanes priority: cgroup decides", lane.Interactive, 6, "", false, lane.Interactive},
		{"outside lanes: default lane", "", -1, "", false, lane.Normal},
		{"moved socket follows", lane.Normal, -1, lane.Interactive, false, lane.Interactive},
		{"explicit label survives a move", lane.Normal, bgClass, lane.Interactive, false, lane.Background},
		{"socket older than the binding", "late", -1, "", true, "capped"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), timeout(20*time.Second))
			defer cancel()
			cg := ""
			switch {
			case tt.late:
				cg = newCgroup(t, "ltlate")
			case tt.cgroup != "":
				cg = l.cg[tt.cgroup]
			}
			cmd := startSender(t, ctx, tp, cg, tt.prio, 500*time.Millisecond, count)
			if tt.late {
				if err := l.e.BindLane(tt.want, cg); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = l.e.BindLane(tt.want, l.cg[tt.want]) })
			}
			if tt.moveTo != "" {
				pid := cmd.Process.Pid
				if err := os.WriteFile(filepath.Join(l.cg[tt.moveTo], "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
					t.Fatal(err)
				}
				if err := l.e.MoveSockets(pid, tt.moveTo); err != nil {
					t.Fatalf("MoveSockets: %v", err)
				}
			}
			before := lanePackets(t, l, tp.srcIf)
			if err := cmd.Wait(); err != nil {
				t.Fatalf("sender (case %d): %v", i, err)
			}
			after := lanePackets(t, l, tp.srcIf)
			got := map[string]uint64{}
			for name, n := range after {
				got[name] = n - before[name]
			}
			if got[tt.want] < count*9/10 {
				t.Errorf("lane %s counted %d of %d packets; all lanes: %v", tt.want, got[tt.want], count, got)
			}
		})
	}
}

func lanePackets(t *testing.T, l *lanesOn, iface string) map[string]uint64 {
	t.Helper()
	st, err := l.e.Stats(iface)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]uint64{}
	for _, s := range st {
		if s.Direction == Egress {
			m[s.Lane] = s.Packets
		}
	}
	return m
}

// TestUnbindLane: after UnbindLane, new sockets of the cgroup are no
// longer labelled and its packets go to the default lane.
func TestUnbindLane(t *testing.T) {
	testutil.RequireRoot(t)
	tp := newTopo(t, false)
	l := setupLanes(t, tp)
	if err := l.e.UnbindLane(lane.Interactive); err != nil {
		t.Fatalf("UnbindLane: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout(20*time.Second))
	defer cancel()
	const count = 300
	cmd := startSender(t, ctx, tp, l.cg[lane.Interactive], -1, 100*time.Millisecond, count)
	before := lanePackets(t, l, tp.srcIf)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("sender: %v", err)
	}
	after := lanePackets(t, l, tp.srcIf)
	if n := after[lane.Normal] - before[lane.Normal]; n < count*9/10 || after[lane.Interactive] != before[lane.Interactive] {
		t.Errorf("after UnbindLane: normal +%d, interactive +%d packets; want all %d in normal", n, after[lane.Interactive]-before[lane.Interactive], count)
	}
}

// TestBindBeforeApply: a lane bound before any plan has it is classified
// once Apply brings the plan.
func TestBindBeforeApply(t *testing.T) {
	testutil.RequireRoot(t)
	tp := newTopo(t, false)
	e := newEnforcer(t, tp.src, nil)
	cg := newCgroup(t, "ltbb")
	if err := e.BindLane(lane.Background, cg); err != nil {
		t.Fatalf("BindLane before Apply: %v", err)
	}
	p := testPlan(t, shapingConfig, tp.srcIf, e.Leaf())
	if err := e.Apply(context.Background(), p); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	t.Cleanup(func() { _ = e.Remove(tp.srcIf) })
	l := &lanesOn{e: e, plan: p}
	ctx, cancel := context.WithTimeout(context.Background(), timeout(20*time.Second))
	defer cancel()
	const count = 300
	cmd := startSender(t, ctx, tp, cg, -1, 100*time.Millisecond, count)
	before := lanePackets(t, l, tp.srcIf)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("sender: %v", err)
	}
	after := lanePackets(t, l, tp.srcIf)
	if n := after[lane.Background] - before[lane.Background]; n < count*9/10 {
		t.Errorf("lane bound before Apply: background +%d packets, want %d", n, count)
	}
}
