// Shared by lanes.c and sockmark.c: DSCP LE on a socket, through
// bpf_{get,set}sockopt.

#define SOL_IP 0
#define SOL_IPV6 41
#define IP_TOS 1
#define IPV6_TCLASS 67
#ifndef AF_INET
#define AF_INET 2
#endif
#ifndef AF_INET6
#define AF_INET6 10
#endif
#define SOCK_DSCP_LE 0x01
#define SOL_SOCKET 1
#define SO_PRIORITY 12

// sock_set_le gives the socket DSCP LE at (level, opt), keeping its ECN
// bits, unless its program chose a DSCP of its own there. It says whether
// it set it.
static __always_inline int sock_set_le(void *ctx, int level, int opt)
{
	int tos = 0;
	if (bpf_getsockopt(ctx, level, opt, &tos, sizeof(tos)))
		return 0;
	if (tos < 0)
		tos = 0; // IPv6's "default" (-1)
	if (tos & ~3)
		return 0; // the program's own DSCP
	tos = (SOCK_DSCP_LE << 2) | (tos & 3);
	return bpf_setsockopt(ctx, level, opt, &tos, sizeof(tos)) == 0;
}

// sock_mark_le gives a socket of class prio DSCP LE: IP_TOS on an IPv4
// socket; IPV6_TCLASS on an IPv6 one, and its IP_TOS too where the kernel
// lets a program set it there (that is what the socket's IPv4-mapped
// packets carry). A program's own DSCP wins. Setting IP_TOS also sets the
// socket's priority from the TOS: prio, lanes' label, is put back. ctx is
// the program's context (sock_ops, sock_addr): bpf_{get,set}sockopt take
// either.
static __always_inline void sock_mark_le(void *ctx, __u32 family, int prio)
{
	int tos_set = 0;
	if (family == AF_INET6) {
		sock_set_le(ctx, SOL_IPV6, IPV6_TCLASS);
		tos_set = sock_set_le(ctx, SOL_IP, IP_TOS);
	} else if (family == AF_INET) {
		tos_set = sock_set_le(ctx, SOL_IP, IP_TOS);
	}
	if (tos_set)
		bpf_setsockopt(ctx, SOL_SOCKET, SO_PRIORITY, &prio, sizeof(prio));
}
