/* webhdfs_int.h - what webhdfs.c and webhdfs_url.c share. Nothing else
 * includes this. */
#ifndef DROVER_WEBHDFS_INT_H
#define DROVER_WEBHDFS_INT_H

#include <stddef.h>

#include "base/webhdfs.h"

/* A URL resolved to the NameNode's HTTP address. */
typedef struct webhdfs__url {
  char host[256];               /* a name, an IPv4 address or "[v6]" */
  int port;                     /* the HTTP port */
  char path[WEBHDFS_URL_MAX];   /* absolute, not encoded */
} webhdfs__url;

/* Parses `url` (either scheme; hdfs:// reads the Hadoop configuration)
 * into *u. 0 or DRV_EINVAL naming the URL and what to set. */
int webhdfs__parse(const char *url, webhdfs__url *u);

/* `s` percent-encoded for a URL's path (keep_slash) or a query value
 * into out: 0, or DRV_ERANGE. */
int webhdfs__encode(const char *s, int keep_slash, char *out, size_t cap);

#endif
