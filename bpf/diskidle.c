//go:build ignore

// Foreground detection for lanes' disk preemption intervals (package disk,
// idletime scheduling of seed 003).
//
// diskidle_bio_queue runs on the block_bio_queue tracepoint (tp_btf, so no
// tracefs is needed), which the kernel fires in submit_bio for every bio,
// normally in the context of the task that submits it. For a device lanes
// manages (a key of dev_state) it decides whether the bio is background:
//
//  - the bio's blkcg (the cgroup the block layer charges it to; on a host
//    with v1 blkio that is the v1 group) is a background group, or
//  - the submitting task's cgroup v2 id is a background group.
//
// The first test matters for bios that blk-throttle held: the kernel queues
// them again from a kworker when the hold is lifted, so the current task
// is then the kworker (root cgroup) while the bio still carries the
// background group's blkcg.
//
// Background bios stamp last_bg_ns. Any other bio stamps last_fg_ns and, if
// the device's gate is open (user space released it), clears open with a
// compare-and-swap and posts one event: exactly one event per release, no
// matter how many foreground bios race.

#include <linux/bpf.h>
#include <linux/types.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>

char __license[] SEC("license") = "GPL";

// The few kernel fields read here, relocated by name against the running
// kernel's BTF (CO-RE), so no vmlinux.h is needed.
struct kernfs_node {
	__u64 id;
} __attribute__((preserve_access_index));

struct cgroup {
	struct kernfs_node *kn;
} __attribute__((preserve_access_index));

struct cgroup_subsys_state {
	struct cgroup *cgroup;
} __attribute__((preserve_access_index));

struct blkcg {
	struct cgroup_subsys_state css;
} __attribute__((preserve_access_index));

struct blkcg_gq {
	struct blkcg *blkcg;
} __attribute__((preserve_access_index));

struct gendisk {
	int major;
	int first_minor;
} __attribute__((preserve_access_index));

struct block_device {
	struct gendisk *bd_disk;
} __attribute__((preserve_access_index));

struct bio {
	struct block_device *bi_bdev;
	struct blkcg_gq *bi_blkg;
} __attribute__((preserve_access_index));

// disk_state is one managed device's time stamps (bpf_ktime_get_ns).
struct disk_state {
	__u64 last_fg_ns;
	__u64 last_bg_ns;
};

// disk_event is posted when foreground I/O arrives while the gate is open.
struct disk_event {
	__u32 dev; // major << 20 | minor, the kernel's dev_t encoding
	__u32 pad;
	__u64 at_ns;
};

// dev_state: whole-disk dev (major << 20 | minor) -> time stamps. Only
// devices present here are watched; user space adds them.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, struct disk_state);
} dev_state SEC(".maps");

// dev_open: dev -> 1 while the gate is released (armed), 0 while held.
// Kept apart from dev_state so that user space re-arms with a whole-value
// write that cannot overwrite a time stamp the kernel is storing.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
} dev_open SEC(".maps");

// bg_cgroups: cgroup ids (v2 and v1 blkio directory inode numbers) of the
// background groups.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, __u64);
	__type(value, __u8);
} bg_cgroups SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} disk_events SEC(".maps");

// Force the event type into BTF so bpf2go generates a Go type for it.
const struct disk_event *unused_disk_event __attribute__((unused));

SEC("tp_btf/block_bio_queue")
int BPF_PROG(diskidle_bio_queue, struct bio *bio)
{
	struct gendisk *disk = BPF_CORE_READ(bio, bi_bdev, bd_disk);
	if (!disk)
		return 0;
	__u32 dev = ((__u32)BPF_CORE_READ(disk, major) << 20) | (__u32)BPF_CORE_READ(disk, first_minor);
	struct disk_state *st = bpf_map_lookup_elem(&dev_state, &dev);
	if (!st)
		return 0;

	__u64 now = bpf_ktime_get_ns();
	__u64 blkcg_id = BPF_CORE_READ(bio, bi_blkg, blkcg, css.cgroup, kn, id);
	__u64 cur_id = bpf_get_current_cgroup_id();
	// Lane groups sit at the top of the v2 tree (level 1): the task's
	// ancestor there is its lane also where its own group is below it
	// (under systemd, the lane's scope in the lane's slice).
	__u64 top_id = bpf_get_current_ancestor_cgroup_id(1);
	if ((blkcg_id && bpf_map_lookup_elem(&bg_cgroups, &blkcg_id)) ||
	    bpf_map_lookup_elem(&bg_cgroups, &cur_id) ||
	    (top_id && bpf_map_lookup_elem(&bg_cgroups, &top_id))) {
		st->last_bg_ns = now;
		return 0;
	}
	st->last_fg_ns = now;

	__u32 *open = bpf_map_lookup_elem(&dev_open, &dev);
	if (!open || *open == 0)
		return 0;
	if (__sync_val_compare_and_swap(open, 1, 0) != 1)
		return 0; // another CPU's bio took this release's event
	struct disk_event *ev = bpf_ringbuf_reserve(&disk_events, sizeof(*ev), 0);
	if (!ev)
		return 0; // ring full: user space sees open == 0 and the stamp
	ev->dev = dev;
	ev->pad = 0;
	ev->at_ns = now;
	// Events are rare (one per release) and the hold must follow at once:
	// wake the reader now rather than leave it to the adaptive wakeup.
	bpf_ringbuf_submit(ev, BPF_RB_FORCE_WAKEUP);
	return 0;
}
