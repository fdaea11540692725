/* hadoopconf.c - a property from a Hadoop configuration file: a scan for
 * <property> elements, not an XML parser (these files are machine-written
 * and flat). */
#include "base/hadoopconf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"

#define CONF_MAX (4u << 20)

int hadoopconf_dir(char *out, size_t cap) {
  const char *d = getenv("HADOOP_CONF_DIR");
  const char *home = getenv("HADOOP_HOME");
  int n;
  if (d && *d) n = snprintf(out, cap, "%s", d);
  else if (home && *home) n = snprintf(out, cap, "%s/etc/hadoop", home);
  else n = snprintf(out, cap, "/etc/hadoop/conf");
  if (n < 0 || (size_t)n >= cap) return err_set(DRV_ERANGE, "the Hadoop configuration directory's name is too long");
  return 0;
}

/* The file whole, NUL-terminated, or NULL with *rc 0 (missing) or an error. */
static char *slurp(const char *path, int *rc) {
  *rc = 0;
  FILE *f = fopen(path, "rbe");
  if (!f) {
    if (errno != ENOENT && errno != ENOTDIR)
      *rc = err_set(DRV_EIO, "cannot read '%s': %s", path, strerror(errno));
    return NULL;
  }
  char *s = malloc(CONF_MAX + 2); /* one more than allowed shows a file too long */
  size_t n = s ? fread(s, 1, CONF_MAX + 1, f) : 0;
  int bad = ferror(f);
  fclose(f);
  if (!s) *rc = err_set(DRV_ENOMEM, "out of memory reading '%s'", path);
  else if (bad) *rc = err_set(DRV_EIO, "cannot read '%s'", path);
  else if (n > CONF_MAX) *rc = err_set(DRV_ERANGE, "'%s' is over %u bytes", path, CONF_MAX);
  if (*rc < 0) {
    free(s);
    return NULL;
  }
  s[n] = '\0';
  return s;
}

/* Blanks out <!-- ... --> so that a commented-out property is not read. */
static void drop_comments(char *s) {
  char *p = s;
  while ((p = strstr(p, "<!--"))) {
    char *e = strstr(p + 4, "-->");
    char *end = e ? e + 3 : p + strlen(p);
    memset(p, ' ', (size_t)(end - p));
    p = end;
  }
}

/* The text of <tag>...</tag> inside [b, e): *t and *tn, or 0 when absent.
 * <tag/> is an empty text. */
static int element(const char *b, const char *e, const char *tag, const char **t, size_t *tn) {
  char open[32], empty[32], close[32];
  snprintf(open, sizeof open, "<%s>", tag);
  snprintf(empty, sizeof empty, "<%s/>", tag);
  snprintf(close, sizeof close, "</%s>", tag);
  const char *o = strstr(b, open);
  const char *z = strstr(b, empty);
  if (z && z < e && (!o || o >= e || z < o)) {
    *t = z;
    *tn = 0;
    return 1;
  }
  if (!o || o >= e) return 0;
  o += strlen(open);
  const char *c = strstr(o, close);
  if (!c || c > e) return -1;
  while (o < c && strchr(" \t\r\n", *o)) o++;
  while (c > o && strchr(" \t\r\n", c[-1])) c--;
  *t = o;
  *tn = (size_t)(c - o);
  return 1;
}

/* XML text with its entities decoded into out. */
static int decode(const char *t, size_t tn, char *out, size_t cap) {
  static const struct { const char *ent; char c; } ents[] = {
      {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
  size_t o = 0;
  for (size_t i = 0; i < tn;) {
    char c = t[i];
    size_t adv = 1;
    for (size_t k = 0; c == '&' && k < sizeof ents / sizeof *ents; k++) {
      size_t l = strlen(ents[k].ent);
      if (l <= tn - i && memcmp(t + i, ents[k].ent, l) == 0) {
        c = ents[k].c;
        adv = l;
        break;
      }
    }
    if (o + 1 >= cap) return -1;
    out[o++] = c;
    i += adv;
  }
  out[o] = '\0';
  return 0;
}

int hadoopconf_get(const char *path, const char *name, char *out, size_t cap) {
  int rc;
  char *s = slurp(path, &rc);
  if (!s) return rc;
  drop_comments(s);
  int found = 0;
  char *p = s;
  while (rc >= 0 && (p = strstr(p, "<property"))) {
    char *e = strstr(p, "</property>");
    if (!e) {
      rc = err_set(DRV_EPARSE, "'%s': a <property> without its </property>", path);
      break;
    }
    const char *t, *v;
    size_t tn, vn;
    int hn = element(p, e, "name", &t, &tn);
    if (hn > 0 && tn == strlen(name) && memcmp(t, name, tn) == 0) {
      if (element(p, e, "value", &v, &vn) <= 0) {
        v = "";
        vn = 0;
      }
      if (decode(v, vn, out, cap) < 0)
        rc = err_set(DRV_ERANGE, "'%s': the value of %s is too long", path, name);
      else
        found = 1; /* a later definition wins: go on */
    }
    p = e + 11;
  }
  free(s);
  return rc < 0 ? rc : found;
}

int hadoopconf_lookup(const char *file, const char *name, char *out, size_t cap) {
  char dir[2048], path[2304];
  int rc = hadoopconf_dir(dir, sizeof dir);
  if (rc < 0) return rc;
  snprintf(path, sizeof path, "%s/%s", dir, file);
  return hadoopconf_get(path, name, out, cap);
}
