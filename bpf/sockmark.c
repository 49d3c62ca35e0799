//go:build ignore

// DSCP LE for the UDP sockets of marked lanes, set on the socket itself
// (package netsched, with no interface shaped; see lanes.c for TCP, which
// lanes_sockops marks). Attached to each bound lane's cgroup:
// cgroup/connect4|6 mark a socket when it connects, cgroup/sendmsg4|6
// when an unconnected one sends. A socket whose class (its priority, else
// the class lanes gave it at creation) lane_flags marks LANE_F_MARK_LE
// gets DSCP LE, unless its program chose a DSCP of its own. lane_flags and
// auto_label are lanes.c's maps (netsched passes them in at load). The
// programs never refuse a call.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "sockmark.h"

#define LANES_MAJOR 0x4c4e
#define LANE_F_MARK_LE 2
#ifndef SOCK_DGRAM
#define SOCK_DGRAM 2
#endif

char __license[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, __u32);
} lane_flags SEC(".maps");

// auto_label is lanes.c's: the class lanes gave a socket at creation.
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u32);
} auto_label SEC(".maps");

static __always_inline int is_lanes_class(__u32 prio)
{
	return (prio >> 16) == LANES_MAJOR && (prio & 0xffff) != 0;
}

static __always_inline int udp_mark(struct bpf_sock_addr *ctx)
{
	struct bpf_sock *sk = ctx->sk;
	if (!sk || sk->type != SOCK_DGRAM)
		return 1;
	// As lanes_sockops: the priority, else the class given at creation.
	__u32 prio = sk->priority, cls = prio;
	if (!is_lanes_class(cls)) {
		__u32 *label = bpf_sk_storage_get(&auto_label, sk, 0, 0);
		if (!label || !is_lanes_class(*label))
			return 1;
		cls = *label;
	}
	__u32 *f = bpf_map_lookup_elem(&lane_flags, &cls);
	if (f && (*f & LANE_F_MARK_LE))
		sock_mark_le(ctx, sk->family, prio);
	return 1;
}

SEC("cgroup/connect4")
int lanes_connect4(struct bpf_sock_addr *ctx) { return udp_mark(ctx); }

SEC("cgroup/connect6")
int lanes_connect6(struct bpf_sock_addr *ctx) { return udp_mark(ctx); }

SEC("cgroup/sendmsg4")
int lanes_sendmsg4(struct bpf_sock_addr *ctx) { return udp_mark(ctx); }

SEC("cgroup/sendmsg6")
int lanes_sendmsg6(struct bpf_sock_addr *ctx) { return udp_mark(ctx); }
