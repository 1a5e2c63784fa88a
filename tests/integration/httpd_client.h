/*
 * httpd_client.h - what the cabrank-httpd integration programs
 * (tests/integration/httpd_*.c) share: the client, server starter and
 * document root of apps/common/http_client.h, the test support, and a CHECK
 * macro that reports and counts failures. Test code.
 */
#ifndef CABRANK_TEST_HTTPD_CLIENT_H
#define CABRANK_TEST_HTTPD_CLIENT_H

#include "../../apps/common/http_client.h"
#include "../support/services.h"
#include "../support/support.h"

#include <stdarg.h> /* for the programs' own printf-like helpers */

/* Failures so far; CHECK adds to it and says where. */
static int hc_failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            hc_failures++;                                                                         \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);               \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

#endif /* CABRANK_TEST_HTTPD_CLIENT_H */
