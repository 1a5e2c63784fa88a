/*
 * docroot.c - cabrank-bench's work directory: the document root every HTTP server serves
 * (peers.sh's files) and a run/ directory for the peers' logs and pid files. Created once
 * per run by main.c and removed at its end; single-threaded.
 */
#include "driver.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const struct bench_file bench_files[4] = {
    {"hello.txt", 13},
    {"1k.bin", 1024},
    {"64k.bin", 65536},
    {"1m.bin", 1048576},
};

long long bench_file_size(const char *name)
{
    for (size_t i = 0; i < sizeof(bench_files) / sizeof(bench_files[0]); i++) {
        if (strcmp(bench_files[i].name, name) == 0)
            return (long long)bench_files[i].size;
    }
    return -1;
}

/* Writes a file of size bytes: hello.txt's text, else bytes of a fixed pseudo-random
 * sequence (incompressible, as peers.sh's /dev/urandom, and the same every run). */
static int write_file(const char *dir, const struct bench_file *f)
{
    char path[PATH_MAX];
    char buf[65536];
    uint64_t x = 0x9e3779b97f4a7c15u;
    size_t left = f->size;
    int err = 0;
    int fd;

    snprintf(path, sizeof(path), "%s/%s", dir, f->name);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    if (strcmp(f->name, "hello.txt") == 0) {
        if (write(fd, "Hello, world\n", 13) != 13)
            err = -EIO;
        left = 0;
    }
    while (left > 0 && err == 0) {
        size_t n = left < sizeof(buf) ? left : sizeof(buf);

        for (size_t i = 0; i < n; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            buf[i] = (char)(x >> 56);
        }
        if (write(fd, buf, n) != (ssize_t)n)
            err = -EIO;
        left -= n;
    }
    if (close(fd) < 0 && err == 0)
        err = -errno;
    return err;
}

int bench_workdir_create(char *dir)
{
    const char *tmp = getenv("TMPDIR");
    char path[PATH_MAX];
    int err;

    snprintf(dir, PATH_MAX, "%s/cabrank-bench.XXXXXX", tmp != NULL && tmp[0] ? tmp : "/tmp");
    if (mkdtemp(dir) == NULL)
        return -errno;
    /* Peers started as root drop to nobody, who must reach the root and the logs. */
    if (chmod(dir, 0755) < 0)
        goto out_errno;
    snprintf(path, sizeof(path), "%s/www", dir);
    if (mkdir(path, 0755) < 0)
        goto out_errno;
    for (size_t i = 0; i < sizeof(bench_files) / sizeof(bench_files[0]); i++) {
        err = write_file(path, &bench_files[i]);
        if (err < 0)
            goto out_remove;
    }
    snprintf(path, sizeof(path), "%s/run", dir);
    if (mkdir(path, 0755) < 0 || chmod(path, 01777) < 0)
        goto out_errno;
    return 0;
out_errno:
    err = -errno;
out_remove:
    bench_workdir_remove(dir);
    return err;
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)type;
    (void)ftw;
    remove(path);
    return 0;
}

void bench_workdir_remove(const char *dir)
{
    if (dir[0] != '\0')
        nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}
