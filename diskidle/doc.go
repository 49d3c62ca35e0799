// Package diskidle is idletime scheduling on block devices (seed 003's
// disk scheduler): it implements idletime.Gate per device — a BPF program
// on the block_bio_queue tracepoint tells the background lane's bios from
// everyone else's and reports foreground I/O, and a blk-throttle limit on
// the background group holds its I/O for the preemption interval. Only
// the daemon imports it (it loads BPF); CLI and API code must not.
package diskidle
