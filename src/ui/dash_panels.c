/* dash_panels.c - the dashboard's panels, each drawn into a rectangle of
 * stdscr: the nodes table (filtered, sorted, coloured by state), the task
 * queue, the charts (throughput and one per metric tag) and the events.
 */
#include <curses.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/nodestate.h"
#include "ui/dash_int.h"

/* ============================== node rows ================================ */

int dash_state_role(const char *s) {
  switch (nodestate_tone_of(s)) {
  case NODESTATE_BAD: return DASH_ROLE_BAD;
  case NODESTATE_WARN: return DASH_ROLE_WARN;
  case NODESTATE_BUSY: return DASH_ROLE_BUSY;
  case NODESTATE_OK: return DASH_ROLE_OK;
  default: return DASH_ROLE_TEXT;
  }
}

bool dash_node_matches(const runview_node *n, const char *f) {
  return !f[0] || strstr(n->name, f) || strstr(n->host, f) || strstr(n->state, f) ||
         strstr(n->where, f);
}

const char *dash_sort_name(int sort) {
  static const char *const names[DASH_NSORTS] = {
      "run order", "name", "state", "steps", "examples/s", "cpu", "rss", "heartbeat age", "restarts"};
  return sort >= 0 && sort < DASH_NSORTS ? names[sort] : "?";
}

static int cmp3(double a, double b) { return a < b ? -1 : a > b ? 1 : 0; }

typedef struct sort_ctx {
  const runview_node *nodes;
  int sort;
} sort_ctx;

static int cmp_nodes(const void *pa, const void *pb, void *arg) {
  const sort_ctx *ctx = arg;
  int ia = *(const int *)pa, ib = *(const int *)pb;
  const runview_node *a = &ctx->nodes[ia], *b = &ctx->nodes[ib];
  int c = 0;
  switch (ctx->sort) {
  case DASH_SORT_NAME: c = a->role != b->role ? a->role - b->role : a->index - b->index; break;
  case DASH_SORT_STATE: c = nodestate_rank(a->state) - nodestate_rank(b->state); break; /* worst first */
  /* numbers: the most first */
  case DASH_SORT_STEPS: c = cmp3((double)b->steps, (double)a->steps); break;
  case DASH_SORT_RATE: c = cmp3(b->examples_per_sec, a->examples_per_sec); break;
  case DASH_SORT_CPU: c = cmp3(b->cpu_pct, a->cpu_pct); break;
  case DASH_SORT_RSS: c = cmp3((double)b->rss, (double)a->rss); break;
  case DASH_SORT_HEARTBEAT: c = cmp3(b->heartbeat_age, a->heartbeat_age); break;
  case DASH_SORT_RESTARTS: c = b->restarts - a->restarts; break;
  default: break;
  }
  return c ? c : ia - ib; /* stable: run order breaks ties */
}

void dash_view_rows(dash_ui *ui, const runview *m) {
  if (m->nnodes > ui->caprows) {
    int *r = realloc(ui->rows, (size_t)m->nnodes * sizeof *r);
    if (!r) return; /* keep the old rows; the next frame tries again */
    ui->rows = r;
    ui->caprows = m->nnodes;
  }
  ui->nrows = 0;
  for (int i = 0; i < m->nnodes; i++)
    if (dash_node_matches(&m->nodes[i], ui->filter)) ui->rows[ui->nrows++] = i;
  if (ui->sort != DASH_SORT_NONE) {
    sort_ctx ctx = {m->nodes, ui->sort};
    qsort_r(ui->rows, (size_t)ui->nrows, sizeof *ui->rows, cmp_nodes, &ctx);
  }
  /* The selection follows its node through re-sorting. */
  if (ui->sel_name[0])
    for (int i = 0; i < ui->nrows; i++)
      if (strcmp(m->nodes[ui->rows[i]].name, ui->sel_name) == 0) {
        ui->sel = i;
        break;
      }
  if (ui->sel >= ui->nrows) ui->sel = ui->nrows - 1;
  if (ui->sel < 0) ui->sel = 0;
  if (ui->nrows) snprintf(ui->sel_name, sizeof ui->sel_name, "%s", m->nodes[ui->rows[ui->sel]].name);
}

/* ============================== nodes table ============================== */

enum { C_NODE, C_HOST, C_PID, C_STATE, C_RST, C_STEPS, C_RATE, C_CPU, C_RSS, C_HB, C_INFL, C_BKLG,
       C_WHERE, NCOLS };

