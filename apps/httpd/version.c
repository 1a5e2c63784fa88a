/*
 * version.c - cabrank-httpd's version (version.h), the one place that
 * includes the header the Makefile generates from its VERSION
 * (<variant>/gen/cabrank_version.h, defining CR_VERSION). Any thread.
 */
#include "version.h"

/* The fuzz targets are built without the generated header. */
#if __has_include("cabrank_version.h")
#include "cabrank_version.h"
#endif
#ifndef CR_VERSION
#define CR_VERSION "unknown"
#endif

const char *httpd_version(void)
{
    return CR_VERSION;
}
