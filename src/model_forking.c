/*
 * model_forking.c - placeholder: the forking model is being written. Without create,
 * cr_server does not list it (server.c).
 */
#include "model_internal.h"

const struct cr_model_ops cr__model_forking_ops = {
    .name = "forking",
};
