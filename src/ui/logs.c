/* logs.c - `drover logs`: a run's node logs, one or all merged in time
 * order, followed as they grow (see logs.h).
 *
 * Each log is a source read from where it was left; each look reads every
 * complete line the sources gained, orders that batch by time stamp (then
 * by source, then by position, so a file's own order is kept) and prints
 * it. A line still being written waits for its newline, until the end.
 */
#include "ui/logs.h"

#include <ctype.h>
#include <dirent.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/err.h"
#include "base/rundir.h"
#include "ui/runs.h"
#include "base/util.h"

#define STAMP_LEN 24 /* "2026-11-21T10:53:06.123Z" */

typedef struct source {
  char name[64];        /* "worker:1" */
  char path[PATH_MAX + 320];
  FILE *f;              /* NULL until the file exists */
  char key[STAMP_LEN + 1]; /* the last time stamp seen: for lines without one */
  char *part;           /* an incomplete last line, or NULL */
  size_t plen;
} source;

typedef struct line {
  char stamp[STAMP_LEN + 1];
  int src;
  size_t seq;
  char *text; /* owned, no newline */
} line;

typedef struct batch {
  line *v;
  size_t n, cap;
} batch;

/* ============================== sources ================================== */

/* "worker-1.log" -> "worker:1"; "coordinator.log" -> "coordinator". */
static void node_name(const char *file, char *out, size_t n) {
  snprintf(out, n, "%.*s", (int)(strlen(file) - 4), file);
  char *dash = strrchr(out, '-');
  if (dash && dash[1] && strspn(dash + 1, "0123456789") == strlen(dash + 1)) *dash = ':';
}

static int by_name(const void *a, const void *b) {
  return strcmp(((const source *)a)->name, ((const source *)b)->name);
}

/* The run's logs/NAME.log files, or its events.log when it has none. */
static int find_sources(const char *dir, source **out, size_t *count) {
  char logs[PATH_MAX + 16];
  snprintf(logs, sizeof logs, "%s/" RUNDIR_LOGS, dir);
  source *s = NULL;
  size_t n = 0, cap = 0;
  DIR *d = opendir(logs);
  struct dirent *e;
  while (d && (e = readdir(d)) != NULL) {
    size_t len = strlen(e->d_name);
    if (e->d_name[0] == '.' || len < 5 || strcmp(e->d_name + len - 4, ".log") != 0) continue;
    if (util_grow_zeroed(&s, &cap, n + 1, sizeof *s, 8) < 0) break;
    int k = snprintf(s[n].path, sizeof s[n].path, "%s/%.*s", logs, 255, e->d_name);
    if (k < 0 || (size_t)k >= sizeof s[n].path) continue; /* a path too long to open */
    node_name(e->d_name, s[n].name, sizeof s[n].name);
    n++;
  }
  if (d) closedir(d);
  if (n == 0 && util_grow_zeroed(&s, &cap, 1, sizeof *s, 1) == 0) {
    snprintf(s[0].name, sizeof s[0].name, "events");
    snprintf(s[0].path, sizeof s[0].path, "%s/" RUNDIR_EVENTS_LOG, dir);
    n = 1;
  }
  if (!s) return err_set(DRV_ENOMEM, "out of memory");
  qsort(s, n, sizeof *s, by_name);
  *out = s;
  *count = n;
  return 0;
}

/* Keeps only the source called `node` ("worker:1" or "worker-1"). */
static int pick_node(source *s, size_t *n, const char *node, const char *run) {
  char want[64];
  snprintf(want, sizeof want, "%s", node);
  char *dash = strrchr(want, '-');
  if (dash && isdigit((unsigned char)dash[1])) *dash = ':';
  for (size_t i = 0; i < *n; i++)
    if (strcmp(s[i].name, want) == 0) {
      if (i) s[0] = s[i];
      *n = 1;
      return 0;
    }
  char names[512] = "";
  size_t len = 0;
  for (size_t i = 0; i < *n && len < sizeof names; i++)
    len += (size_t)snprintf(names + len, sizeof names - len, "%s%s", i ? ", " : "", s[i].name);
  return err_set(DRV_EINVAL, "run '%s' has no node '%s' (its logs: %s)", run, node, names);
}

/* ============================== reading ================================== */

static bool has_stamp(const char *t) {
  static const char shape[] = "dddd-dd-ddTdd:dd:dd.dddZ";
  for (int i = 0; i < STAMP_LEN; i++)
    if (shape[i] == 'd' ? !isdigit((unsigned char)t[i]) : t[i] != shape[i]) return false;
  return true;
}

static int add_line(batch *b, source *s, int src, char *text) {
  int rc = util_grow(&b->v, &b->cap, b->n + 1, sizeof *b->v, 64);
  if (rc < 0) return free(text), rc;
  if (has_stamp(text)) snprintf(s->key, sizeof s->key, "%.*s", STAMP_LEN, text);
  line *l = &b->v[b->n];
  snprintf(l->stamp, sizeof l->stamp, "%s", s->key);
  l->src = src;
  l->seq = b->n;
  l->text = text;
  b->n++;
  return 0;
}