/* Columns in screen order; `prio` decides which go first when narrow
 * (0 always shown). */
static const struct column {
  const char *title;
  int width;
  bool right;
  int prio;
} columns[NCOLS] = {
    [C_NODE] = {"NODE", 12, false, 0},   [C_HOST] = {"HOST", 15, false, 4},
    [C_PID] = {"PID", 7, true, 5},       [C_STATE] = {"STATE", 10, false, 0},
    [C_RST] = {"RST", 3, true, 2},       [C_STEPS] = {"STEPS", 8, true, 1},
    [C_RATE] = {"EX/S", 7, true, 1},     [C_CPU] = {"CPU%", 5, true, 2},
    [C_RSS] = {"RSS", 6, true, 3},       [C_HB] = {"HB", 5, true, 2},
    [C_INFL] = {"INFL", 4, true, 3},     [C_BKLG] = {"BKLG", 5, true, 6},
    /* last: the launcher and place ("yarn container_... @ h") of a mixed
     * cluster, where the width allows; the detail view always has it */
    [C_WHERE] = {"WHERE", 30, false, 7},
};

static void cell(const runview_node *n, int c, char *b, size_t sz) {
  switch (c) {
  case C_NODE: snprintf(b, sz, "%s", n->name); break;
  case C_HOST: snprintf(b, sz, "%s", n->host); break;
  case C_WHERE: snprintf(b, sz, "%s", n->where[0] ? n->where : "-"); break;
  case C_PID: snprintf(b, sz, n->pid > 0 ? "%d" : "-", n->pid); break;
  case C_STATE: snprintf(b, sz, "%s", n->state); break;
  case C_RST: snprintf(b, sz, "%d", n->restarts); break;
  case C_STEPS: dash_fmt_num((double)n->steps, b, (int)sz); break;
  case C_RATE: dash_fmt_num(n->examples_per_sec, b, (int)sz); break;
  case C_CPU:
    if (n->cpu_pct >= 0) snprintf(b, sz, "%.0f", n->cpu_pct);
    else snprintf(b, sz, "-");
    break;
  case C_RSS: dash__fmt_bytes(n->rss, b, sz); break;
  case C_HB:
    if (n->heartbeat_age >= 0) snprintf(b, sz, n->heartbeat_age < 10 ? "%.1fs" : "%.0fs", n->heartbeat_age);
    else snprintf(b, sz, "-");
    break;
  case C_INFL: snprintf(b, sz, "%d", n->inflight); break;
  case C_BKLG:
    if (n->backlog >= 0) snprintf(b, sz, "%lld", (long long)n->backlog);
    else snprintf(b, sz, "-");
    break;
  default: b[0] = '\0';
  }
}

/* Which columns fit in w: the highest priority level whose columns all fit. */
static int pick_columns(int w, int node_w, bool show[NCOLS]) {
  for (int p = 7; p >= 0; p--) {
    int total = 0;
    for (int c = 0; c < NCOLS; c++)
      if (columns[c].prio <= p) total += (c == C_NODE ? node_w : columns[c].width) + 1;
    if (total <= w || p == 0) {
      for (int c = 0; c < NCOLS; c++) show[c] = columns[c].prio <= p;
      return total;
    }
  }
  return 0;
}

