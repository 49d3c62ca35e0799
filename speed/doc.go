// Package speed is rate by execution speed (seed 001): a lane's send
// rate held at a target by its CPU share, for senders whose rate is
// bound by the CPU they get (one that compresses or encrypts what it
// sends). The seed controls a process's bandwidth by the share of time
// slots it may execute in; lanes closes that into a loop: the daemon
// measures the lane's send rate from its sockets every Tick, and the
// Controller moves the lane's CPU share (a CFS quota in every 10 ms, so
// that execution — and the packets — stay evenly spread) until the rate
// meets the target.
//
// The plant is proportional (rate ≈ k · share, k unknown and changing
// with the data), so the law is multiplicative: each step scales the
// share by 1 + Gain · (target − rate) / target, bounded to a factor per
// step, from a rate smoothed over Smooth. The share rises only while
// the lane uses what it has (else the sender is not CPU-bound now and a
// higher share would wind up), and stays within [Min, Max].
//
// Pure Go, clock passed in; daemon/speed.go feeds and applies it.
package speed
