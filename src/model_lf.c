/* model_lf.c - placeholder until the lf model lands. */
#include "model_internal.h"

static int create_stub(struct cr_model **out, const struct cr_model_env *env)
{
    (void)env;
    *out = NULL;
    return -ENOSYS;
}

const struct cr_model_ops cr__model_lf_ops = {
    .name = "lf",
    .create = create_stub,
};
