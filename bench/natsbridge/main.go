// Command natsbridge measures lanes' event channels across hosts: events
// published on one bus travel through its bridge, a NATS server on
// loopback (embedded here) and the bridges of 1, 10 or 100 receiving
// "hosts" (each its own bus, bridge and NATS connection, in this process)
// to a subscriber on each receiving bus. It reports the throughput one
// publisher gets through to every receiver, and the publish-to-handler
// latency (p50, p99) at a paced rate: from Publish on the sending bus to
// Next returning on a receiving bus, both stamped by this process's clock.
//
//	go run ./bench/natsbridge [--subs 1,10,100] [--events 200000] [--rate 1000] [--duration 5s]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/lanes-qos/lanes/bridge"
	"github.com/lanes-qos/lanes/events"
	"github.com/lanes-qos/lanes/lane"
)

func main() {
	subsFlag := flag.String("subs", "1,10,100", "receiving hosts, comma-separated counts")
	n := flag.Int("events", 200_000, "events in the throughput run, divided among the receivers (at least 10,000 each)")
	rate := flag.Int("rate", 1000, "events per second in the latency run")
	dur := flag.Duration("duration", 5*time.Second, "length of the latency run")
	flag.Parse()
	var counts []int
	for _, f := range strings.Split(*subsFlag, ",") {
		c, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || c < 1 || c > 1000 {
			fmt.Fprintf(os.Stderr, "natsbridge: --subs: %q is not a count of 1..1000\n", f)
			os.Exit(2)
		}
		counts = append(counts, c)
	}
	if *n < 1 || *rate < 1 || *dur <= 0 {
		fmt.Fprintln(os.Stderr, "natsbridge: --events, --rate and --duration must be positive")
		os.Exit(2)
	}
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoLog: true, NoSigs: true})
	if err != nil {
		fail(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		fail(fmt.Errorf("nats server not ready"))
	}
	defer srv.Shutdown()
	url := srv.ClientURL()
	fmt.Printf("bus → bridge → NATS %s (embedded, loopback) → bridge → bus, GOMAXPROCS=%d\n\n", url, runtime.GOMAXPROCS(0))
	fmt.Printf("| receiving hosts | events | delivered/s per receiver | deliveries/s (all) | not delivered | p50 at %d/s | p99 | max |\n", *rate)
	fmt.Println("|---|---|---|---|---|---|---|---|")
	for _, c := range counts {
		per := max(*n/c, 10000)
		r, err := run(url, c, per, 0, 0)
		if err != nil {
			fail(err)
		}
		l, err := run(url, c, 0, *rate, *dur)
		if err != nil {
			fail(err)
		}
		fmt.Printf("| %d | %d | %.0f | %.0f | %d | %s | %s | %s |\n", c, per, r.perRecv, r.perRecv*float64(c), r.lost+l.lost,
			us(l.p50), us(l.p99), us(l.max))
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "natsbridge:", err)
	os.Exit(1)
}

func us(d time.Duration) string { return fmt.Sprintf("%.0f µs", float64(d)/1e3) }

type result struct {
	perRecv       float64
	lost          uint64
	p50, p99, max time.Duration
}

// run sets up one sender and c receivers, then either publishes n events
// as fast as it can (throughput), or at rate for dur (latency).
func run(url string, c, n, rate int, dur time.Duration) (result, error) {
	cfg := func(host string) lane.Bridge {
		return lane.Bridge{URL: url, Host: host, Export: []string{"bench.>"}, Import: []string{"bench.>"}, Buffer: 1 << 18}
	}
	sendBus := events.New()
	defer sendBus.Close()
	sender, err := bridge.Start(sendBus, cfg("tx"), bridge.Options{})
	if err != nil {
		return result{}, err
	}
	type recv struct {
		bus *events.Bus
		br  *bridge.Bridge
		sub *events.Subscription
	}
	rs := make([]recv, c)
	for i := range rs {
		b := events.New()
		cf := cfg(fmt.Sprint("rx", i))
		cf.Export = nil
		br, err := bridge.Start(b, cf, bridge.Options{})
		if err != nil {
			return result{}, err
		}
		sub, err := b.Subscribe(events.Options{Name: "bench", Topics: []string{"bench.>"}, Queue: 16384})
		if err != nil {
			return result{}, err
		}
		rs[i] = recv{b, br, sub}
	}
	defer func() {
		for _, r := range rs {
			r.br.Close()
			r.bus.Close()
		}
	}()
	for _, r := range rs {
		if err := r.br.Flush(5 * time.Second); err != nil {
			return result{}, err
		}
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		lat      []time.Duration
		got      atomic.Int64
		lastTime atomic.Int64
		gotBy    = make([]atomic.Int64, c)
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i, r := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for {
				e, err := r.sub.Next(ctx)
				if err != nil {
					break
				}
				if rate > 0 {
					mine = append(mine, time.Since(e.Time))
				}
				got.Add(1)
				gotBy[i].Add(1)
				lastTime.Store(time.Now().UnixNano())
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	payload := map[string]any{"fps": 19.5, "frames": int64(1)}
	start := time.Now()
	published := 0
	if rate == 0 {
		// As fast as the slowest receiver keeps up: at most window events
		// published and not yet at every receiver (a publisher that
		// outruns the bridge or a receiver loses events, counted).
		const window = 10000
		for published < n {
			slowest := gotBy[0].Load()
			for i := range gotBy {
				slowest = min(slowest, gotBy[i].Load())
			}
			if int64(published)-slowest >= window {
				runtime.Gosched()
				continue
			}
			for range min(1000, n-published) {
				sendBus.Publish(events.Event{Source: "bench", Topic: "bench.x", Payload: payload})
				published++
			}
		}
	} else {
		interval := time.Second / time.Duration(rate)
		next := start
		for time.Since(start) < dur {
			if d := time.Until(next); d > 0 {
				time.Sleep(d)
			}
			next = next.Add(interval)
			sendBus.Publish(events.Event{Source: "bench", Topic: "bench.x", Payload: payload, Time: time.Now()})
			published++
		}
	}
	// Wait until every receiver has everything, or nothing arrives for 2 s.
	want := int64(published * c)
	for got.Load() < want {
		last := lastTime.Load()
		if last != 0 && time.Since(time.Unix(0, last)) > 2*time.Second {
			break
		}
		if last == 0 && time.Since(start) > 10*time.Second {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	end := time.Unix(0, lastTime.Load())
	cancel()
	wg.Wait()
	sender.Close()
	res := result{}
	if g := got.Load(); g < want {
		// Not delivered: counted by the sending bridge as lost, by a
		// receiving client as dropped (slow consumer), or by a bus queue.
		res.lost = uint64(want - g)
	}
	if el := end.Sub(start); el > 0 {
		res.perRecv = float64(got.Load()) / float64(c) / el.Seconds()
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		res.p50, res.p99, res.max = lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1]
	}
	return res, nil
}
