//go:build ignore

// lanes_proccount: how many processes each of a list of cgroup v2 groups
// holds, for lanesd's metrics (package procwatch, Counter). A BPF syscall
// program, run once per scrape (BPF_PROG_RUN): for each group, by its
// cgroup id, it walks the group's processes with the kernel's css task
// iterator (the walk `cgroup.procs` makes, CSS_TASK_ITER_PROCS: thread
// group leaders only) and counts them, where reading `cgroup.procs`
// would format every PID as text for lanesd to count its lines.
//
// Needs bpf_cgroup_from_id (Linux 6.2) and the css task iterator (6.7),
// which the kernel allows in sleepable programs: the loader marks it so.

#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

char __license[] SEC("license") = "GPL";

struct cgroup_subsys_state {
	void *cgroup;
} __attribute__((preserve_access_index));

struct cgroup {
	struct cgroup_subsys_state self;
} __attribute__((preserve_access_index));

struct task_struct {
	int tgid;
} __attribute__((preserve_access_index));

// The iterator's state on the stack; the verifier checks its size against
// the kernel's struct of the same name.
struct bpf_iter_css_task {
	__u64 __opaque[1];
} __attribute__((aligned(8)));

extern struct cgroup *bpf_cgroup_from_id(__u64 cgid) __ksym;
extern void bpf_cgroup_release(struct cgroup *cgrp) __ksym;
extern int bpf_iter_css_task_new(struct bpf_iter_css_task *it, struct cgroup_subsys_state *css, unsigned int flags) __ksym;
extern struct task_struct *bpf_iter_css_task_next(struct bpf_iter_css_task *it) __ksym;
extern void bpf_iter_css_task_destroy(struct bpf_iter_css_task *it) __ksym;

#define CSS_TASK_ITER_PROCS 1 // thread group leaders only

#define COUNT_MAX 64 // groups per run

struct count_group {
	__u64 id;    // in: the group's cgroup v2 id (its directory's inode)
	__u32 procs; // out
	__u32 gone;  // out: 1 if no group has the id
};

struct count_ctx {
	__u32 n; // in: groups in g
	__u32 pad;
	struct count_group g[COUNT_MAX];
};

// io is the request: user space writes it (memory-mapped) and runs the
// program, which writes its answers into it. One run at a time.
struct count_ctx io = {};

static __always_inline void count_one(struct count_group *g)
{
	struct bpf_iter_css_task it;
	struct cgroup *cg;
	__u32 n = 0;

	g->procs = 0;
	g->gone = 0;
	cg = bpf_cgroup_from_id(g->id);
	if (!cg) {
		g->gone = 1;
		return;
	}
	bpf_iter_css_task_new(&it, &cg->self, CSS_TASK_ITER_PROCS);
	while (bpf_iter_css_task_next(&it))
		n++;
	bpf_iter_css_task_destroy(&it);
	bpf_cgroup_release(cg);
	g->procs = n;
}

SEC("syscall")
int proccount(void *ctx)
{
	__u32 n = io.n;

	if (n > COUNT_MAX)
		n = COUNT_MAX;
	for (__u32 i = 0; i < COUNT_MAX; i++) {
		if (i >= n)
			break;
		count_one(&io.g[i]);
	}
	return 0;
}
