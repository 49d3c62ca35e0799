#!/bin/busybox sh
# vmlane guest init: set the kernel up as a user's machine would be, run
# the test binaries listed in /etc/vmlane/tests, print markers around
# their output for the host's parser, and power off.
export PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TMPDIR=/tmp
/bin/busybox mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t tmpfs -o mode=755 tmpfs /run
mount -t tmpfs -o mode=1777 tmpfs /tmp
echo 1 > /proc/sys/kernel/printk
mkdir -p /dev/pts /dev/shm && mount -t devpts devpts /dev/pts && mount -t tmpfs tmpfs /dev/shm
mount -t cgroup2 cgroup2 /sys/fs/cgroup
for c in cpuset cpu io memory pids; do
	echo "+$c" > /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null
done
mount -t bpf bpf /sys/fs/bpf
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
echo "VMLANE-INFO kernel $(uname -r)"
echo "VMLANE-INFO uptime-at-init $(cut -d' ' -f1 /proc/uptime)"
for m in $(cat /etc/vmlane/modules); do
	modprobe "$m" || echo "VMLANE-INFO modprobe-failed $m"
done
/usr/sbin/ip link set lo up
echo "VMLANE-INFO controllers $(cat /sys/fs/cgroup/cgroup.controllers)"
echo "VMLANE-INFO subtree_control $(cat /sys/fs/cgroup/cgroup.subtree_control)"
echo "VMLANE-INFO sched_ext $(test -d /sys/kernel/sched_ext && echo present || echo absent)"
echo "VMLANE-INFO qdisc-default $(cat /proc/sys/net/core/default_qdisc 2>/dev/null)"
echo "VMLANE-INFO mem-total-kb $(awk '/MemTotal/ {print $2}' /proc/meminfo)"
export LANES_EMULATED=1
set -- $(cat /etc/vmlane/testargs)
overall=0
while IFS="	" read -r pkg dir bin; do
	[ -n "$pkg" ] || continue
	echo "VMLANE-BEGIN $pkg"
	start=$(cut -d' ' -f1 /proc/uptime)
	(cd "$dir" && "./$bin" -test.v "$@" </dev/null 2>&1)
	rc=$?
	echo
	echo "VMLANE-END $pkg rc=$rc start=$start end=$(cut -d' ' -f1 /proc/uptime)"
	[ "$rc" -eq 0 ] || overall=1
done < /etc/vmlane/tests
if [ -x /usr/local/bin/lanes ]; then
	echo "VMLANE-DOCTOR-BEGIN"
	lanes doctor 2>&1
	rc=$?
	echo
	echo "VMLANE-DOCTOR-END rc=$rc"
	echo "VMLANE-DOCTORJSON-BEGIN"
	lanes doctor --json 2>/dev/null
	echo
	echo "VMLANE-DOCTORJSON-END rc=$?"
fi
echo "VMLANE-INFO mem-used-kb $(awk '/MemTotal/ {t=$2} /MemAvailable/ {a=$2} END {print t-a}' /proc/meminfo)"
echo "VMLANE-INFO uptime-at-end $(cut -d' ' -f1 /proc/uptime)"
echo "VMLANE-RESULT rc=$overall"
sync
poweroff -f
