//go:build ignore

// Packet classification for lanes' network enforcement (package netsched).
//
// A lane is an HTB leaf class LANES_MAJOR:minor. The kernel's HTB puts a
// packet straight into the leaf class whose id equals skb->priority, so the
// programs here only ever decide one number: the packet's priority.
//
// Precedence, first match wins:
//  1. The socket's priority is a lanes class (major LANES_MAJOR): keep it.
//     That priority was set by lanes_sock_create when the socket was
//     created in a lane's cgroup, by the program itself through SO_PRIORITY
//     (an explicit label), or by `lanes move` (netsched.MoveSockets, which
//     relabels sockets whose label was lanes' own).
//  2. Otherwise the lane of the socket's cgroup (the cgroup the socket was
//     created in; the shallowest ancestor found in lane_of_cgroup): set it.
//  3. Otherwise leave the packet alone: HTB's default class (normal) takes it.
//
// Download direction (lanes_ingress): the packet's local socket is found
// with bpf_sk_lookup_tcp/udp; its priority decides as in 1., and otherwise
// the class lanes_sock_create stored in the socket's storage (tc programs
// cannot read a socket's cgroup: bpf_sk_cgroup_id is cgroup-skb only).
// Every IP packet then goes to the device's IFB (u32 + mirred), whose HTB
// tree has the same classes; other packets (ARP) pass unshaped.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/in.h>
#include <linux/pkt_cls.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define LANES_MAJOR 0x4c4e
// Lane cgroups live at this depth or above (lanes creates them at depth 1).
#define MAX_LEVEL 4

char __license[] SEC("license") = "GPL";

// lane_of_cgroup maps a cgroup v2 id (the inode number of its directory) to
// the lane's class id (LANES_MAJOR << 16 | minor).
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64);
	__type(value, __u32);
} lane_of_cgroup SEC(".maps");

// auto_label remembers, per socket, the class lanes itself gave it, so that
// user space can tell lanes' label from a program's explicit label.
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

SEC("cgroup/sock_create")
int lanes_sock_create(struct bpf_sock *sk)
{
	__u32 *cls = 0;
	int level;

#pragma unroll
	for (level = 1; level <= MAX_LEVEL; level++) {
		__u64 id = bpf_get_current_ancestor_cgroup_id(level);
		if (id == 0)
			break;
		cls = bpf_map_lookup_elem(&lane_of_cgroup, &id);
		if (cls)
			break;
	}
	if (!cls)
		return 1;
	__u32 c = *cls;
	sk->priority = c;
	__u32 *label = bpf_sk_storage_get(&auto_label, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (label)
		*label = c;
	return 1;
}

SEC("tc")
int lanes_egress(struct __sk_buff *skb)
{
	if (is_lanes_class(skb->priority))
		return TC_ACT_OK;
	int level;
#pragma unroll
	for (level = 1; level <= MAX_LEVEL; level++) {
		__u64 id = bpf_skb_ancestor_cgroup_id(skb, level);
		if (id == 0)
			break;
		__u32 *cls = bpf_map_lookup_elem(&lane_of_cgroup, &id);
		if (cls) {
			skb->priority = *cls;
			break;
		}
	}
	return TC_ACT_OK;
}

// lane_of_sock returns the class for a socket found by lookup, or 0. The
// socket's cgroup is not available to tc programs (bpf_sk_cgroup_id is
// cgroup-skb only), so the fallback is the label lanes_sock_create left in
// the socket's storage.
static __always_inline __u32 lane_of_sock(struct bpf_sock *sk)
{
	__u32 prio = sk->priority;
	if (is_lanes_class(prio))
		return prio;
	__u32 *label = bpf_sk_storage_get(&auto_label, sk, 0, 0);
	if (label)
		return *label;
	return 0;
}

// lanes_ingress runs at clsact ingress of a shaped device: it finds the
// local socket an incoming IP packet is for and labels the packet with
// that socket's lane. It then lets classification continue
// (TC_ACT_UNSPEC) to the next filter, a u32 match-all with a mirred
// redirect to the device's IFB, whose HTB tree schedules the packet like
// the egress tree does. (bpf_redirect to an IFB works on recent kernels
// only: older IFBs drop packets a BPF program redirected.) Non-IP packets
// (ARP) stop here, unshaped.
SEC("tc")
int lanes_ingress(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > data_end)
		goto out;

	struct bpf_sock_tuple tuple = {};
	__u32 tuple_len = 0;
	__u8 proto = 0;
	void *l4 = 0;

	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);
		if ((void *)(ip + 1) > data_end)
			goto out;
		if (ip->ihl != 5 || (ip->frag_off & bpf_htons(0x1fff)))
			goto out;
		proto = ip->protocol;
		l4 = (void *)(ip + 1);
		tuple.ipv4.saddr = ip->saddr;
		tuple.ipv4.daddr = ip->daddr;
		tuple_len = sizeof(tuple.ipv4);
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);
		if ((void *)(ip6 + 1) > data_end)
			goto out;
		proto = ip6->nexthdr;
		l4 = (void *)(ip6 + 1);
		__builtin_memcpy(tuple.ipv6.saddr, &ip6->saddr, 16);
		__builtin_memcpy(tuple.ipv6.daddr, &ip6->daddr, 16);
		tuple_len = sizeof(tuple.ipv6);
	} else {
		// ARP and other non-IP traffic is not shaped: it must never
		// wait behind a bulk download.
		return TC_ACT_OK;
	}

	struct bpf_sock *sk = 0;
	if (proto == IPPROTO_TCP) {
		struct tcphdr *th = l4;
		if ((void *)(th + 1) > data_end)
			goto out;
		if (tuple_len == sizeof(tuple.ipv4)) {
			tuple.ipv4.sport = th->source;
			tuple.ipv4.dport = th->dest;
		} else {
			tuple.ipv6.sport = th->source;
			tuple.ipv6.dport = th->dest;
		}
		sk = bpf_sk_lookup_tcp(skb, &tuple, tuple_len, BPF_F_CURRENT_NETNS, 0);
	} else if (proto == IPPROTO_UDP) {
		struct udphdr *uh = l4;
		if ((void *)(uh + 1) > data_end)
			goto out;
		if (tuple_len == sizeof(tuple.ipv4)) {
			tuple.ipv4.sport = uh->source;
			tuple.ipv4.dport = uh->dest;
		} else {
			tuple.ipv6.sport = uh->source;
			tuple.ipv6.dport = uh->dest;
		}
		sk = bpf_sk_lookup_udp(skb, &tuple, tuple_len, BPF_F_CURRENT_NETNS, 0);
	}
	if (sk) {
		__u32 cls = lane_of_sock(sk);
		bpf_sk_release(sk);
		if (cls)
			skb->priority = cls;
	}
out:
	return TC_ACT_UNSPEC;
}
