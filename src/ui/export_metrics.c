/* export_metrics.c - a run's scalars as one table (see export_metrics.h). */
#include "ui/export_metrics.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/err.h"
#include "base/rundir.h"
#include "base/util.h"
#include "run/metrics.h"

/* "2026-11-21T10:53:06.123Z" as Unix seconds, or NAN. */
static double parse_stamp(const char *s) {
  struct tm tm = {0};
  const char *rest = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
  if (!rest) return NAN;
  double frac = *rest == '.' ? strtod(rest, NULL) : 0;
  return (double)timegm(&tm) + frac;
}

/* Whether an events.log line's text begins a fit: "fit N: started" or
 * "fit N: resuming ..." in process; a cluster's first line of a fit,
 * "fit: N steps on ...", "fit: sync, ..." or "fit: fed, ..." (its other
 * "fit: ..." lines, "fit failed" and "fit done" come within or after one). */
static bool fit_begins(const char *text) {
  long long n;
  char c;
  if (sscanf(text, "fit %lld%c", &n, &c) == 2 && c == ':')
    return strstr(text, ": started") || strstr(text, ": resuming");
  return strncmp(text, "fit: sync, ", 11) == 0 || strncmp(text, "fit: fed, ", 10) == 0 ||
         (sscanf(text, "fit: %lld steps on%c", &n, &c) == 2 && c == ' ');
}

/* The start time of each fit, from events.log's lines that begin one.
 * Returns how many, with *out malloc'd (NULL for none). */
static size_t fit_starts(const char *dir, double **out) {
  char path[PATH_MAX + 16], line[2400];
  snprintf(path, sizeof path, "%s/" RUNDIR_EVENTS_LOG, dir);
  *out = NULL;
  FILE *f = fopen(path, "re");
  if (!f) return 0;
  size_t n = 0, cap = 0;
  while (fgets(line, sizeof line, f)) {
    char *text = strchr(line, ' ');
    if (!text || !fit_begins(text + 1)) continue;
    if (util_grow(out, &cap, n + 1, sizeof **out, 8) < 0) break;
    (*out)[n++] = parse_stamp(line);
  }
  fclose(f);
  return n;
}

/* A CSV row or a JSON line: one value, x (NAN for null), v as the file
 * has it. */
static void emit(FILE *out, export_format fmt, double wall, const char *tag, long long step,
                 double x, const json_t *v, const char *node) {
  if (fmt == EXPORT_CSV) {
    fprintf(out, "%.3f,%s,%lld,", wall, tag, step);
    if (isfinite(x)) fprintf(out, "%.9g", x);
    else fputs("nan", out);
    fprintf(out, ",%s\n", node ? node : "");
    return;
  }
  json_t *o = json_pack("{s:f, s:s, s:I, s:O}", "wall_time", round(wall * 1e3) / 1e3, "tag", tag,
                        "step", (json_int_t)step, "value", isfinite(x) ? (json_t *)v : json_null());
  if (o && node) json_object_set_new(o, "node", json_string(node));
  if (o && json_dumpf(o, out, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15)) == 0)
    fputc('\n', out);
  json_decref(o);
}

/* Emits the tags of one metrics line; returns how many. */
static long emit_line(FILE *out, export_format fmt, json_t *j, double base) {
  json_t *t = json_object_get(j, "time"), *s = json_object_get(j, "step");
  json_t *node = json_object_get(j, "node");
  double wall = base + (json_is_number(t) ? json_number_value(t) : 0);
  long long step = json_is_integer(s) ? (long long)json_integer_value(s) : 0;
  const char *key;
  json_t *v;
  long n = 0;
  json_object_foreach(j, key, v) {
    double x;
    if (!metrics_series(key, v, &x)) continue;
    emit(out, fmt, wall, key, step, x, v, json_is_string(node) ? json_string_value(node) : NULL);
    n++;
  }
  return n;
}

long export_metrics(const char *dir, export_format fmt, FILE *out) {
  char path[PATH_MAX + 16], line[8192];
  snprintf(path, sizeof path, "%s/" RUNDIR_METRICS, dir);
  FILE *f = fopen(path, "re");
  if (!f) return err_set(DRV_EIO, "cannot read '%s': %s", path, strerror(errno));
  double *starts;
  size_t nstarts = fit_starts(dir, &starts), fit = 0;
  double last_time = -1;
  long long last_step = -1;
  long n = 0, lineno = 0;
  if (fmt == EXPORT_CSV) fputs("wall_time,tag,step,value,node\n", out);
  while (n >= 0 && fgets(line, sizeof line, f)) {
    lineno++;
    json_error_t err;
    json_t *j = json_loads(line, 0, &err);
    if (!json_is_object(j)) {
      json_decref(j);
      n = err_set(DRV_EINVAL, "%s:%ld: not a JSON object (%s)", path, lineno, err.text);
      break;
    }
    /* A fit's times and steps count from its start: a smaller one of
     * either begins the next fit. */
    json_t *t = json_object_get(j, "time"), *st = json_object_get(j, "step");
    double time = json_is_number(t) ? json_number_value(t) : 0;
    long long step = json_is_integer(st) ? (long long)json_integer_value(st) : 0;
    if ((time < last_time || step < last_step) && fit + 1 < nstarts) fit++;
    last_time = time;
    last_step = step;
    n += emit_line(out, fmt, j, nstarts ? starts[fit] : 0);
    json_decref(j);
  }
  fclose(f);
  free(starts);
  return n;
}
