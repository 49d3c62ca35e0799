// Package linkem is the testbed's link emulator: a user-space bottleneck
// between two packet devices (the TUN pair of a router namespace), with,
// per direction, a rate or a Mahimahi trace, one-way delay, random and
// bursty (Gilbert–Elliott) loss, a drop-tail FIFO limited in packets or
// bytes, and up/down schedules. It measures its own accuracy. Only the
// testbed and the benchmark runner import it; lanes itself must not.
package linkem
