/*
 * cpu.c - the CPUs this process may use (cpu.h): the affinity mask's count,
 * bounded by the cgroup CPU quota. Called by cr_server when it fills in its
 * defaults and by the applications sizing per-thread state; any thread. Reads
 * /proc and /sys at each call: a quota or mask can change while a process
 * lives, and the callers ask once at start.
 *
 * The quota is looked for where systemd, Docker and Kubernetes mount the
 * hierarchies, rather than by parsing /proc/self/mountinfo: a process in a
 * cgroup namespace sees its own group as "/" there, and a group that cannot
 * be found counts as unlimited, the answer nginx's `auto` always gives.
 */
#include <cabrank/cpu.h>

#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* sched_getaffinity's mask, grown until the kernel's fits. */
#define MAX_MASK_CPUS (1 << 16)

int cr_cpu_affinity_count(void)
{
    for (int ncpus = 1024; ncpus <= MAX_MASK_CPUS; ncpus *= 2) {
        size_t size = CPU_ALLOC_SIZE(ncpus);
        cpu_set_t *set = CPU_ALLOC(ncpus);
        int n;

        if (set == NULL)
            break;
        CPU_ZERO_S(size, set);
        if (sched_getaffinity(0, size, set) == 0) {
            n = CPU_COUNT_S(size, set);
            CPU_FREE(set);
            return n > 0 ? n : 1;
        }
        CPU_FREE(set);
        if (errno != EINVAL)
            break; /* EINVAL: the kernel's mask is larger than ours */
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);

    return n > 0 ? (int)n : 1;
}

/* The first line of path, without its newline, into buf. false if none. */
static bool read_line(const char *path, char *buf, size_t size)
{
    FILE *f = fopen(path, "re");
    bool ok;

    if (f == NULL)
        return false;
    ok = fgets(buf, (int)size, f) != NULL;
    fclose(f);
    if (ok)
        buf[strcspn(buf, "\n")] = '\0';
    return ok;
}

/* CPUs in quota/period, rounded up; 0 for no limit. */
static int quota_cpus(long long quota, long long period)
{
    if (quota <= 0 || period <= 0)
        return 0;
    long long n = (quota + period - 1) / period;

    return n > INT_MAX ? 0 : (int)n;
}

/* One group's quota in CPUs (v2 cpu.max, or v1's two files); 0: none. */
static int group_quota(const char *dir, bool v2)
{
    char path[PATH_MAX];
    char line[128];
    long long quota = 0;
    long long period = 0;

    if (v2) {
        char max[32];

        if (snprintf(path, sizeof(path), "%s/cpu.max", dir) >= (int)sizeof(path) ||
            !read_line(path, line, sizeof(line)))
            return 0;
        if (sscanf(line, "%31s %lld", max, &period) != 2 || strcmp(max, "max") == 0)
            return 0;
        quota = strtoll(max, NULL, 10);
        return quota_cpus(quota, period);
    }
    if (snprintf(path, sizeof(path), "%s/cpu.cfs_quota_us", dir) >= (int)sizeof(path) ||
        !read_line(path, line, sizeof(line)))
        return 0;
    quota = strtoll(line, NULL, 10);
    if (snprintf(path, sizeof(path), "%s/cpu.cfs_period_us", dir) >= (int)sizeof(path) ||
        !read_line(path, line, sizeof(line)))
        return 0;
    period = strtoll(line, NULL, 10);
    return quota_cpus(quota, period);
}

static bool is_dir(const char *path)
{
    struct stat st;

    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/*
 * The smallest quota of group (a path inside the hierarchy mounted at base)
 * and its parents, up to base itself. A group missing under base (the
 * process sees the host's path but a namespaced mount) counts from base.
 */
static int hierarchy_quota(const char *base, const char *group, bool v2)
{
    char dir[PATH_MAX];
    size_t base_len = strlen(base);
    int best = 0;

    if (snprintf(dir, sizeof(dir), "%s%s", base, strcmp(group, "/") == 0 ? "" : group) >=
            (int)sizeof(dir) ||
        !is_dir(dir))
        dir[base_len] = '\0';
    for (;;) {
        int q = group_quota(dir, v2);

        if (q > 0 && (best == 0 || q < best))
            best = q;
        if (strlen(dir) <= base_len)
            return best;
        char *slash = strrchr(dir + base_len, '/');

        if (slash == NULL)
            return best;
        *slash = '\0';
    }
}

/* Whether the comma list controllers names "cpu". */
static bool has_cpu_controller(const char *controllers)
{
    size_t len = strlen(controllers);

    for (const char *p = controllers; p < controllers + len;) {
        size_t n = strcspn(p, ",");

        if (n == 3 && strncmp(p, "cpu", 3) == 0)
            return true;
        p += n + 1;
    }
    return false;
}

/* The quota of one /proc/self/cgroup line ("id:controllers:path"). */
static int line_quota(char *line, const char *root)
{
    char base[PATH_MAX];
    char *controllers = strchr(line, ':');
    char *group;

    if (controllers == NULL)
        return 0;
    controllers++;
    group = strchr(controllers, ':');
    if (group == NULL)
        return 0;
    *group++ = '\0';
    if (group[0] != '/')
        return 0;
    if (controllers[0] == '\0') { /* v2: at the root, or beside v1 in "unified" */
        const char *const mounts[] = {"", "/unified"};

        for (size_t i = 0; i < sizeof(mounts) / sizeof(mounts[0]); i++) {
            char probe[PATH_MAX];

            if (snprintf(base, sizeof(base), "%s%s", root, mounts[i]) >= (int)sizeof(base) ||
                snprintf(probe, sizeof(probe), "%s/cgroup.controllers", base) >=
                    (int)sizeof(probe) ||
                access(probe, F_OK) != 0)
                continue;
            return hierarchy_quota(base, group, true);
        }
        return 0;
    }
    if (!has_cpu_controller(controllers))
        return 0;
    if (snprintf(base, sizeof(base), "%s/%s", root, controllers) >= (int)sizeof(base) ||
        !is_dir(base)) {
        if (snprintf(base, sizeof(base), "%s/cpu", root) >= (int)sizeof(base) || !is_dir(base))
            return 0;
    }
    return hierarchy_quota(base, group, false);
}

int cr_cpu_quota_count_at(const char *proc_cgroup, const char *cgroup_root)
{
    char line[PATH_MAX + 64];
    FILE *f = fopen(proc_cgroup, "re");
    int best = 0;

    if (f == NULL)
        return 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        int q = line_quota(line, cgroup_root);

        if (q > 0 && (best == 0 || q < best))
            best = q;
    }
    fclose(f);
    return best;
}

int cr_cpu_quota_count(void)
{
    return cr_cpu_quota_count_at("/proc/self/cgroup", "/sys/fs/cgroup");
}

int cr_cpu_usable(void)
{
    int n = cr_cpu_affinity_count();
    int quota = cr_cpu_quota_count();

    return quota > 0 && quota < n ? quota : n;
}
