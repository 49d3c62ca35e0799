// Command storm measures how lanesd keeps up with a process storm: it
// starts a lanesd (the binary given) with one rule matching a tiny child
// program, spawns that child at a fixed rate, and reports the share of
// children placed in the rule's lane within 20 ms of their exec (and 5,
// 10, 50, 100, 150 ms, which bound the placement latency's p99), lanesd's CPU use over the storm (from /proc/PID/stat; also per child), and
// the latency of `lanes ls` run meanwhile. Linux only, as root:
//
//	go build -o /tmp/lanesd ./cmd/lanesd && go build -o /tmp/lanes ./cmd/lanes
//	go build -o /tmp/storm ./bench/storm && /tmp/storm --lanesd /tmp/lanesd --lanes /tmp/lanes --rate 2000 --duration 20s
package main
