/*
 * cpu.h - how many CPUs this process may run on, the default size of every
 * model's pool (one handle set per CPU under lf, a worker per CPU elsewhere),
 * as nginx's `worker_processes auto`. Counts the CPUs of the affinity mask
 * (taskset, cpusets), not the machine's, and fewer where a cgroup CPU quota
 * (cgroup v2 cpu.max, v1 cpu.cfs_quota_us) grants less time: a container
 * limited to 2.5 CPUs on a 64-core host gets 3, not 64. Thread-safe.
 */
#ifndef CABRANK_CPU_H
#define CABRANK_CPU_H

#include <cabrank/common.h>

/* The CPUs in the calling thread's affinity mask; at least 1. Thread-safe. */
int cr_cpu_affinity_count(void);

/*
 * The CPU time the cgroup of this process may use, in CPUs rounded up: the
 * smallest quota of its cgroup and every parent (cgroup v2 "cpu.max": quota
 * and period; v1 "cpu.cfs_quota_us" and "cpu.cfs_period_us"), read from the
 * group /proc/self/cgroup names under the conventional mount points below
 * /sys/fs/cgroup (v2 there or in its "unified" folder; v1 in its controller's
 * folder). 0 when no quota limits it or none can be read. Thread-safe.
 */
int cr_cpu_quota_count(void);

/* min(cr_cpu_affinity_count(), cr_cpu_quota_count() where non-zero); at least
 * 1. Thread-safe. */
int cr_cpu_usable(void);

/*
 * cr_cpu_quota_count() reading proc_cgroup for /proc/self/cgroup and
 * cgroup_root for /sys/fs/cgroup (borrowed), for a chroot or a test that
 * builds a cgroup tree of its own. Thread-safe.
 */
int cr_cpu_quota_count_at(const char *proc_cgroup, const char *cgroup_root);

#endif /* CABRANK_CPU_H */
