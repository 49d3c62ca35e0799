// Package ledbat is lanes' background TCP congestion control: lanes_ledbat,
// a LEDBAT++-style delay-based algorithm (bpf/ledbat.c) that yields to any
// loss-based flow at whatever bottleneck the connection crosses, registered
// with the kernel as a BPF struct_ops tcp_congestion_ops.
//
// Register loads and registers it (the registration lives as long as the
// returned Registration; an existing registration by another process is
// used as it is). netsched gives it to the TCP sockets of lanes with
// net.cc = "ledbat": a cgroup sock_ops program for new connections, and
// SetSocket for the sockets a process had before `lanes move`.
package ledbat
