/* runview.c - the dashboard's snapshot of a run: nodes, series and
 * events as plain owned arrays (see runview.h).
 *
 * A series keeps its whole history: when it holds RUNVIEW_SERIES_MAX points,
 * every second point goes (the first and the newest stay), so a long run
 * is drawn at a lower resolution instead of losing its beginning, as
 * TensorBoard's downsampling does. Events are a ring: the oldest go.
 */
#include "proto/runview.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"

#define SERIES_CAP0 256 /* first allocation of a series; doubles up to the max */

void runview_init(runview *m) {
  memset(m, 0, sizeof *m);
  snprintf(m->throughput.tag, sizeof m->throughput.tag, "%s", "examples/s");
  m->feed_per_sec = -1;
}

void runview_free(runview *m) {
  if (!m) return;
  free(m->nodes);
  free(m->throughput.pts);
  for (int i = 0; i < m->nmetrics; i++) free(m->metrics[i].pts);
  free(m->metrics);
  free(m->events);
  for (int i = 0; i < m->noverlay; i++) free(m->overlay[i].pts);
  free(m->overlay);
  runview_init(m);
}

/* ============================== nodes =================================== */

int runview_set_nnodes(runview *m, int n) {
  if (n < 0) return err_set(DRV_EINVAL, "runview_set_nnodes: negative count %d", n);
  if (n > m->capnodes) {
    int cap = m->capnodes ? m->capnodes : 8;
    while (cap < n) cap *= 2;
    runview_node *p = realloc(m->nodes, (size_t)cap * sizeof *p);
    if (!p) return err_set(DRV_ENOMEM, "out of memory for %d dashboard nodes", n);
    m->nodes = p;
    m->capnodes = cap;
  }
  if (n > m->nnodes) memset(m->nodes + m->nnodes, 0, (size_t)(n - m->nnodes) * sizeof *m->nodes);
  m->nnodes = n;
  return 0;
}

/* ============================== series ================================== */

/* Drops every second point of a full series, walking back from the newest
 * so that it stays, and keeps the first: n points become 1 + n/2. In place:
 * point k is written only after every point it overwrites was read. */
static void series_decimate(runview_series *s) {
  int k = 1; /* point 0 stays */
  for (int i = (s->n - 1) % 2 == 0 ? 2 : 1; i < s->n; i += 2)
    s->pts[(s->head + k++) % s->cap] = *runview_series_at(s, i);
  s->n = k;
}

static int series_push(runview_series *s, runview_point p) {
  if (s->n == s->cap) {
    if (s->cap >= RUNVIEW_SERIES_MAX) {
      series_decimate(s);
    } else {
      int cap = s->cap ? s->cap * 2 : SERIES_CAP0;
      if (cap > RUNVIEW_SERIES_MAX) cap = RUNVIEW_SERIES_MAX;
      runview_point *np = malloc((size_t)cap * sizeof *np);
      if (!np) return err_set(DRV_ENOMEM, "out of memory for series '%s'", s->tag);
      for (int i = 0; i < s->n; i++) np[i] = *runview_series_at(s, i);
      free(s->pts);
      s->pts = np;
      s->cap = cap;
      s->head = 0;
    }
  }
  s->pts[(s->head + s->n) % s->cap] = p;
  s->n++;
  return 0;
}

const runview_node *runview_find_node(const runview *m, const char *name) {
  for (int i = 0; i < m->nnodes; i++)
    if (strcmp(m->nodes[i].name, name) == 0) return &m->nodes[i];
  return NULL;
}

const runview_series *runview_find_series(const runview *m, const char *tag) {
  if (strcmp(tag, m->throughput.tag) == 0) return &m->throughput;
  for (int i = 0; i < m->nmetrics; i++)
    if (strcmp(m->metrics[i].tag, tag) == 0) return &m->metrics[i];
  return NULL;
}

