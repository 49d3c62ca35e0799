package e2e

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lanes-qos/lanes/api"
	"github.com/lanes-qos/lanes/internal/testutil"
)

// netPair is two network namespaces joined by a veth pair, 198.18.99.1 on
// the lanes side and 198.18.99.2 on the peer, removed at cleanup.
type netPair struct {
	ns, peer, dev string
}

func newNetPair(t *testing.T) netPair {
	t.Helper()
	n := testutil.UniqueName("le")
	p := netPair{ns: n + "a", peer: n + "b", dev: n + "v"}
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v %s", args, err, out)
		}
	}
	run("netns", "add", p.ns)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", p.ns).Run() })
	run("netns", "add", p.peer)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", p.peer).Run() })
	run("link", "add", p.dev, "netns", p.ns, "type", "veth", "peer", "name", p.dev+"p", "netns", p.peer)
	run("-n", p.ns, "addr", "add", "198.18.99.1/24", "dev", p.dev)
	run("-n", p.peer, "addr", "add", "198.18.99.2/24", "dev", p.dev+"p")
	run("-n", p.ns, "link", "set", p.dev, "up")
	run("-n", p.peer, "link", "set", p.dev+"p", "up")
	run("-n", p.ns, "link", "set", "lo", "up")
	return p
}

// in runs argv inside the lanes-side namespace. nsenter (not `ip netns
// exec`) keeps the host's /sys, and with it the cgroup mounts.
func (p netPair) in(argv ...string) []string {
	return append([]string{"nsenter", "--net=/run/netns/" + p.ns}, argv...)
}

func (p netPair) qdiscs(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("tc", "-n", p.ns, "qdisc", "show", "dev", p.dev).CombinedOutput()
	if err != nil {
		t.Fatalf("tc qdisc show: %v %s", err, out)
	}
	return string(out)
}

// startIn runs lanesd inside the namespace.
func (e *env) startIn(p netPair) {
	e.t.Helper()
	e.startWith(p.in(e.bin))
}

func egress(t *testing.T, e *env, laneName string) api.NetCounters {
	t.Helper()
	var ls api.LanesResponse
	e.lanesJSON(&ls, "ls")
	for _, l := range ls.Lanes {
		if l.Name != laneName {
			continue
		}
		for _, c := range l.NetCounters {
			if c.Direction == "egress" {
				return c
			}
		}
	}
	t.Fatalf("no egress counters for %s: %+v", laneName, ls)
	return api.NetCounters{}
}

// senderCPU gives the background lane normal-class CPU in the network
// tests, whose senders run in it: they test classification and gates, not
// CPU, and on a loaded host an idle-class sender sends nothing.
const senderCPU = "[lanes.background.cpu]\nweight = 100\nidle = false\n"

// socketOpened waits until process pid has a socket on descriptor fd.
func socketOpened(t *testing.T, pid, fd int, within time.Duration) {
	t.Helper()
	link := "/proc/" + strconv.Itoa(pid) + "/fd/" + strconv.Itoa(fd)
	for deadline := time.Now().Add(within); ; {
		if l, err := os.Readlink(link); err == nil && strings.HasPrefix(l, "socket:") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d has no socket on fd %d after %v", pid, fd, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// With [net] set, lanesd shapes the interface with one class per lane,
// counts each lane's packets, makes a moved process's open socket follow
// it, restores the original qdisc on stop and cleans up after kill -9.
func TestNetworkLifecycle(t *testing.T) {
	p := newNetPair(t)
	e := newEnv(t, "[net]\ninterfaces = [\""+p.dev+"\"]\nrate = \"20mbit\"\n"+senderCPU)
	before := p.qdiscs(t)
	e.startIn(p)
	if q := p.qdiscs(t); !strings.Contains(q, "htb 4c4e: root") {
		t.Fatalf("no lanes tree on %s:\n%s", p.dev, q)
	}
	send := func(laneName string, n int) {
		t.Helper()
		script := "for i in $(seq " + strconv.Itoa(n) + "); do echo x > /dev/udp/198.18.99.2/9; done"
		argv := p.in(e.bin, "--socket", e.socket, "run", "-l", laneName, "--", "bash", "-c", script)
		c := exec.Command(argv[0], argv[1:]...)
		c.Env = append(os.Environ(), roleEnv+"=lanes")
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("lanes run -l %s: %v %s", laneName, err, out)
		}
	}
	i0, b0 := egress(t, e, "interactive").Packets, egress(t, e, "background").Packets
	send("interactive", 40)
	send("background", 25)
	if got := egress(t, e, "interactive").Packets - i0; got < 40 {
		t.Errorf("interactive counted %d packets, want >= 40", got)
	}
	if got := egress(t, e, "background").Packets - b0; got != 25 {
		t.Errorf("background counted %d packets, want 25", got)
	}

	// A socket opened before `lanes move` is counted in the new lane afterwards.
	argv := p.in("bash", "-c", "exec 3>/dev/udp/198.18.99.2/9; for i in $(seq 400); do echo x >&3; sleep 0.05; done")
	sender := exec.Command(argv[0], argv[1:]...)
	if err := sender.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sender.Process.Kill(); sender.Wait() })
	// nsenter execs bash in place (same pid), which opens the socket.
	socketOpened(t, sender.Process.Pid, 3, 10*time.Second)
	if r := e.lanes("move", strconv.Itoa(sender.Process.Pid), "background"); r.code != 0 {
		t.Fatalf("move: %s", r.stderr)
	}
	// The sender sends every 50 ms: ten packets counted in background
	// within 5 s (0.5 s on an idle host).
	b1 := egress(t, e, "background").Packets
	var got uint64
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if got = egress(t, e, "background").Packets - b1; got >= 10 {
			break
		}
	}
	if got < 10 {
		t.Errorf("after the move, the open socket's packets in background: %d in 5s, want >= 10", got)
	}

	// kill -9: the tree stays; a restart replaces it; a stop restores the original.
	e.kill9()
	if q := p.qdiscs(t); !strings.Contains(q, "htb 4c4e: root") {
		t.Errorf("tree gone after kill -9:\n%s", q)
	}
	e.startIn(p)
	if q := p.qdiscs(t); !strings.Contains(q, "htb 4c4e: root") {
		t.Errorf("no tree after restart:\n%s", q)
	}
	e.stop()
	if q := p.qdiscs(t); q != before {
		t.Errorf("after stop:\n%s\nwant the original:\n%s", q, before)
	}
	noLanesObjects(t)
}