/* Appends len bytes to the source's incomplete line. */
static int keep_part(source *s, const char *p, size_t len) {
  char *np = realloc(s->part, s->plen + len + 1);
  if (!np) return err_set(DRV_ENOMEM, "out of memory");
  memcpy(np + s->plen, p, len);
  s->plen += len;
  np[s->plen] = '\0';
  s->part = np;
  return 0;
}

/* Reads what source src gained; complete lines go to b, and with `last`
 * an unfinished one too. */
static int read_source(source *s, int src, batch *b, bool last) {
  if (!s->f && !(s->f = fopen(s->path, "re"))) return 0;
  char buf[8192];
  size_t k;
  int rc = 0;
  while (rc == 0 && (k = fread(buf, 1, sizeof buf, s->f)) > 0) {
    const char *p = buf, *end = buf + k, *nl;
    while (rc == 0 && (nl = memchr(p, '\n', (size_t)(end - p))) != NULL) {
      if ((rc = keep_part(s, p, (size_t)(nl - p))) == 0) {
        rc = add_line(b, s, src, s->part);
        s->part = NULL;
        s->plen = 0;
      }
      p = nl + 1;
    }
    if (rc == 0 && p < end) rc = keep_part(s, p, (size_t)(end - p));
  }
  clearerr(s->f); /* at EOF: the next look reads what was appended since */
  if (rc == 0 && last && s->part) {
    rc = add_line(b, s, src, s->part);
    s->part = NULL;
    s->plen = 0;
  }
  return rc;
}

static int by_time(const void *a, const void *b) {
  const line *x = a, *y = b;
  int c = strcmp(x->stamp, y->stamp);
  if (c) return c;
  return x->src != y->src ? x->src - y->src : (x->seq > y->seq) - (x->seq < y->seq);
}

/* One look: reads every source, prints the new lines in time order. */
static int look(source *s, size_t n, bool last, bool prefix, int width, FILE *out) {
  batch b = {0};
  int rc = 0;
  for (size_t i = 0; i < n && rc == 0; i++) rc = read_source(&s[i], (int)i, &b, last);
  if (b.n) qsort(b.v, b.n, sizeof *b.v, by_time);
  for (size_t i = 0; i < b.n; i++) {
    if (prefix) fprintf(out, "%-*s | %s\n", width, s[b.v[i].src].name, b.v[i].text);
    else fprintf(out, "%s\n", b.v[i].text);
    free(b.v[i].text);
  }
  free(b.v);
  fflush(out);
  return rc;
}

/* ============================== the command ============================== */

static void nap(double seconds) {
  struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
  nanosleep(&ts, NULL);
}

/* Following all the logs: adds the ones that appeared since (nodes that
 * registered after the command began), after the others, so the sources'
 * numbers stay. */
static void add_new_sources(const char *dir, source **s, size_t *n, size_t *cap) {
  source *now;
  size_t k;
  if (find_sources(dir, &now, &k) < 0) return;
  for (size_t i = 0; i < k; i++) {
    bool known = false;
    for (size_t j = 0; j < *n && !known; j++) known = strcmp((*s)[j].path, now[i].path) == 0;
    if (known || strcmp(now[i].name, "events") == 0) continue;
    if (util_grow_zeroed(s, cap, *n + 1, sizeof **s, 8) < 0) break;
    (*s)[(*n)++] = now[i];
  }
  free(now);
}

static int name_width(const source *s, size_t n) {
  int width = 0;
  for (size_t i = 0; i < n; i++)
    if ((int)strlen(s[i].name) > width) width = (int)strlen(s[i].name);
  return width;
}

int logs_main(const logs_opts *o, FILE *out) {
  char dir[PATH_MAX];
  source *s = NULL;
  size_t n = 0;
  int rc = runs_find(o->runs, o->run, dir, sizeof dir);
  if (rc < 0 || (rc = find_sources(dir, &s, &n)) < 0) return rc;
  size_t cap = n;
  if (o->node) rc = pick_node(s, &n, o->node, o->run);
  bool prefix = !o->node;
  double poll = o->poll > 0 ? o->poll : 0.2;
  /* Following: whether the run was alive is asked before each look, so
   * the look after it ended still gets everything it wrote. */
  while (rc == 0) {
    bool alive = o->follow && runs_running(dir);
    if (prefix && o->follow) add_new_sources(dir, &s, &n, &cap);
    if ((rc = look(s, n, !alive, prefix, name_width(s, n), out)) < 0 || !alive) break;
    nap(poll);
  }
  for (size_t i = 0; i < n; i++) {
    if (s[i].f) fclose(s[i].f);
    free(s[i].part);
  }
  free(s);
  return rc;
}
