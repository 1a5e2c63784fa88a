/*
 * sys_internal.h - recv, send, sendmsg and epoll_wait for the request path,
 * without glibc's cancellation wrappers. glibc makes each a cancellation
 * point: in a process with threads every call switches the thread to
 * asynchronous cancellation and back, two atomic compare-and-swaps on the
 * thread's cancel word (cost: docs/design/os.md). cabrank never cancels a
 * thread, so these go to the kernel through syscall(2), which is no
 * cancellation point; results and errno are the libc calls'. Sanitizer
 * builds keep the libc calls: ASan checks the buffers there and TSan orders
 * threads through the descriptors. Library-internal; any thread.
 */
#ifndef CABRANK_SYS_INTERNAL_H
#define CABRANK_SYS_INTERNAL_H

#include <cabrank/common.h>

#include <stddef.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#if defined(CR_ASAN) || defined(CR_TSAN)
#define CR__SYS_LIBC 1
#endif

static inline ssize_t cr__sys_recv(int fd, void *buf, size_t len, int flags)
{
#ifdef CR__SYS_LIBC
    return recv(fd, buf, len, flags);
#else
    return syscall(SYS_recvfrom, fd, buf, len, flags, NULL, NULL);
#endif
}

static inline ssize_t cr__sys_send(int fd, const void *buf, size_t len, int flags)
{
#ifdef CR__SYS_LIBC
    return send(fd, buf, len, flags);
#else
    return syscall(SYS_sendto, fd, buf, len, flags, NULL, 0);
#endif
}

static inline ssize_t cr__sys_sendmsg(int fd, const struct msghdr *msg, int flags)
{
#ifdef CR__SYS_LIBC
    return sendmsg(fd, msg, flags);
#else
    return syscall(SYS_sendmsg, fd, msg, flags);
#endif
}

static inline int cr__sys_epoll_wait(int epfd, struct epoll_event *evs, int max, int timeout_ms)
{
#ifdef CR__SYS_LIBC
    return epoll_wait(epfd, evs, max, timeout_ms);
#else
    /* epoll_pwait with no mask is epoll_wait, and is there on every
     * architecture (arm64 has no epoll_wait). */
    return (int)syscall(SYS_epoll_pwait, epfd, evs, max, timeout_ms, NULL, 0);
#endif
}

#endif /* CABRANK_SYS_INTERNAL_H */
