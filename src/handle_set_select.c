/* handle_set_select.c - placeholder until the select backend lands. */
#include "handle_set_internal.h"

static int open_stub(struct cr_handle_set **out)
{
    *out = NULL;
    return -ENOSYS;
}

const struct cr_handle_set_ops cr__handle_set_select_ops = {
    .name = "select",
    .open = open_stub,
};