// Bad network settings: a clear error, and nothing left on any interface.
func TestNetworkBadInput(t *testing.T) {
	p := newNetPair(t)
	before := p.qdiscs(t)
	cases := []struct {
		name   string
		config string
		msg    string
	}{
		{"missing interface", "[net]\ninterfaces = [\"" + p.dev + "\", \"nosuch0\"]\nrate = \"20mbit\"\n", "nosuch0"},
		{"zero rate", "[net]\ninterfaces = [\"" + p.dev + "\"]\nrate = \"0\"\n", "lanes.toml:3: net.rate"},
		{"unparsable rate", "[net]\ninterfaces = [\"" + p.dev + "\"]\nrate = \"fast\"\n", "lanes.toml:3: net.rate"},
		{"lane rate above the interface", "[net]\ninterfaces = [\"" + p.dev + "\"]\nrate = \"20mbit\"\n[lanes.video]\nnet = { rate = \"30mbit\" }\n", "lanes.video.net.rate"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.config)
			argv := p.in(append([]string{e.bin}, e.daemonArgs()...)...)
			c := exec.Command(argv[0], argv[1:]...)
			c.Env = append(os.Environ(), roleEnv+"=lanesd")
			done := make(chan struct{})
			var out []byte
			var err error
			go func() { out, err = c.CombinedOutput(); close(done) }()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				c.Process.Signal(syscall.SIGTERM)
				<-done
				t.Fatalf("lanesd started with a bad network config:\n%s", out)
			}
			if err == nil || !strings.Contains(string(out), tc.msg) {
				t.Errorf("lanesd: %v\n%s\nwant an error naming %q", err, out, tc.msg)
			}
			if q := p.qdiscs(t); q != before {
				t.Errorf("left on %s:\n%s", p.dev, q)
			}
			noLanesObjects(t)
		})
	}
}

// With classifier = "ports", lanesd classifies by the lanes' port rules
// (u32) instead of by process: a process in the default lane sending to a
// port of the interactive lane's rules is counted in interactive, and
// `lanes doctor` says port rules are in use.
func TestNetworkPortRules(t *testing.T) {
	p := newNetPair(t)
	e := newEnv(t, "[net]\ninterfaces = [\""+p.dev+"\"]\nrate = \"20mbit\"\nclassifier = \"ports\"\n[lanes.interactive]\nnet = { ports = [\"udp/9\"] }\n")
	e.startIn(p)
	i0, n0 := egress(t, e, "interactive").Packets, egress(t, e, "normal").Packets
	argv := p.in(e.bin, "--socket", e.socket, "run", "-l", "normal", "--", "bash", "-c",
		"for i in $(seq 30); do echo x > /dev/udp/198.18.99.2/9; echo y > /dev/udp/198.18.99.2/10; done")
	c := exec.Command(argv[0], argv[1:]...)
	c.Env = append(os.Environ(), roleEnv+"=lanes")
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("lanes run: %v %s", err, out)
	}
	if got := egress(t, e, "interactive").Packets - i0; got < 30 {
		t.Errorf("interactive counted %d packets to udp/9, want >= 30", got)
	}
	if got := egress(t, e, "normal").Packets - n0; got < 30 {
		t.Errorf("normal counted %d packets to udp/10, want >= 30", got)
	}
	if r := e.lanes("doctor"); !strings.Contains(r.stdout, "port rules") {
		t.Errorf("lanes doctor does not report port rules:\n%s%s", r.stdout, r.stderr)
	}
	e.stop()
	noLanesObjects(t)
}

