//go:build ignore

// lanes_delivery: what the TCP connections leaving through one interface
// have delivered, for rate = "auto" (package autorate): a BPF TCP
// iterator that package netsched runs every few tens of milliseconds.
//
// For each established TCP socket whose cached route leaves through
// target_ifindex, a run adds up
//
//  - the segments the peer acknowledged, cumulatively or selectively,
//    since the socket's previous run (tcp_sock.delivered, the count the
//    kernel's own delivery-rate samples use), times the socket's MSS:
//    bytes delivered over the run's interval;
//  - the segments in flight now (tcp_packets_in_flight: sent, not yet
//    acknowledged, SACKed or marked lost, plus retransmissions), times the
//    MSS;
//  - the sockets counted, and those of them whose flight fills their
//    congestion window (the sender is limited by the network, not by the
//    application).
//
// A socket first seen counts only from that run on. The sums of the last
// complete run are in `result`; user space reads them after the run.

#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

char __license[] SEC("license") = "GPL";

#define TCP_ESTABLISHED 1

// target_ifindex is the interface whose connections count; netsched sets
// it before the first run.
volatile __u32 target_ifindex = 0;

// Kernel types, only the members used; CO-RE relocates them against the
// running kernel's BTF.
struct net_device {
	int ifindex;
} __attribute__((preserve_access_index));

struct dst_entry {
	struct net_device *dev;
} __attribute__((preserve_access_index));

struct sock_common {
	volatile unsigned char skc_state;
} __attribute__((preserve_access_index));

struct sock {
	struct sock_common __sk_common;
	struct dst_entry *sk_dst_cache;
} __attribute__((preserve_access_index));

struct tcp_sock {
	__u32 mss_cache;
	__u32 packets_out;
	__u32 sacked_out;
	__u32 lost_out;
	__u32 retrans_out;
	__u32 delivered;
	__u32 snd_cwnd;
} __attribute__((preserve_access_index));

struct bpf_iter_meta {
	void *seq;
	__u64 session_id;
	__u64 seq_num;
} __attribute__((preserve_access_index));

struct bpf_iter__tcp {
	struct bpf_iter_meta *meta;
	struct sock_common *sk_common;
	__u32 uid;
} __attribute__((preserve_access_index));

// delivery_sum is one run's sums.
struct delivery_sum {
	__u64 delivered; // bytes delivered since each socket's previous run
	__u64 inflight;  // bytes in flight now
	__u32 sockets;   // sockets counted
	__u32 cwnd_limited; // of them, those whose flight fills the window
};

struct delivery_sum acc = {};    // the run in progress
struct delivery_sum result = {}; // the last complete run

// dl_last is a socket's tcp_sock.delivered at its previous run, plus one
// (0: not seen yet).
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u32);
} dl_last SEC(".maps");

SEC("iter/tcp")
int lanes_delivery(struct bpf_iter__tcp *ctx)
{
	struct sock_common *skc = ctx->sk_common;
	if (!skc) {
		// The run is over: publish it, start the next afresh.
		result = acc;
		__builtin_memset(&acc, 0, sizeof(acc));
		return 0;
	}
	if (ctx->meta->seq_num == 0)
		__builtin_memset(&acc, 0, sizeof(acc)); // a run that was cut short left sums behind
	struct tcp_sock *tp = bpf_skc_to_tcp_sock(skc);
	if (!tp)
		return 0;
	struct sock *sk = (struct sock *)tp;
	if (sk->__sk_common.skc_state != TCP_ESTABLISHED)
		return 0;
	struct dst_entry *dst = sk->sk_dst_cache;
	if (!dst || !target_ifindex)
		return 0;
	struct net_device *dev = dst->dev;
	if (!dev || dev->ifindex != (int)target_ifindex)
		return 0;
	__u32 *last = bpf_sk_storage_get(&dl_last, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!last)
		return 0;
	// *last holds delivered + 1: 0 marks a socket not seen before.
	__u32 mss = tp->mss_cache;
	__u32 delivered = tp->delivered;
	if (*last)
		acc.delivered += (__u64)(delivered - (*last - 1)) * mss;
	*last = delivered + 1;
	__u32 out = tp->packets_out, left = tp->sacked_out + tp->lost_out;
	__u32 flight = (out > left ? out - left : 0) + tp->retrans_out;
	acc.inflight += (__u64)flight * mss;
	acc.sockets++;
	if (flight && flight >= tp->snd_cwnd)
		acc.cwnd_limited++;
	return 0;
}
