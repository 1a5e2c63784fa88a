/*
 * version.h - cabrank-httpd's version, for --version, the log and the status
 * page: the Makefile's VERSION, followed by `git describe` when built in a
 * git checkout ("0.1.0+87204b9-dirty"), VERSION alone from a tarball.
 */
#ifndef CABRANK_HTTPD_VERSION_H
#define CABRANK_HTTPD_VERSION_H

/* A static string. Thread-safe. */
const char *httpd_version(void);

#endif /* CABRANK_HTTPD_VERSION_H */
