package multinet

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/lanes-qos/lanes/internal/features"
	"github.com/lanes-qos/lanes/intnw"
	"github.com/lanes-qos/lanes/testbed/linkem"
	"github.com/lanes-qos/lanes/testbed/netns"
)

// Experiment runs every scenario, workload and arm Repeats times, each on
// a fresh topology, and writes multinet.json and multinet.md into
// opts.OutDir.
func Experiment(ctx context.Context, opts Options) (*Results, error) {
	if err := opts.defaults(); err != nil {
		return nil, fmt.Errorf("multinet: %w", err)
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("multinet: needs root (network namespaces)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, fmt.Errorf("multinet: %w (apt-get install iproute2)", err)
	}
	unlock, err := netns.LockHost(ctx, func() {
		fmt.Fprintf(opts.Progress, "multinet: waiting for another testbed user (%s)\n", netns.LockPath)
	})
	if err != nil {
		return nil, fmt.Errorf("multinet: %w", err)
	}
	defer unlock()
	res := &Results{Started: time.Now().UTC(), Host: fmt.Sprintf("Linux %s", features.KernelRelease()),
		Setup: fmt.Sprintf("Each run on a fresh two-network topology (the link emulator per network, the same rate and half the RTT each way, a drop-tail queue of half a second); "+
			"sensor: a 4 KB summary (bg-small) and 25 KB of raw data (bg-large, after its summary) every second for %v (the labelled multi-socket's sensor holds a reading it cannot send now with a thunk and drops it when the next is collected, its next summary covering the seconds since the last one sent), and three episodes of five urgent 256-byte messages (fg-small) in 7 s, latency from send to delivery; "+
			"email: the client asks for 100 headers (fg-small, answered fg-large), the server then sends 100 messages of 50 B to 256 KB (log-uniform, seed %d; bg), and the client opens the last five one a second (fg-small request, fg reply), latency from request to whole reply; "+
			"fs: the client writes back 40 files of 4 KB to 256 KB (log-uniform; bg-large, each after the one before) while the user fetches a 4 KB block every half second, 20 in all (fg-small request and reply), latency from request to reply, and the time until the server has every write-back. Seed %d.",
			opts.Duration, opts.Seed, opts.Seed)}
	port := uint16(7200)
	for rep := 0; rep < opts.Repeats; rep++ {
		for _, scn := range opts.Scenarios {
			sc, _ := scenarioByName(scn)
			for _, wl := range opts.Workloads {
				for _, arm := range opts.Arms {
					if ctx.Err() != nil {
						return res, ctx.Err()
					}
					port++
					run := runOne(ctx, opts, sc, wl, arm, rep, port)
					res.Runs = append(res.Runs, run)
					if run.Error != "" {
						fmt.Fprintf(opts.Progress, "multinet: %s %s %s: ERROR %s\n", scn, wl, arm, run.Error)
						continue
					}
					bulk := fmt.Sprintf("bulk %.1f KB/s", run.BulkRate/1e3)
					switch wl {
					case "email":
						bulk = fmt.Sprintf("all fetched in %.1f s", run.BulkSecs)
					case "fs":
						bulk = fmt.Sprintf("all written back in %.1f s", run.BulkSecs)
					}
					if run.Dropped > 0 {
						bulk += fmt.Sprintf(" (%d readings dropped)", run.Dropped)
					}
					fmt.Fprintf(opts.Progress, "multinet: %s %s %s: interactive %.0f ms (%d ops, %d unfinished), %s\n",
						scn, wl, arm, run.meanInteractive(), len(run.Interactive), run.Incomplete, bulk)
				}
			}
		}
	}
	return res, res.Write(opts.OutDir)
}

func runOne(ctx context.Context, opts Options, sc Scenario, wl, arm string, rep int, port uint16) (run Run) {
	run = Run{Scenario: sc.Name, Workload: wl, Arm: arm, Repeat: rep}
	topo, err := netns.New(2, opts.Logf)
	if err != nil {
		run.Error = err.Error()
		return run
	}
	defer topo.Close()
	stop, err := startLinks(topo, sc, opts.Seed+uint64(rep)*10, opts.TraceDir, opts.Logf)
	if err != nil {
		run.Error = err.Error()
		return run
	}
	defer stop()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	client, server, err := connect(cctx, arm, topo, sc, port, opts.Logf)
	cancel()
	if err != nil {
		run.Error = fmt.Sprintf("connect: %v", err)
		return run
	}
	defer client.close()
	defer server.close()
	switch wl {
	case "sensor":
		sensor(ctx, opts, client, server, &run)
	case "email":
		email(ctx, opts, client, server, &run)
	case "fs":
		fileSystem(ctx, opts, client, server, &run)
	}
	run.PathBytes = pathBytes(sc, client, server)
	return run
}

// startLinks starts the link emulator of each of sc's networks on topo's
// paths (network i's schedule seeded seed+i); stop stops them.
func startLinks(topo *netns.Topology, sc Scenario, seed uint64, traceDir string, logf func(string, ...any)) (stop func(), err error) {
	var ems []*linkem.Emulator
	stop = func() {
		for _, em := range ems {
			em.Stop()
		}
	}
	for i, l := range sc.Links {
		up, err := linkConfig(l, seed+uint64(i), true, traceDir)
		if err != nil {
			stop()
			return nil, err
		}
		down, err := linkConfig(l, seed+uint64(i), false, traceDir)
		if err != nil {
			stop()
			return nil, err
		}
		em, err := linkem.Start(topo.Paths[i].TunUp, topo.Paths[i].TunDown, linkem.Options{Up: up, Down: down, Realtime: true, Logf: logf})
		if err != nil {
			stop()
			return nil, err
		}
		ems = append(ems, em)
	}
	return stop, nil
}

// Message kinds of the workloads: the first byte of each message, then
// the send time (ns since the run's start) and a sequence number.
const (
	kUrgent byte = iota + 1
	kSummary
	kRaw
	kHeadersReq
	kHeaders
	kBody    // pushed in the background
	kBodyReq // an on-demand fetch
	kBodyFG  // its reply
	kWrite   // a file system write-back
	kReadReq // a demand fetch of a block
	kBlock   // its reply
	hdrLen   = 1 + 8 + 4
)

func msg(kind byte, start time.Time, seq uint32, size int) []byte {
	b := make([]byte, max(size, hdrLen))
	b[0] = kind
	binary.BigEndian.PutUint64(b[1:], uint64(time.Since(start)))
	binary.BigEndian.PutUint32(b[9:], seq)
	return b
}

func parse(b []byte) (kind byte, sent time.Duration, seq uint32, ok bool) {
	if len(b) < hdrLen {
		return 0, 0, 0, false
	}
	return b[0], time.Duration(binary.BigEndian.Uint64(b[1:])), binary.BigEndian.Uint32(b[9:]), true
}

// sensor is the vehicular sensing application: the client sends, the
// server receives.
func sensor(ctx context.Context, opts Options, client, server transport, run *Run) {
	start := time.Now()
	var mu sync.Mutex
	urgentAt := map[uint32]bool{}
	var bulk int64
	rctx, cancel := context.WithTimeout(ctx, opts.Duration+15*time.Second)
	defer cancel()
	done := make(chan struct{})
	in := received(rctx, server, 256)
	go func() {
		defer close(done)
		for m := range in {
			kind, sent, seq, ok := parse(m.data)
			if !ok {
				continue
			}
			now := time.Since(start)
			mu.Lock()
			switch kind {
			case kUrgent:
				if !urgentAt[seq] {
					urgentAt[seq] = true
					run.Interactive = append(run.Interactive, float64(now-sent)/1e6)
				}
			case kSummary, kRaw:
				if now <= opts.Duration {
					bulk += int64(len(m.data))
				}
			}
			mu.Unlock()
		}
	}()
	// Urgent episodes at 15, 50 and 85 % of the run: five messages 1.75 s
	// apart.
	var urgent []time.Duration
	for _, f := range []float64{0.15, 0.5, 0.85} {
		for k := range 5 {
			urgent = append(urgent, time.Duration(f*float64(opts.Duration))+time.Duration(k)*1750*time.Millisecond)
		}
	}
	go func() {
		for i, at := range urgent {
			if d := time.Until(start.Add(at)); d > 0 {
				select {
				case <-time.After(d):
				case <-rctx.Done():
					return
				}
			}
			if _, err := client.send(intnw.FGSmall, nil, msg(kUrgent, start, uint32(i), 256)); err != nil {
				return
			}
		}
	}()
	if d, ok := client.(deferrer); ok {
		dropped, err := readingsDeferred(rctx, opts.Duration, start, d)
		run.Dropped = dropped
		if err != nil {
			run.Error = fmt.Sprintf("send: %v", err)
		}
	} else if err := readings(rctx, opts.Duration, start, client); err != nil {
		run.Error = fmt.Sprintf("send: %v", err)
	}
	// Wait for the urgent messages still under way (not once the run is
	// cancelled: rctx ends with ctx).
	for end := start.Add(opts.Duration + 15*time.Second); time.Now().Before(end) && rctx.Err() == nil; time.Sleep(50 * time.Millisecond) {
		mu.Lock()
		n := len(urgentAt)
		mu.Unlock()
		if n == len(urgent) {
			break
		}
	}
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	run.Incomplete = len(urgent) - len(urgentAt)
	run.BulkRate = float64(bulk) / opts.Duration.Seconds()
}

// readings sends the sensor's readings for d: every second a summary
// (bg-small) and its raw data (bg-large, after the summary), whatever
// the networks can carry (a transport without thunks queues them).
func readings(ctx context.Context, d time.Duration, start time.Time, client transport) error {
	for sec := 0; time.Duration(sec)*time.Second < d; sec++ {
		if w := time.Until(start.Add(time.Duration(sec) * time.Second)); w > 0 {
			select {
			case <-time.After(w):
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		id, err := client.send(intnw.BGSmall, nil, summary(start, uint32(sec), 1))
		if err != nil {
			return err
		}
		if _, err := client.send(intnw.BGLarge, []uint64{id}, msg(kRaw, start, uint32(sec), rawSize)); err != nil {
			return err
		}
	}
	return nil
}

// The sensor's messages: a summary and a second's raw data.
const (
	summarySize = 4096
	rawSize     = 25 * 1024
)

// summary is a summary of the seconds up to sec, periods of them (after
// the header, as a 32-bit count).
func summary(start time.Time, sec uint32, periods int) []byte {
	b := msg(kSummary, start, sec, summarySize)
	binary.BigEndian.PutUint32(b[hdrLen:], uint32(periods))
	return b
}

// readingsDeferred is readings as the seed's application does it through
// a transport that can defer (the multi-socket with thunks): a summary or
// raw reading the multi-socket cannot send now is held and a thunk
// registered; a raw reading still held when the next second's is
// collected is dropped (the vehicle has no room to keep it), and the next
// summary covers every second since the last summary sent. It returns the
// raw readings dropped.
func readingsDeferred(ctx context.Context, d time.Duration, start time.Time, t deferrer) (dropped int, err error) {
	ready := make(chan struct{}, 1)
	notify := func() {
		select {
		case ready <- struct{}{}:
		default:
		}
	}
	var (
		periods   int  // the seconds the next summary covers
		summarize bool // a summary of them waits to be sent
		summaryID uint64
		raw       = -1        // the second whose raw reading is held (-1: none)
		cancel    func() bool // the thunk registered (nil: none)
	)
	// held notes a new thunk, withdrawing the one before (one that has
	// run says so and does nothing).
	held := func(c func() bool) {
		if cancel != nil {
			cancel()
		}
		cancel = c
	}
	flush := func() error {
		if summarize {
			id, c, err := t.sendOrDefer(intnw.BGSmall, nil, summary(start, uint32(max(raw, 0)), periods), notify)
			if err != nil || c != nil {
				held(c)
				return err
			}
			summaryID, summarize, periods = id, false, 0
		}
		if raw >= 0 {
			_, c, err := t.sendOrDefer(intnw.BGLarge, []uint64{summaryID}, msg(kRaw, start, uint32(raw), rawSize), notify)
			if err != nil || c != nil {
				held(c)
				return err
			}
			raw = -1
		}
		return nil
	}
	defer func() {
		if cancel != nil {
			cancel()
		}
		if raw >= 0 {
			dropped++
		}
	}()
	// A tick each second collects a reading; the last reading may still
	// go until the run ends, when the next would have come.
	for sec := 0; ; {
		next := time.Duration(sec) * time.Second
		if next >= d {
			next = d
		}
		select {
		case <-time.After(time.Until(start.Add(next))):
			if next == d {
				return dropped, nil
			}
			held(nil)
			if raw >= 0 {
				dropped++
			}
			raw, periods, summarize = sec, periods+1, true
			sec++
		case <-ready: // a thunk ran: what is held may go now
		case <-ctx.Done():
			return dropped, nil
		}
		if err := flush(); err != nil {
			return dropped, err
		}
	}
}

// label is the e-mail proxy's label for a reply of n bytes.
func label(fg bool, n int) intnw.Label {
	l := intnw.FGSmall
	if !fg {
		l = intnw.BGSmall
	}
	if n > 16<<10 {
		l |= intnw.Large
	}
	return l
}

// email is the e-mail client after a disconnection: headers, then every
// message in the background while the user opens five.
func email(ctx context.Context, opts Options, client, server transport, run *Run) {
	sizes := bodySizes(opts.Seed)
	start := time.Now()
	rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	// The server answers the headers request with the headers and then
	// pushes every message; an on-demand request gets its message at
	// once, in the foreground.
	go func() {
		for {
			m, err := server.recv(rctx)
			if err != nil {
				return
			}
			kind, _, seq, ok := parse(m.data)
			if !ok {
				continue
			}
			switch kind {
			case kHeadersReq:
				if _, err := server.send(label(true, 100*200), nil, msg(kHeaders, start, 0, 100*200)); err != nil {
					return
				}
				for i, n := range sizes {
					if _, err := server.send(label(false, n), nil, msg(kBody, start, uint32(i), n)); err != nil {
						return
					}
				}
			case kBodyReq:
				if int(seq) < len(sizes) {
					if _, err := server.send(label(true, sizes[seq]), nil, msg(kBodyFG, start, seq, sizes[seq])); err != nil {
						return
					}
				}
			}
		}
	}()
	if _, err := client.send(intnw.FGSmall, nil, msg(kHeadersReq, start, 0, 64)); err != nil {
		run.Error = fmt.Sprintf("send: %v", err)
		return
	}
	asked := map[uint32]time.Duration{}
	got := map[uint32]bool{}
	bodies := 0
	var headersAt time.Duration
	next := 0
	open := []uint32{95, 96, 97, 98, 99}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	in := received(rctx, client, 256)
	for bodies < len(sizes) || len(got) < len(open) {
		select {
		case m, ok := <-in:
			if !ok {
				run.Incomplete = len(open) - len(got)
				run.Error = fmt.Sprintf("%d of %d messages fetched in %v", bodies, len(sizes), time.Since(start).Round(time.Second))
				return
			}
			kind, _, seq, _ := parse(m.data)
			now := time.Since(start)
			switch kind {
			case kHeaders:
				headersAt = now
			case kBody:
				bodies++
				if bodies == len(sizes) {
					run.BulkSecs = now.Seconds()
				}
			case kBodyFG:
				if at, ok := asked[seq]; ok && !got[seq] {
					got[seq] = true
					run.Interactive = append(run.Interactive, float64(now-at)/1e6)
				}
			}
		case <-tick.C:
			// The user opens a message a second, from a second after the
			// headers came.
			if headersAt > 0 && next < len(open) && time.Since(start) >= headersAt+time.Duration(next+1)*time.Second {
				seq := open[next]
				next++
				asked[seq] = time.Since(start)
				if _, err := client.send(intnw.FGSmall, nil, msg(kBodyReq, start, seq, 64)); err != nil {
					run.Error = fmt.Sprintf("send: %v", err)
					return
				}
			}
		case <-rctx.Done():
			run.Incomplete = len(open) - len(got)
			run.Error = fmt.Sprintf("%d of %d messages fetched in %v", bodies, len(sizes), time.Since(start).Round(time.Second))
			return
		}
	}
}

// setupMPTCP lets the client open a second subflow: both ends accept two
// subflows, and the server announces its address on network other.
func setupMPTCP(topo *netns.Topology, other int) error {
	cmds := [][]string{
		{"-n", topo.Src, "mptcp", "limits", "set", "subflow", "2", "add_addr_accepted", "2"},
		{"-n", topo.Dst, "mptcp", "limits", "set", "subflow", "2", "add_addr_accepted", "2"},
		{"-n", topo.Dst, "mptcp", "endpoint", "add", topo.Paths[other].DstAddr.String(), "dev", topo.Paths[other].DstDev, "signal"},
	}
	for _, c := range cmds {
		if out, err := exec.Command("ip", c...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %v: %v: %s", c, err, out)
		}
	}
	return nil
}

// received delivers what t receives on a channel, closed when t's
// receiving ends (an error, or ctx).
func received(ctx context.Context, t transport, buf int) <-chan message {
	in := make(chan message, buf)
	go func() {
		defer close(in)
		for {
			m, err := t.recv(ctx)
			if err != nil {
				return
			}
			select {
			case in <- m:
			case <-ctx.Done():
				return
			}
		}
	}()
	return in
}

// fileSystem is the distributed file system client: it writes back
// modified files in the background, each write-back after the one before
// (bg-large), while the user's demand fetches of 4 KB blocks (fg-small
// request and reply, a fetch every half second) may overtake them.
// Interactive: each fetch's latency; bulk: the time until the server has
// every write-back.
func fileSystem(ctx context.Context, opts Options, client, server transport, run *Run) {
	sizes := fileSizes(opts.Seed)
	const fetches = 20
	start := time.Now()
	rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	var mu sync.Mutex
	writes := 0
	var allWritten time.Duration
	go func() {
		for {
			m, err := server.recv(rctx)
			if err != nil {
				return
			}
			kind, _, seq, ok := parse(m.data)
			if !ok {
				continue
			}
			switch kind {
			case kWrite:
				mu.Lock()
				writes++
				if writes == len(sizes) {
					allWritten = time.Since(start)
				}
				mu.Unlock()
			case kReadReq:
				if _, err := server.send(intnw.FGSmall, nil, msg(kBlock, start, seq, 4096)); err != nil {
					return
				}
			}
		}
	}()
	// The write-backs, queued at once, each after the one before.
	go func() {
		var last []uint64
		for i, n := range sizes {
			id, err := client.send(intnw.BGLarge, last, msg(kWrite, start, uint32(i), n))
			if err != nil {
				return
			}
			last = []uint64{id}
		}
	}()
	in := received(rctx, client, 64)
	asked := map[uint32]time.Duration{}
	got := 0
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	next := uint32(0)
	for {
		mu.Lock()
		done := allWritten > 0 && got == fetches
		mu.Unlock()
		if done {
			break
		}
		select {
		case m, ok := <-in:
			if !ok {
				run.Error = "the connection ended"
				return
			}
			if kind, _, seq, _ := parse(m.data); kind == kBlock {
				if at, ok := asked[seq]; ok {
					delete(asked, seq)
					got++
					run.Interactive = append(run.Interactive, float64(time.Since(start)-at)/1e6)
				}
			}
		case <-tick.C:
			if next < fetches {
				asked[next] = time.Since(start)
				if _, err := client.send(intnw.FGSmall, nil, msg(kReadReq, start, next, 64)); err != nil {
					run.Error = fmt.Sprintf("send: %v", err)
					return
				}
				next++
			}
		case <-rctx.Done():
			mu.Lock()
			run.Error = fmt.Sprintf("%d of %d write-backs and %d of %d fetches in %v", writes, len(sizes), got, fetches, time.Since(start).Round(time.Second))
			mu.Unlock()
			run.Incomplete = fetches - got
			return
		}
	}
	mu.Lock()
	run.BulkSecs = allWritten.Seconds()
	mu.Unlock()
}

// pathBytes is what each network of a multi-socket arm carried.
func pathBytes(sc Scenario, ends ...transport) map[string]uint64 {
	out := map[string]uint64{}
	for _, e := range ends {
		var c *intnw.Conn
		switch t := e.(type) {
		case *multi:
			c = t.c
		case *closing:
			if m, ok := t.transport.(*multi); ok {
				c = m.c
			}
		case *proxied:
			c = t.conn
		}
		if c == nil {
			continue
		}
		for _, p := range c.Paths() {
			if p.Index >= 0 && p.Index < len(sc.Links) {
				out[sc.Links[p.Index].Name] += p.Sent
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
