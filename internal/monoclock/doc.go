// Package monoclock reads CLOCK_MONOTONIC, the clock of BPF's
// bpf_ktime_get_ns: time stamps lanes' BPF programs write and times the
// daemon takes compare directly. It is the one place that reads it, so
// that packages holding pure logic on such times (idletime) take the
// clock as a function and stay free of system calls.
package monoclock