void dash__nodes(dash_ui *ui, const runview *m, int y, int x, int h, int w) {
  bool focus = ui->panel == DASH_PANEL_NODES;
  unsigned long border = dash__role(ui, focus ? DASH_ROLE_FOCUS : DASH_ROLE_BORDER);
  char title[160];
  snprintf(title, sizeof title, "nodes %d/%d  sort: %s%s%s", ui->nrows, m->nnodes,
           dash_sort_name(ui->sort), ui->filter[0] ? "  filter: " : "", ui->filter);
  dash__box(y, x, h, w, border, title, dash__role(ui, focus ? DASH_ROLE_FOCUS : DASH_ROLE_TITLE));
  int node_w = 8;
  for (int i = 0; i < m->nnodes; i++) {
    int l = (int)strlen(m->nodes[i].name);
    if (l > node_w) node_w = l;
  }
  if (node_w > 16) node_w = 16;
  bool show[NCOLS];
  pick_columns(w - 3, node_w, show);
  int visible = h - 3;
  if (visible < 1) return;
  ui->page_rows = visible;
  if (ui->sel < ui->top) ui->top = ui->sel;
  if (ui->sel >= ui->top + visible) ui->top = ui->sel - visible + 1;
  if (ui->top > ui->nrows - visible) ui->top = ui->nrows - visible;
  if (ui->top < 0) ui->top = 0;

  unsigned long dim = dash__role(ui, DASH_ROLE_DIM), text = dash__role(ui, DASH_ROLE_TEXT);
  unsigned long sel = dash__role(ui, DASH_ROLE_SELECTED);
  int cx = x + 2;
  for (int c = 0; c < NCOLS; c++) {
    if (!show[c]) continue;
    int cw = c == C_NODE ? node_w : columns[c].width;
    dash__putf(y + 1, cx, cw, dim, columns[c].right ? "%*s" : "%-*s", cw, columns[c].title);
    cx += cw + 1;
  }
  if (ui->nrows == 0) {
    dash__put(y + 2, x + 2, w - 4, dim, m->nnodes ? "(no node matches the filter)" : "(no nodes yet)");
    return;
  }
  for (int r = 0; r < visible && ui->top + r < ui->nrows; r++) {
    const runview_node *n = &m->nodes[ui->rows[ui->top + r]];
    bool is_sel = ui->top + r == ui->sel;
    int row = y + 2 + r;
    if (is_sel) {
      attrset((int)sel);
      mvhline(row, x + 1, ' ', w - 2);
    }
    cx = x + 2;
    for (int c = 0; c < NCOLS; c++) {
      if (!show[c]) continue;
      int cw = c == C_NODE ? node_w : columns[c].width;
      char v[sizeof n->where];
      cell(n, c, v, sizeof v);
      unsigned long a = text;
      if (is_sel) a = sel;
      else if (c == C_STATE) a = dash__role(ui, dash_state_role(n->state));
      else if (c == C_HB && n->heartbeat_age >= 5) a = dash__role(ui, DASH_ROLE_WARN);
      else if (c == C_RST && n->restarts > 0) a = dash__role(ui, DASH_ROLE_WARN);
      else if (c == C_HOST || c == C_PID) a = dim;
      dash__putf(row, cx, cw, a, columns[c].right ? "%*s" : "%-*s", cw, v);
      cx += cw + 1;
    }
  }
  if (ui->nrows > visible) /* where the window is in a long table */
    dash__putf(y + h - 1, x + w - 16, 14, border, " %d-%d/%d ", ui->top + 1,
               ui->top + visible < ui->nrows ? ui->top + visible : ui->nrows, ui->nrows);
}

/* ============================== queue ==================================== */

/* Table i of m->tables ("NAME ROWS DIM HELD TOUCHED BYTES" lines): the
 * figures as the panels show them; false past the last. */
typedef struct table_fig {
  char name[64], held[16], touched[16], bytes[16];
} table_fig;

static bool table_at(const runview *m, int i, table_fig *t) {
  const char *l = m->tables;
  for (int k = 0; k < i && l; k++) l = (l = strchr(l, '\n')) ? l + 1 : NULL;
  unsigned long long rows, dim, held;
  double touched, bytes;
  if (!l || sscanf(l, "%63s %llu %llu %llu %lf %lf", t->name, &rows, &dim, &held, &touched,
                   &bytes) != 6)
    return false;
  dash_fmt_num((double)held, t->held, sizeof t->held);
  dash_fmt_num(touched, t->touched, sizeof t->touched);
  dash__fmt_bytes((uint64_t)bytes, t->bytes, sizeof t->bytes);
  return true;
}

void dash__queue_line(dash_ui *ui, const runview *m, int y, int w) {
  unsigned long text = dash__role(ui, DASH_ROLE_TEXT);
  char buf[384];
  int k = snprintf(buf, sizeof buf,
           " queue %lld/%lld  in flight %lld  done %lld  failed %lld  retried %lld  cancelled %lld",
           (long long)m->queued, (long long)m->capacity, (long long)m->running, (long long)m->done,
           (long long)m->failed, (long long)m->retried, (long long)m->cancelled);
  table_fig t;
  for (int i = 0; table_at(m, i, &t) && k > 0 && (size_t)k < sizeof buf; i++)
    k += snprintf(buf + k, sizeof buf - (size_t)k, "  table %s: %s held %s rows/step %s/step",
                  t.name, t.held, t.touched, t.bytes);
  dash__put(y, 0, w, m->failed ? dash__role(ui, DASH_ROLE_WARN) : text, buf);
}

/* The sparse tables under the queue's rows, while there is room: per
 * table its name, then rows held (on the ps), rows and bytes a step. */
