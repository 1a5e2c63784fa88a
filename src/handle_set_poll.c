/* handle_set_poll.c - placeholder until the poll backend lands. */
#include "handle_set_internal.h"

static int open_stub(struct cr_handle_set **out)
{
    *out = NULL;
    return -ENOSYS;
}

const struct cr_handle_set_ops cr__handle_set_poll_ops = {
    .name = "poll",
    .open = open_stub,
};