int runview_add_point(runview *m, const char *tag, runview_point p) {
  runview_series *s = (runview_series *)runview_find_series(m, tag);
  if (!s) {
    if (m->nmetrics == m->capmetrics) {
      int cap = m->capmetrics ? m->capmetrics * 2 : 8;
      runview_series *ns = realloc(m->metrics, (size_t)cap * sizeof *ns);
      if (!ns) return err_set(DRV_ENOMEM, "out of memory for series '%s'", tag);
      m->metrics = ns;
      m->capmetrics = cap;
    }
    s = &m->metrics[m->nmetrics++];
    memset(s, 0, sizeof *s);
    snprintf(s->tag, sizeof s->tag, "%s", tag);
  }
  int rc = series_push(s, p);
  if (rc == 0) m->version++;
  return rc;
}

/* ============================== events ================================== */

int runview_add_event(runview *m, double wall, const char *text) {
  if (!m->events) {
    m->events = calloc(RUNVIEW_EVENTS_MAX, sizeof *m->events);
    if (!m->events) return err_set(DRV_ENOMEM, "out of memory for dashboard events");
    m->capevents = RUNVIEW_EVENTS_MAX;
    m->nevents = m->events_head = 0;
  }
  runview_event *e;
  if (m->nevents < m->capevents) {
    e = &m->events[(m->events_head + m->nevents) % m->capevents];
    m->nevents++;
  } else {
    e = &m->events[m->events_head];
    m->events_head = (m->events_head + 1) % m->capevents;
  }
  e->wall = wall;
  snprintf(e->text, sizeof e->text, "%s", text);
  m->version++;
  return 0;
}

/* ============================== copies ================================== */

static int copy_series(runview_series *d, const runview_series *s) {
  *d = *s;
  d->pts = NULL;
  if (s->cap == 0) return 0;
  d->pts = malloc((size_t)s->cap * sizeof *d->pts);
  if (!d->pts) return err_set(DRV_ENOMEM, "out of memory for series '%s'", s->tag);
  memcpy(d->pts, s->pts, (size_t)s->cap * sizeof *d->pts);
  return 0;
}

/* An owned copy of n series (NULL for none) and its count, set as soon as
 * the array is there so that runview_free frees what a failure left. */
static int copy_series_array(runview_series **d, int *count, const runview_series *s, int n) {
  *d = NULL;
  *count = 0;
  if (n == 0) return 0;
  *d = calloc((size_t)n, sizeof **d);
  if (!*d) return err_set(DRV_ENOMEM, "out of memory for %d series", n);
  *count = n;
  for (int i = 0; i < n; i++)
    if (copy_series(&(*d)[i], &s[i]) < 0) return DRV_ENOMEM;
  return 0;
}

static void *dup_mem(const void *p, size_t n) {
  if (!p || n == 0) return NULL;
  void *q = malloc(n);
  if (q) memcpy(q, p, n);
  return q;
}

int runview_copy(runview *dst, const runview *src) {
  runview_free(dst);
  *dst = *src;
  dst->nodes = dup_mem(src->nodes, (size_t)src->capnodes * sizeof *src->nodes);
  dst->events = dup_mem(src->events, (size_t)src->capevents * sizeof *src->events);
  dst->throughput.pts = NULL;
  dst->metrics = dst->overlay = NULL;
  dst->nmetrics = dst->noverlay = 0; /* so that a failure frees what was copied */
  bool ok = (dst->nodes || !src->capnodes) && (dst->events || !src->capevents) &&
            copy_series(&dst->throughput, &src->throughput) == 0 &&
            copy_series_array(&dst->metrics, &dst->nmetrics, src->metrics, src->nmetrics) == 0 &&
            copy_series_array(&dst->overlay, &dst->noverlay, src->overlay, src->noverlay) == 0;
  if (!ok) {
    runview_free(dst);
    return err_set(DRV_ENOMEM, "out of memory copying the dashboard's model");
  }
  dst->capmetrics = src->nmetrics;
  return 0;
}

const runview_series *runview_overlay(const runview *m, const char *tag) {
  for (int i = 0; i < m->noverlay; i++)
    if (strcmp(m->overlay[i].tag, tag) == 0) return &m->overlay[i];
  return NULL;
}