static int table_rows(dash_ui *ui, const runview *m, int r, int x, int bottom, int iw) {
  unsigned long text = dash__role(ui, DASH_ROLE_TEXT), dim = dash__role(ui, DASH_ROLE_DIM);
  table_fig t;
  if (!table_at(m, 0, &t) || r + 2 >= bottom) return r;
  dash__put(++r, x + 2, iw, dim, "tables (held  rows/step  bytes/step)");
  r++;
  for (int i = 0; table_at(m, i, &t) && r + 1 < bottom; i++) {
    dash__put(r++, x + 2, iw, dim, t.name);
    dash__putf(r++, x + 4, iw - 2, text, "%s  %s  %s", t.held, t.touched, t.bytes);
  }
  return r;
}

void dash__queue_box(dash_ui *ui, const runview *m, int y, int x, int h, int w) {
  unsigned long text = dash__role(ui, DASH_ROLE_TEXT), dim = dash__role(ui, DASH_ROLE_DIM);
  dash__box(y, x, h, w, dash__role(ui, DASH_ROLE_BORDER), "queue", dash__role(ui, DASH_ROLE_TITLE));
  struct {
    const char *name;
    int64_t v;
    int role;
  } rows[] = {{"in flight", m->running, DASH_ROLE_TEXT}, {"done", m->done, DASH_ROLE_TEXT},
              {"failed", m->failed, m->failed ? DASH_ROLE_BAD : DASH_ROLE_TEXT},
              {"retried", m->retried, m->retried ? DASH_ROLE_WARN : DASH_ROLE_TEXT},
              {"cancelled", m->cancelled, DASH_ROLE_TEXT}};
  int r = y + 1, iw = w - 4;
  if (r < y + h - 1) {
    dash__put(r, x + 2, 10, dim, "queued");
    dash__putf(r++, x + 12, iw - 10, text, "%lld / %lld", (long long)m->queued, (long long)m->capacity);
  }
  for (size_t i = 0; i < sizeof rows / sizeof rows[0] && r < y + h - 1; i++, r++) {
    dash__put(r, x + 2, 10, dim, rows[i].name);
    dash__putf(r, x + 12, iw - 10, dash__role(ui, rows[i].role), "%lld", (long long)rows[i].v);
  }
  r = table_rows(ui, m, r, x, y + h - 1, iw);
  /* Per-worker input backlog, as bars, while there is room. */
  int64_t most = 0;
  for (int i = 0; i < m->nnodes; i++)
    if (m->nodes[i].backlog > most) most = m->nodes[i].backlog;
  if (r + 1 >= y + h - 1) return;
  bool any = false;
  for (int i = 0; i < m->nnodes; i++) any |= m->nodes[i].backlog >= 0;
  if (!any) return;
  dash__put(++r, x + 2, iw, dim, "input backlog");
  r++;
  for (int i = 0; i < m->nnodes && r < y + h - 1; i++) {
    const runview_node *n = &m->nodes[i];
    if (n->backlog < 0) continue;
    dash__put(r, x + 2, 11, dim, n->name);
    int bw = iw - 16, len = most > 0 ? (int)((double)bw * (double)n->backlog / (double)most + 0.5) : 0;
    char bar[128];
    int k = 0;
    for (int j = 0; j < len && k < (int)sizeof bar - 4; j++) {
      if (ui->utf8) {
        memcpy(bar + k, "\xe2\x96\x88", 3); /* full block */
        k += 3;
      } else {
        bar[k++] = '#';
      }
    }
    bar[k] = '\0';
    dash__put(r, x + 13, bw, dash__role(ui, DASH_ROLE_CHART_SMOOTH), bar);
    dash__putf(r++, x + 13 + bw, 4, text, "%3lld", (long long)n->backlog);
  }
}

/* ============================== charts =================================== */

/* An axis value in at most 7 columns, with the decimals the range needs
 * to tell its labels apart (0.04998 and 0.05000 rather than 0.05 twice). */
static void axis_label(double v, const dash_range *r, bool log, char *out, int n) {
  if (log) { /* 2.29e-5, not 2.287e- cut off */
    dash_fmt_fit(pow(10, v), 7, out, n);
    return;
  }
  if (fabs(v) >= 1e5) {
    dash_fmt_num(v, out, n);
    return;
  }
  double span = r->hi - r->lo;
  if (span > 0 && span < 1e-4) { /* a loss near zero: 3.1e-7, not 0.00000 */
    dash_fmt_fit(v, 7, out, n);
    return;
  }
  int d = span > 0 ? 2 - (int)floor(log10(span)) : 3;
  if (d < 0) d = 0;
  for (; d > 6 || (d > 0 && snprintf(out, (size_t)n, "%.*f", d, v) > 7); d--) {
  }
  if (snprintf(out, (size_t)n, "%.*f", d, v) > 7) dash_fmt_num(v, out, n);
}