// An interface's own root tree comes back as found after a stop, and
// after kill -9, a restart and a stop (the snapshot lives in the state
// record). A root lanes cannot restore is left alone and reported.
func TestNetworkRootTreeRestored(t *testing.T) {
	p := newNetPair(t)
	tc := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("tc", append([]string{"-n", p.ns}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("tc %v: %v %s", args, err, out)
		}
	}
	tc("qdisc", "add", "dev", p.dev, "root", "handle", "5:", "pfifo", "limit", "77")
	e := newEnv(t, "[net]\ninterfaces = [\""+p.dev+"\"]\nrate = \"20mbit\"\n")
	before := p.qdiscs(t)
	e.startIn(p)
	if q := p.qdiscs(t); !strings.Contains(q, "htb 4c4e: root") {
		t.Fatalf("no lanes tree on %s:\n%s", p.dev, q)
	}
	e.stop()
	if q := p.qdiscs(t); q != before {
		t.Errorf("after stop:\n%s\nwant:\n%s", q, before)
	}
	e.startIn(p)
	e.kill9()
	e.startIn(p)
	if q := p.qdiscs(t); !strings.Contains(q, "htb 4c4e: root") {
		t.Errorf("no tree after restart:\n%s", q)
	}
	e.stop()
	if q := p.qdiscs(t); q != before {
		t.Errorf("after kill -9, restart and stop:\n%s\nwant:\n%s", q, before)
	}

	// An ATM size table: the kernel does not dump the table, so the root
	// cannot be rebuilt as found.
	tc("qdisc", "replace", "dev", p.dev, "root", "handle", "2:", "stab", "linklayer", "atm", "overhead", "10", "bfifo", "limit", "3000")
	kept := p.qdiscs(t)
	e.startIn(p)
	if q := p.qdiscs(t); q != kept {
		t.Errorf("a root lanes cannot restore was replaced:\n%s\nwas:\n%s", q, kept)
	}
	var st api.Status
	e.lanesJSON(&st, "status")
	found := false
	for _, h := range st.Health {
		if h.Code == "net-root-not-restorable:"+p.dev && strings.Contains(h.Message, "replace_root") {
			found = true
		}
	}
	if !found {
		t.Errorf("no net-root-not-restorable health entry naming replace_root: %+v", st.Health)
	}
	if r := e.lanes("doctor"); !strings.Contains(r.stdout, "replace_root") {
		t.Errorf("lanes doctor does not say why %s is kept:\n%s", p.dev, r.stdout)
	}
	e.stop()
	if q := p.qdiscs(t); q != kept {
		t.Errorf("after stop:\n%s\nwant:\n%s", q, kept)
	}
}

// `lanesd --cleanup` after a kill -9 gives the network back too: the
// shaped interface's root qdisc, its IFB and its segment sizes are as they
// were before lanesd started (from the state records), as a restart and
// stop would leave them.
func TestNetworkCleanupAfterCrash(t *testing.T) {
	p := newNetPair(t)
	e := newEnv(t, "[net]\ninterfaces = [\""+p.dev+"\"]\nrate = \"20mbit\"\ningress = true\n")
	before := p.qdiscs(t)
	links := func(args ...string) string {
		out, err := exec.Command("ip", append([]string{"-n", p.ns, "-d", "link", "show"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("ip link show: %v %s", err, out)
		}
		return string(out)
	}
	gso := func() string {
		s := links("dev", p.dev)
		i := strings.Index(s, "gso_max_size ")
		if i < 0 {
			t.Fatalf("no gso_max_size in:\n%s", s)
		}
		return strings.Fields(s[i:])[1]
	}
	gsoBefore := gso()
	e.startIn(p)
	if q := p.qdiscs(t); !strings.Contains(q, "htb 4c4e: root") {
		t.Fatalf("no lanes tree on %s:\n%s", p.dev, q)
	}
	if l := links(); !strings.Contains(l, "lanes-ifb") {
		t.Fatalf("no IFB with ingress = true:\n%s", l)
	}
	if got := gso(); got == gsoBefore {
		t.Errorf("gso_max_size %s while shaping: lanes did not bound it", got)
	}
	e.kill9()
	argv := p.in(append([]string{e.bin}, append(e.daemonArgs(), "--cleanup")...)...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), roleEnv+"=lanesd")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("lanesd --cleanup: %v\n%s", err, out)
	}
	if q := p.qdiscs(t); q != before {
		t.Errorf("after --cleanup:\n%s\nwant the original:\n%s", q, before)
	}
	l := links()
	if strings.Contains(l, "lanes-ifb") {
		t.Errorf("IFB left after --cleanup:\n%s", l)
	}
	if got, want := gso(), gsoBefore; got != want {
		t.Errorf("gso_max_size %s after --cleanup, want %s as before", got, want)
	}
}
