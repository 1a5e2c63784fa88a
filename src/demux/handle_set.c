/*
 * handle_set.c - picks a handle set backend by name and forwards the public
 * calls to it (callers never touch ->ops). Argument checks common to every
 * backend live here, so each backend sees only valid calls. Thread-safe as
 * the backends are.
 */
#include "demux/handle_set_internal.h"

#include <cabrank/clock.h>

#include <string.h>

static const struct cr_handle_set_ops *const backends[] = {
    &cr__handle_set_epoll_ops,
    &cr__handle_set_poll_ops,
    &cr__handle_set_select_ops,
};

static const char *const backend_names[] = {"epoll", "poll", "select", NULL};

const char *const *cr_handle_set_backends(void)
{
    return backend_names;
}

int cr_handle_set_open(struct cr_handle_set **out, const char *backend)
{
    *out = NULL;
    if (backend == NULL || backend[0] == '\0')
        backend = backends[0]->name;
    for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++) {
        if (strcmp(backends[i]->name, backend) == 0)
            return backends[i]->open(out);
    }
    return -ENOENT;
}

void cr_handle_set_close(struct cr_handle_set *hs)
{
    if (hs != NULL)
        hs->ops->close(hs);
}

unsigned cr__handle_set_fds(const struct cr_handle_set *hs, int *fds)
{
    return hs->ops->fds(hs, fds);
}

const char *cr_handle_set_name(const struct cr_handle_set *hs)
{
    return hs->ops->name;
}

static bool has_only_known_bits(const struct cr_handle_set *hs, unsigned interest, unsigned flags)
{
    unsigned known = CR_HS_ONESHOT | (hs->ops->edge ? CR_HS_EDGE : 0);

    return (interest & ~(CR_EV_READ | CR_EV_WRITE)) == 0 && (flags & ~known) == 0;
}

bool cr_handle_set_has_edge(const struct cr_handle_set *hs)
{
    return hs->ops->edge;
}

int cr_handle_set_add(struct cr_handle_set *hs, int fd, unsigned interest, unsigned flags,
                      uint32_t tag)
{
    /* A closed fd: the backend says -EBADF (epoll_ctl does; the table
     * backends look), so that epoll's add costs one syscall, not two. */
    if (fd < 0)
        return -EBADF;
    if (!has_only_known_bits(hs, interest, flags))
        return -EINVAL;
    return hs->ops->add(hs, fd, interest, flags, tag);
}

int cr_handle_set_modify(struct cr_handle_set *hs, int fd, unsigned interest, unsigned flags,
                         uint32_t tag)
{
    if (fd < 0)
        return -EBADF;
    if (!has_only_known_bits(hs, interest, flags))
        return -EINVAL;
    return hs->ops->modify(hs, fd, interest, flags, tag);
}

int cr_handle_set_remove(struct cr_handle_set *hs, int fd)
{
    if (fd < 0)
        return -EBADF;
    return hs->ops->remove(hs, fd);
}

int cr__handle_set_wait(struct cr_handle_set *hs, struct cr_handle_event *evs, int max,
                        int timeout_ms, uint64_t since_ns)
{
    if (evs == NULL || max <= 0)
        return -EINVAL;
    return hs->ops->wait(hs, evs, max, timeout_ms, since_ns);
}

int cr_handle_set_wait(struct cr_handle_set *hs, struct cr_handle_event *evs, int max,
                       int timeout_ms)
{
    return cr__handle_set_wait(hs, evs, max, timeout_ms, 0);
}

void cr_handle_set_wake(struct cr_handle_set *hs)
{
    hs->ops->wake(hs);
}

uint64_t cr__handle_set_deadline(int timeout_ms, uint64_t since_ns)
{
    if (timeout_ms <= 0)
        return 0;
    return (since_ns != 0 ? since_ns : cr_clock_now_ns()) + (uint64_t)timeout_ms * CR_NSEC_PER_MSEC;
}

int cr__handle_set_remaining_ms(int timeout_ms, uint64_t deadline_ns)
{
    uint64_t now;

    if (timeout_ms < 0)
        return -1;
    now = cr_clock_now_ns();
    if (now >= deadline_ns)
        return 0;
    /* Round up so a wait never ends before its deadline. */
    return (int)((deadline_ns - now + CR_NSEC_PER_MSEC - 1) / CR_NSEC_PER_MSEC);
}
