/*
 * hanudb_version.h: the version of HanuDB these headers belong to. The
 * libraries report the version they were built as at run time
 * (quad_version(), hanudb_client_version()); a program can compare both to
 * catch a header/library mismatch. Public, self-contained.
 */
#ifndef HANUDB_VERSION_H
#define HANUDB_VERSION_H

#define HANUDB_VERSION_MAJOR 0
#define HANUDB_VERSION_MINOR 1
#define HANUDB_VERSION_PATCH 0
#define HANUDB_VERSION "0.1.0"
/* One comparable number: 0.1.0 is 100, 1.2.3 is 10203. */
#define HANUDB_VERSION_NUMBER \
    (HANUDB_VERSION_MAJOR * 10000 + HANUDB_VERSION_MINOR * 100 + HANUDB_VERSION_PATCH)

#endif
