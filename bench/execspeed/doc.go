// Package execspeed is `lanes bench execspeed`: seed 001's experiments
// on bandwidth control by execution speed. A CPU-bound UDP sender (each
// datagram costs a fixed amount of hashing, as an encrypting or
// compressing sender's does) sends to a receiver that timestamps every
// datagram, through the testbed's namespaces. Its Figure 4 (send rate
// against the sender's CPU share, 10-100 %, with the line's fit), its
// packet inter-arrival histograms at some shares, the rate held at a
// target by lanesd's cpu.send_rate while CPU hogs come and go, and
// cpu.reserve's share in every 100 ms window against busy loops, each
// beside its baseline, into reserve.md, execspeed.md and their JSON.
//
// The sender and the receiver (Send, Receive) are also what the e2e
// tests run.
package execspeed
