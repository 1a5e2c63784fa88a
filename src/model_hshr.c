/* model_hshr.c - placeholder until the hshr model lands. */
#include "model_internal.h"

static int create_stub(struct cr_model **out, const struct cr_model_env *env)
{
    (void)env;
    *out = NULL;
    return -ENOSYS;
}

const struct cr_model_ops cr__model_hshr_ops = {
    .name = "hshr",
    .create = create_stub,
};
