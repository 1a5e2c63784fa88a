/*
 * app_server.c - The startup line and the error log of the programs that
 * run a cr_server (app_server.h). Runs on their main thread; owns nothing.
 */
#include "app_server.h"

#include <cabrank/log.h>
#include <cabrank/server.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

void app_say_listening(struct cr_server *s)
{
    for (unsigned i = 0; i < cr_server_listeners(s); i++) {
        char addr[80];

        if (cr_server_address(s, i, addr, sizeof(addr)) == 0) {
            printf("listening on %s\n", addr);
            CR_LOG(CR_LOG_INFO, "listening on %s", addr);
        }
    }
    fflush(stdout);
}

int app_open_error_log(const char *path)
{
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    int err = 0;

    if (fd < 0)
        return -errno;
    /* dup2 swaps the file behind descriptor 2 at once: a thread writing a
     * record meanwhile writes it whole to the old file or the new one. */
    if (dup2(fd, STDERR_FILENO) < 0)
        err = -errno;
    close(fd);
    return err;
}
