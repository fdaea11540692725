/* webhdfs_url.c - webhdfs:// and hdfs:// URLs to the NameNode's HTTP
 * address, the Hadoop client configuration's way (fs.defaultFS,
 * dfs.namenode.http-address), and the user WebHDFS requests are made as. */
#include "base/webhdfs_int.h"

#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/err.h"
#include "base/hadoopconf.h"

#define HTTP_PORT_DEFAULT 9870 /* Hadoop 3's dfs.namenode.http-address */
#define HINT "set HADOOP_CONF_DIR to the cluster's client configuration, or name the " \
             "NameNode's HTTP address: webhdfs://HOST:PORT/PATH"

int webhdfs_is_url(const char *path) {
  return path && (strncmp(path, "hdfs://", 7) == 0 || strncmp(path, "webhdfs://", 10) == 0);
}

int webhdfs_user(char *out, size_t cap) {
  const char *u = getenv("HADOOP_USER_NAME");
  char buf[4096];
  struct passwd pw, *res = NULL;
  if ((!u || !*u) && getpwuid_r(geteuid(), &pw, buf, sizeof buf, &res) == 0 && res)
    u = res->pw_name;
  if (!u || !*u) return err_set(DRV_EINVAL, "webhdfs: no user name: set HADOOP_USER_NAME");
  int n = snprintf(out, cap, "%s", u);
  if (n < 0 || (size_t)n >= cap) return err_set(DRV_ERANGE, "webhdfs: the user name is too long");
  return 0;
}

int webhdfs__encode(const char *s, int keep_slash, char *out, size_t cap) {
  static const char hex[] = "0123456789ABCDEF";
  size_t o = 0;
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    int plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                strchr("-._~", *p) || (keep_slash && *p == '/');
    if (o + (plain ? 1 : 3) >= cap) return err_set(DRV_ERANGE, "webhdfs: '%s' is too long", s);
    if (plain) {
      out[o++] = (char)*p;
    } else {
      out[o++] = '%';
      out[o++] = hex[*p >> 4];
      out[o++] = hex[*p & 15];
    }
  }
  out[o] = '\0';
  return 0;
}

/* "HOST[:PORT]" of [a, e) into host and *port (-1 when absent). */
static int authority(const char *url, const char *a, const char *e, char *host, size_t hcap,
                     int *port) {
  const char *colon = NULL;
  if (*a == '[') { /* [v6]:port */
    const char *rb = memchr(a, ']', (size_t)(e - a));
    if (!rb) return err_set(DRV_EINVAL, "'%s': an IPv6 host without its ']'", url);
    colon = rb + 1 < e && rb[1] == ':' ? rb + 1 : NULL;
  } else {
    colon = memchr(a, ':', (size_t)(e - a));
  }
  const char *he = colon ? colon : e;
  if (he == a) return err_set(DRV_EINVAL, "'%s': no host", url);
  if ((size_t)(he - a) >= hcap) return err_set(DRV_EINVAL, "'%s': the host name is too long", url);
  memcpy(host, a, (size_t)(he - a));
  host[he - a] = '\0';
  *port = -1;
  if (!colon) return 0;
  char *end;
  long p = strtol(colon + 1, &end, 10);
  if (end != e || colon + 1 == e || p < 1 || p > 65535)
    return err_set(DRV_EINVAL, "'%s': a bad port", url);
  *port = (int)p;
  return 0;
}

/* SCHEME://AUTHORITY/PATH: the authority's bounds and the path. */
static int split(const char *url, size_t scheme_len, const char **a, const char **e,
                 webhdfs__url *u) {
  *a = url + scheme_len;
  const char *slash = strchr(*a, '/');
  *e = slash ? slash : *a + strlen(*a);
  const char *path = slash ? slash : "/";
  int n = snprintf(u->path, sizeof u->path, "%s", path);
  if (n < 0 || (size_t)n >= sizeof u->path) return err_set(DRV_EINVAL, "'%s' is too long", url);
  return 0;
}

/* The HTTP address for hdfs://HOST: dfs.namenode.http-address when set
 * (its wildcard host replaced by HOST), else HOST:9870. An HA nameservice
 * (named in dfs.nameservices) has no host to fall back on. */
