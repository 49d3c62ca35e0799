// Package workload runs the testbed's traffic and load: real tools
// (iperf3, irtt, fio, stress-ng) across a netns topology, and small Go
// generators for the streams the papers need (an audio-like stream of
// 80 bytes every 20 ms, a video-like stream of frames at N fps, and
// request/response with think times), and turns their output into one
// Result type. Only the testbed and the benchmark runner import it; lanes
// itself must not.
package workload
