// Command eventbus measures lanes' event channels in process: how many
// events a second one publisher gets through to 1, 10 and 100 subscribers,
// and how long an event takes from Publish to the subscriber's handler
// (p50, p99) at a paced rate. Each subscriber runs in its own goroutine
// taking events with Next, as lanesd's controllers and streams do.
//
//	go run ./bench/eventbus [--subs 1,10,100] [--events 2000000] [--rate 10000] [--duration 5s]
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
	"time"

	"github.com/lanes-qos/lanes/events"
)

func main() {
	subsFlag := flag.String("subs", "1,10,100", "subscriber counts, comma-separated")
	n := flag.Int("events", 2_000_000, "events published in the throughput run")
	rate := flag.Int("rate", 10000, "events per second in the latency run")
	dur := flag.Duration("duration", 5*time.Second, "length of the latency run")
	filter := flag.String("filter", "", "CEL OUT filter on every subscription (e.g. 'payload.v >= 0')")
	flag.Parse()
	var counts []int
	for _, f := range strings.Split(*subsFlag, ",") {
		c, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || c < 1 || c > 10000 {
			fmt.Fprintf(os.Stderr, "eventbus: --subs: %q is not a count of 1..10000\n", f)
			os.Exit(2)
		}
		counts = append(counts, c)
	}
	if *n < 1 || *rate < 1 || *dur <= 0 {
		fmt.Fprintln(os.Stderr, "eventbus: --events, --rate and --duration must be positive")
		os.Exit(2)
	}
	fmt.Printf("in-process event bus, GOMAXPROCS=%d, filter=%q\n\n", runtime.GOMAXPROCS(0), *filter)
	fmt.Println("| subscribers | published/s | delivered/s (all subscribers) | dropped | p50 at", *rate, "/s | p99 | max |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, c := range counts {
		pub, del, drop, err := throughput(c, *n, *filter)
		if err != nil {
			fmt.Fprintln(os.Stderr, "eventbus:", err)
			os.Exit(1)
		}
		p50, p99, pmax, err := latency(c, *rate, *dur, *filter)
		if err != nil {
			fmt.Fprintln(os.Stderr, "eventbus:", err)
			os.Exit(1)
		}
		fmt.Printf("| %d | %.0f | %.0f | %d | %s | %s | %s |\n", c, pub, del, drop, us(p50), us(p99), us(pmax))
	}
}

func us(d time.Duration) string { return fmt.Sprintf("%.1f µs", float64(d)/1e3) }

func subscribe(b *events.Bus, c, queue int, filter string) ([]*events.Subscription, error) {
	subs := make([]*events.Subscription, c)
	for i := range subs {
		s, err := b.Subscribe(events.Options{Name: fmt.Sprint("s", i), Topics: []string{"bench.*"}, Queue: queue, Out: filter})
		if err != nil {
			return nil, err
		}
		subs[i] = s
	}
	return subs, nil
}

// throughput publishes n events as fast as one goroutine can and waits for
// every subscriber to take what reached its queue.
func throughput(c, n int, filter string) (pubRate, delRate float64, dropped uint64, err error) {
	b := events.New()
	defer b.Close()
	subs, err := subscribe(b, c, 65536, filter)
	if err != nil {
		return 0, 0, 0, err
	}
	var wg sync.WaitGroup
	delivered := make([]int, c)
	for i, s := range subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got := 0
			for {
				if _, err := s.Next(context.Background()); err != nil {
					break
				}
				got++
			}
			delivered[i] = got
		}()
	}
	payload := map[string]any{"v": int64(1)}
	start := time.Now()
	for range n {
		b.Publish(events.Event{Source: "bench", Topic: "bench.x", Payload: payload})
	}
	pubTime := time.Since(start)
	for _, s := range subs {
		s.Close()
	}
	wg.Wait()
	total := time.Since(start)
	sum := 0
	for i, s := range subs {
		sum += delivered[i]
		dropped += s.Stats().Dropped
	}
	return float64(n) / pubTime.Seconds(), float64(sum) / total.Seconds(), dropped, nil
}

// latency publishes at a paced rate, each event stamped with its publish
// time, and records Publish-to-handler delays at every subscriber.
func latency(c, rate int, dur time.Duration, filter string) (p50, p99, pmax time.Duration, err error) {
	b := events.New()
	defer b.Close()
	subs, err := subscribe(b, c, 65536, filter)
	if err != nil {
		return 0, 0, 0, err
	}
	var mu sync.Mutex
	var all []time.Duration
	var wg sync.WaitGroup
	for _, s := range subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat := make([]time.Duration, 0, int(float64(rate)*dur.Seconds())+16)
			for {
				e, err := s.Next(context.Background())
				if err != nil {
					break
				}
				lat = append(lat, time.Since(e.Time))
			}
			mu.Lock()
			all = append(all, lat...)
			mu.Unlock()
		}()
	}
	payload := map[string]any{"v": int64(1)}
	interval := time.Second / time.Duration(rate)
	start := time.Now()
	next := start
	for time.Since(start) < dur {
		now := time.Now()
		if now.Before(next) {
			if d := next.Sub(now); d > 200*time.Microsecond {
				time.Sleep(d - 100*time.Microsecond)
			} else {
				runtime.Gosched()
			}
			continue
		}
		next = next.Add(interval)
		b.Publish(events.Event{Source: "bench", Topic: "bench.x", Payload: payload, Time: time.Now()})
	}
	time.Sleep(50 * time.Millisecond)
	for _, s := range subs {
		s.Close()
	}
	wg.Wait()
	if len(all) == 0 {
		return 0, 0, 0, fmt.Errorf("no event delivered with %d subscribers", c)
	}
	slices.Sort(all)
	return all[len(all)/2], all[len(all)*99/100], all[len(all)-1], nil
}