static void x_label(double v, bool wall, char *out, size_t n) {
  if (wall) dash__fmt_dur(v, out, n);
  else dash_fmt_num(v, out, (int)n);
}

/* One chart in a box: y labels on the left, x labels below, current
 * (smoothed), min and max in the bottom border. */
static void draw_chart(dash_ui *ui, dash_canvas *c, const runview_series *s, const runview_series *over,
                       const char *title, bool wall_x, int y, int x, int h, int w, bool focus) {
  unsigned long border = dash__role(ui, focus ? DASH_ROLE_FOCUS : DASH_ROLE_BORDER);
  unsigned long axis = dash__role(ui, DASH_ROLE_AXIS);
  dash__box(y, x, h, w, border, title, dash__role(ui, focus ? DASH_ROLE_FOCUS : DASH_ROLE_TITLE));
  const int lw = 8; /* a label of 7 characters and a space */
  int cw = w - 2 - lw, chh = h - 3;
  if (cw < 4 || chh < 1) return;
  if ((!s || s->n == 0) && (!over || over->n == 0)) {
    dash__put(y + 1 + chh / 2, x + 1 + lw + (cw > 13 ? (cw - 13) / 2 : 0), cw, axis, "(no data yet)");
    return;
  }
  dash_chart_opts o = {ui->smoothing, ui->logy, wall_x};
  dash_chart_stats st;
  if (dash_canvas_resize(c, cw, chh, ui->utf8) < 0 ||
      (over ? dash_chart_plot_pair(s, over, &o, c, &st) : dash_chart_plot(s, &o, c, &st)) < 0)
    return;
  char lab[32];
  axis_label(st.y.hi, &st.y, ui->logy, lab, sizeof lab);
  dash__putf(y + 1, x + 1, lw - 1, axis, "%*s", lw - 1, lab);
  axis_label(st.y.lo, &st.y, ui->logy, lab, sizeof lab);
  dash__putf(y + chh, x + 1, lw - 1, axis, "%*s", lw - 1, lab);
  if (chh >= 5) {
    axis_label((st.y.hi + st.y.lo) / 2, &st.y, ui->logy, lab, sizeof lab);
    dash__putf(y + 1 + chh / 2, x + 1, lw - 1, axis, "%*s", lw - 1, lab);
  }
  char x0[32], x1[32];
  x_label(st.x0, wall_x, x0, sizeof x0);
  x_label(st.x1, wall_x, x1, sizeof x1);
  dash__put(y + h - 2, x + 1 + lw, cw, axis, x0);
  dash__putf(y + h - 2, x + w - 1 - (int)strlen(x1), (int)strlen(x1), axis, "%s", x1);

  unsigned long raw = dash__role(ui, DASH_ROLE_CHART_RAW), smooth = dash__role(ui, DASH_ROLE_CHART_SMOOTH);
  unsigned long cur = ~0ul;
  for (int cy = 0; cy < chh; cy++)
    for (int cx = 0; cx < cw; cx++) {
      char g[4];
      int layer = dash_canvas_glyph(c, cx, cy, g);
      if (layer < 0) continue;
      unsigned long a = layer == DASH_LAYER_SMOOTH ? smooth : raw;
      if (a != cur) attrset((int)(cur = a));
      mvaddstr(y + 1 + cy, x + 1 + lw + cx, g);
    }

  char vc[32], vs[32], vmin[32], vmax[32], stats[160];
  dash_fmt_num(st.cur, vc, sizeof vc);
  dash_fmt_num(st.cur_smooth, vs, sizeof vs);
  dash_fmt_num(st.min, vmin, sizeof vmin);
  dash_fmt_num(st.max, vmax, sizeof vmax);
  snprintf(stats, sizeof stats, " %s (~%s) min %s max %s ", vc, vs, vmin, vmax);
  int sl = (int)strlen(stats);
  if (sl <= w - 4) dash__put(y + h - 1, x + w - 2 - sl, sl, axis, stats);
  else if ((sl = (int)strlen(vs) + 2) <= w - 4) dash__putf(y + h - 1, x + w - 2 - sl, sl, axis, " %s ", vs);
}