static int http_address(const char *url, webhdfs__url *u) {
  char v[512];
  int rc = hadoopconf_lookup("hdfs-site.xml", "dfs.namenode.http-address", v, sizeof v);
  if (rc < 0) return err_set(DRV_EINVAL, "'%s': %s", url, err_msg());
  if (rc == 0) {
    char ns[512], *save = NULL;
    int has = hadoopconf_lookup("hdfs-site.xml", "dfs.nameservices", ns, sizeof ns);
    for (char *t = has > 0 ? strtok_r(ns, ", ", &save) : NULL; t; t = strtok_r(NULL, ", ", &save))
      if (strcmp(t, u->host) == 0)
        return err_set(DRV_EINVAL, "'%s': %s is an HA nameservice, and hdfs-site.xml has no "
                       "dfs.namenode.http-address: set it to the active NameNode's, or use "
                       "webhdfs://HOST:PORT/PATH", url, u->host);
    u->port = HTTP_PORT_DEFAULT;
    return 0;
  }
  char host[256];
  int port;
  if (authority(url, v, v + strlen(v), host, sizeof host, &port) < 0 || port < 0)
    return err_set(DRV_EINVAL, "'%s': hdfs-site.xml's dfs.namenode.http-address '%s' is not "
                   "HOST:PORT", url, v);
  if (strcmp(host, "0.0.0.0") != 0 && strcmp(host, "[::]") != 0)
    snprintf(u->host, sizeof u->host, "%s", host);
  u->port = port;
  return 0;
}

/* hdfs:///PATH: the host of core-site.xml's fs.defaultFS. */
static int default_fs(const char *url, webhdfs__url *u) {
  char dir[2048], fs[1024];
  hadoopconf_dir(dir, sizeof dir);
  int rc = hadoopconf_lookup("core-site.xml", "fs.defaultFS", fs, sizeof fs);
  if (rc < 0) return err_set(DRV_EINVAL, "'%s': %s", url, err_msg());
  if (rc == 0)
    return err_set(DRV_EINVAL, "'%s' names no NameNode and %s/core-site.xml has no "
                   "fs.defaultFS: " HINT, url, dir);
  if (strncmp(fs, "hdfs://", 7) != 0)
    return err_set(DRV_EINVAL, "'%s': fs.defaultFS in %s/core-site.xml is '%s', not an HDFS: "
                   HINT, url, dir, fs);
  const char *a = fs + 7, *slash = strchr(a, '/');
  const char *e = slash ? slash : a + strlen(a);
  int port;
  if (e == a) return err_set(DRV_EINVAL, "'%s': fs.defaultFS '%s' names no host", url, fs);
  return authority(url, a, e, u->host, sizeof u->host, &port);
}

int webhdfs__parse(const char *url, webhdfs__url *u) {
  const char *a, *e;
  memset(u, 0, sizeof *u);
  if (!webhdfs_is_url(url))
    return err_set(DRV_EINVAL, "'%s' is not an hdfs:// or webhdfs:// URL", url ? url : "(null)");
  int web = url[0] == 'w';
  int rc = split(url, web ? 10 : 7, &a, &e, u);
  if (rc < 0) return rc;
  if (web) {
    rc = authority(url, a, e, u->host, sizeof u->host, &u->port);
    if (rc == 0 && u->port < 0) u->port = HTTP_PORT_DEFAULT;
    return rc;
  }
  int port;
  rc = a == e ? default_fs(url, u) : authority(url, a, e, u->host, sizeof u->host, &port);
  return rc < 0 ? rc : http_address(url, u);
}

int webhdfs_resolve(const char *url, char *out, size_t cap) {
  webhdfs__url u;
  int rc = webhdfs__parse(url, &u);
  if (rc < 0) return rc;
  int n = snprintf(out, cap, "webhdfs://%s:%d%s", u.host, u.port, u.path);
  if (n < 0 || (size_t)n >= cap) return err_set(DRV_ERANGE, "'%s': the resolved URL is too long", url);
  return 0;
}
