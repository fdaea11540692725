/* dash_model_tmp.c - TEMPORARY stand-in for dash_model.c (the dashboard
 * branch owns the real one): just enough of dash_model.h for the data side
 * (coord_dash.c, dash_snap.c, attach.c) to link and be tested. Rings drop
 * their oldest entry when full. The lead deletes this file at the merge.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dash_model.h"
#include "err.h"

void dash_model_init(dash_model *m) {
  memset(m, 0, sizeof *m);
  snprintf(m->throughput.tag, sizeof m->throughput.tag, "examples/s");
  m->eta = -1;
}

void dash_model_free(dash_model *m) {
  if (!m) return;
  free(m->nodes);
  free(m->throughput.pts);
  for (int i = 0; i < m->nmetrics; i++) free(m->metrics[i].pts);
  free(m->metrics);
  free(m->events);
  memset(m, 0, sizeof *m);
}

static dash_series *find(dash_model *m, const char *tag) {
  if (strcmp(tag, "examples/s") == 0) return &m->throughput;
  for (int i = 0; i < m->nmetrics; i++)
    if (strcmp(m->metrics[i].tag, tag) == 0) return &m->metrics[i];
  return NULL;
}

const dash_series *dash_model_series(const dash_model *m, const char *tag) {
  return find((dash_model *)m, tag);
}

int dash_model_add_point(dash_model *m, const char *tag, dash_point p) {
  dash_series *s = find(m, tag);
  if (!s) {
    if (m->nmetrics == m->capmetrics) {
      int cap = m->capmetrics ? 2 * m->capmetrics : 8;
      dash_series *ns = realloc(m->metrics, (size_t)cap * sizeof *ns);
      if (!ns) return drv_error(DRV_ENOMEM, "out of memory");
      m->metrics = ns;
      m->capmetrics = cap;
    }
    s = &m->metrics[m->nmetrics++];
    memset(s, 0, sizeof *s);
    snprintf(s->tag, sizeof s->tag, "%s", tag);
  }
  if (!s->pts) {
    s->pts = malloc(DASH_SERIES_MAX * sizeof *s->pts);
    if (!s->pts) return drv_error(DRV_ENOMEM, "out of memory");
    s->cap = DASH_SERIES_MAX;
    s->n = s->head = 0;
  }
  if (s->n < s->cap) {
    s->pts[(s->head + s->n) % s->cap] = p;
    s->n++;
  } else {
    s->pts[s->head] = p;
    s->head = (s->head + 1) % s->cap;
  }
  m->version++;
  return 0;
}

int dash_model_add_event(dash_model *m, double wall, const char *text) {
  if (!m->events) {
    m->events = calloc(DASH_EVENTS_MAX, sizeof *m->events);
    if (!m->events) return drv_error(DRV_ENOMEM, "out of memory");
    m->capevents = DASH_EVENTS_MAX;
  }
  dash_event *e;
  if (m->nevents < m->capevents) {
    e = &m->events[(m->events_head + m->nevents++) % m->capevents];
  } else {
    e = &m->events[m->events_head];
    m->events_head = (m->events_head + 1) % m->capevents;
  }
  e->wall = wall;
  snprintf(e->text, sizeof e->text, "%s", text);
  m->version++;
  return 0;
}