void dash__charts(dash_ui *ui, const runview *m, int y, int x, int h, int w, bool large) {
  bool focus = ui->panel == DASH_PANEL_CHARTS;
  int tw = m->nmetrics ? (large ? w / 3 : w / 2) : w;
  draw_chart(ui, &ui->canvas[0], &m->throughput, NULL, "examples/s", true, y, x, h, tw, focus);
  if (!m->nmetrics) return;
  if (ui->chart_first > m->nmetrics - 1) ui->chart_first = m->nmetrics - 1;
  int mw = w - tw, min_w = large ? 40 : 30, min_h = large ? 9 : 6;
  int gcols = mw / min_w < 1 ? 1 : mw / min_w, grows = h / min_h < 1 ? 1 : h / min_h;
  int k = m->nmetrics - ui->chart_first;
  if (k > gcols * grows) k = gcols * grows;
  if (k > DASH_MAX_CHARTS) k = DASH_MAX_CHARTS;
  if (k < gcols) gcols = k;
  grows = (k + gcols - 1) / gcols;
  for (int i = 0; i < k; i++) {
    int gr = i / gcols, gc = i % gcols;
    /* the last row's charts share its width */
    int in_row = gr == grows - 1 ? k - gr * gcols : gcols;
    int cw = mw / in_row, cx = x + tw + gc * cw;
    if (gc == in_row - 1) cw = mw - gc * cw;
    int ch = h / grows, cy = y + gr * ch;
    if (gr == grows - 1) ch = h - gr * ch;
    const runview_series *s = &m->metrics[ui->chart_first + i];
    const runview_series *over = m->noverlay ? runview_overlay(m, s->tag) : NULL;
    char title[160], page[32] = "";
    if (i == 0 && (ui->chart_first > 0 || k < m->nmetrics))
      snprintf(page, sizeof page, "  [%d-%d/%d]", ui->chart_first + 1, ui->chart_first + k, m->nmetrics);
    /* two runs: the first bright, the second dim (the header names them) */
    snprintf(title, sizeof title, "%s%s%s", s->tag, m->noverlay ? "  bright 1st, dim 2nd" : "", page);
    draw_chart(ui, &ui->canvas[1 + i], s, m->noverlay ? over : NULL, title, ui->wall_x, cy, cx, ch, cw,
               focus);
  }
}

/* ============================== events =================================== */

static int event_role(const char *t) {
  if (strstr(t, "lost") || strstr(t, "fail") || strstr(t, "error")) return DASH_ROLE_BAD;
  if (strstr(t, "restart") || strstr(t, "retr") || strstr(t, "stopp")) return DASH_ROLE_WARN;
  if (strstr(t, "back") || strstr(t, "checkpoint") || strstr(t, "done")) return DASH_ROLE_OK;
  return DASH_ROLE_TEXT;
}

void dash__events(dash_ui *ui, const runview *m, int y, int x, int h, int w) {
  bool focus = ui->panel == DASH_PANEL_EVENTS;
  char title[64];
  if (ui->event_back > 0) snprintf(title, sizeof title, "events (%d back)", ui->event_back);
  else snprintf(title, sizeof title, "events");
  dash__box(y, x, h, w, dash__role(ui, focus ? DASH_ROLE_FOCUS : DASH_ROLE_BORDER), title,
            dash__role(ui, focus ? DASH_ROLE_FOCUS : DASH_ROLE_TITLE));
  int room = h - 2;
  if (ui->event_back > m->nevents - 1) ui->event_back = m->nevents > 0 ? m->nevents - 1 : 0;
  int last = m->nevents - 1 - ui->event_back; /* newest shown, at the bottom */
  int first = last - room + 1 < 0 ? 0 : last - room + 1;
  for (int i = first, r = 0; i <= last; i++, r++) {
    const runview_event *e = runview_event_at(m, i);
    char t[32];
    dash__fmt_dur(e->wall, t, sizeof t);
    int tw = dash__putf(y + 1 + r, x + 2, 10, dash__role(ui, DASH_ROLE_DIM), "%8s", t);
    dash__put(y + 1 + r, x + 3 + tw, w - 5 - tw, dash__role(ui, event_role(e->text)), e->text);
  }
  if (m->nevents == 0) dash__put(y + 1, x + 2, w - 4, dash__role(ui, DASH_ROLE_DIM), "(none yet)");
}
