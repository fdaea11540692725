/* dash_view.c - one frame of the dashboard: the layout (small and large
 * terminals), the header and status lines, the node detail view, the help
 * overlay. Panels themselves are in dash_panels.c, the drawing primitives
 * both use in dash_draw.c. Draws on stdscr from the model and the view state
 * only; ncurses sends the terminal just the cells that changed.
 */
#include <curses.h>
#include <stdio.h>
#include <string.h>

#include "ui/dash_int.h"

/* ============================== header and status ======================== */

static void draw_header(dash_ui *ui, const runview *m, int cols) {
  unsigned long a = dash__role(ui, DASH_ROLE_HEADER);
  attrset((int)a);
  mvhline(0, 0, ' ', cols);
  char up[32], eta[32], rate[32];
  dash__fmt_dur(m->uptime, up, sizeof up);
  dash__fmt_dur(m->eta, eta, sizeof eta);
  dash_fmt_num(m->examples_per_sec, rate, sizeof rate);
  /* The pieces in screen order, each with a priority: on a narrow
   * terminal the least useful go first (0 always stays). */
  struct {
    int prio;
    char s[180];
  } p[12];
  int n = 0;
  snprintf(p[n].s, sizeof p[n].s, "drover %s", m->run[0] ? m->run : "-"), p[n++].prio = 0;
  snprintf(p[n].s, sizeof p[n].s, "%s", m->launcher[0] ? m->launcher : "-"), p[n++].prio = 7;
  if (m->tensorboard[0]) /* where to look at it all in a browser */
    snprintf(p[n].s, sizeof p[n].s, "tensorboard %s", m->tensorboard), p[n++].prio = 5;
  snprintf(p[n].s, sizeof p[n].s, "%s", m->state[0] ? m->state : "-"), p[n++].prio = 1;
  snprintf(p[n].s, sizeof p[n].s, "up %s", up), p[n++].prio = 5;
  if (m->total_steps > 0)
    snprintf(p[n].s, sizeof p[n].s, "step %lld/%lld %d%%", (long long)m->step, (long long)m->total_steps,
             (int)(100.0 * (double)m->step / (double)m->total_steps));
  else
    snprintf(p[n].s, sizeof p[n].s, "step %lld", (long long)m->step);
  p[n++].prio = 0;
  snprintf(p[n].s, sizeof p[n].s, "%s ex/s", rate), p[n++].prio = 2;
  if (m->feed_per_sec >= 0) { /* a feed runs: what it delivers */
    char fr[32];
    dash_fmt_num(m->feed_per_sec, fr, sizeof fr);
    snprintf(p[n].s, sizeof p[n].s, "feed %s b/s", fr), p[n++].prio = 2;
  }
  snprintf(p[n].s, sizeof p[n].s, "ETA %s", eta), p[n++].prio = 3;
  if (m->mode[0]) snprintf(p[n].s, sizeof p[n].s, "%s", m->mode), p[n++].prio = 4;
  snprintf(p[n].s, sizeof p[n].s, "%d attached", m->attach_clients), p[n++].prio = m->attach_clients ? 4 : 6;
  int keep = 7;
  for (; keep > 0; keep--) {
    int len = 0;
    for (int i = 0; i < n; i++)
      if (p[i].prio <= keep) len += (int)strlen(p[i].s) + 2;
    if (len < cols) break;
  }
  int x = 1;
  for (int i = 0; i < n && x < cols; i++)
    if (p[i].prio <= keep) x += dash__put(0, x, cols - x, a, p[i].s) + 2;
}

/* The end banner, then any message of the moment after it: a message
 * (a key's, the theme's name for the first seconds) never hides that the
 * run is over, even one that stays until the next (a command's reply). */
static void draw_banner(dash_ui *ui, const runview *m, int row, int lw, unsigned long a,
                        unsigned long pa) {
  int w = dash__putf(row, 0, lw, pa, " %s", m->banner);
  if (ui->status[0] && ui->now < ui->status_until && w + 4 < lw)
    dash__putf(row, w, lw - w, a, "   %s", ui->status);
}

static void draw_status(dash_ui *ui, const runview *m, int row, int cols) {
  unsigned long a = dash__role(ui, DASH_ROLE_STATUS), pa = dash__role(ui, DASH_ROLE_PROMPT);
  attrset((int)a);
  mvhline(row, 0, ' ', cols);
  char right[160];
  snprintf(right, sizeof right, " theme %s  smooth %.2f  y %s  x %s ",
           ui->nthemes ? ui->themes[ui->theme] : "-", ui->smoothing, ui->logy ? "log" : "lin",
           ui->wall_x ? "wall" : "step");
  int rw = (int)strlen(right);
  int lw = cols - rw - 1;
  if (lw < cols / 2) {
    lw = cols; /* no room: the left part only */
    rw = 0;
  }
  switch (ui->mode) {
  case DASH_MODE_FILTER:
    dash__putf(row, 0, lw, pa, " filter: %s_  (Enter keeps, Esc cancels)", ui->line);
    break;
  case DASH_MODE_COMMAND:
    dash__putf(row, 0, lw, pa, " :%s_", ui->line);
    break;
  case DASH_MODE_CONFIRM:
    dash__putf(row, 0, lw, pa, " stop %s? %s%s(y/n)", ui->confirm, ui->plan,
               ui->plan[0] ? " " : "");
    break;
  default:
    if (m->banner[0]) /* the run is over: said where the keys were, first */
      draw_banner(ui, m, row, lw, a, pa);
    else if (ui->status[0] && ui->now < ui->status_until)
      dash__putf(row, 0, lw, a, " %s", ui->status);
    else if (ui->mode == DASH_MODE_DETAIL)
      dash__put(row, 0, lw, a, " Esc back  k stop this node  ? help");
    else
      dash__putf(row, 0, lw, a, " ? help  q quit  / filter%s%s  s sort  Enter detail  t theme",
                 ui->filter[0] ? ": " : "", ui->filter);
  }
  if (rw) dash__put(row, cols - rw, rw, a, right);
}

/* ============================== detail view ============================== */

/* Asks the source for the node's log tail now and then (once a second, or
 * every frame while its answer is on the way). */
static void refresh_log(dash_ui *ui, const runview_node *n) {
  if (ui->log_read_at >= 0 && ui->now - ui->log_read_at < 1 &&
      strcmp(ui->log_node, n->name) == 0)
    return;
  snprintf(ui->log_node, sizeof ui->log_node, "%s", n->name);
  if (!ui->src.log_tail) {
    snprintf(ui->log, sizeof ui->log, "(this source has no node logs)");
    ui->log_read_at = ui->now;
    return;
  }
  int rc = ui->src.log_tail(ui->src.ud, n->name, ui->log, sizeof ui->log);
  ui->log_read_at = rc == DASH_LOG_PENDING ? -1 : ui->now;
}

static void draw_detail(dash_ui *ui, const runview *m, int y, int h, int cols) {
  unsigned long text = dash__role(ui, DASH_ROLE_TEXT), dim = dash__role(ui, DASH_ROLE_DIM);
  unsigned long focus = dash__role(ui, DASH_ROLE_FOCUS), border = dash__role(ui, DASH_ROLE_BORDER);
  const runview_node *n = runview_find_node(m, ui->detail);
  char title[64];
  snprintf(title, sizeof title, "node %s", ui->detail);
  int fh = 9;
  dash__box(y, 0, fh, cols, focus, title, focus);
  if (!n) {
    dash__put(y + 1, 2, cols - 4, dash__role(ui, DASH_ROLE_BAD), "this node is no longer in the run");
    return;
  }
  char rate[32], rss[32], hb[32], cpu[32], bl[32];
  dash_fmt_num(n->examples_per_sec, rate, sizeof rate);
  dash__fmt_bytes(n->rss, rss, sizeof rss);
  if (n->heartbeat_age >= 0) snprintf(hb, sizeof hb, "%.1fs ago", n->heartbeat_age);
  else snprintf(hb, sizeof hb, "-");
  if (n->cpu_pct >= 0) snprintf(cpu, sizeof cpu, "%.0f%%", n->cpu_pct);
  else snprintf(cpu, sizeof cpu, "-");
  if (n->backlog >= 0) snprintf(bl, sizeof bl, "%lld", (long long)n->backlog);
  else snprintf(bl, sizeof bl, "-");
  int cw = (cols - 4) / 2;
  dash__put(y + 1, 2, 8, dim, "state");
  dash__put(y + 1, 12, cw - 10, dash__role(ui, dash_state_role(n->state)), n->state);
  dash__put(y + 2, 2, 8, dim, "host");
  dash__putf(y + 2, 12, cw - 10, text, "%s  pid %d%s%s", n->host, n->pid,
             n->where[0] ? "  " : "", n->where);
  dash__put(y + 3, 2, 8, dim, "steps");
  dash__putf(y + 3, 12, cw - 10, text, "%lld  (%s ex/s)", (long long)n->steps, rate);
  dash__put(y + 4, 2, 8, dim, "restarts");
  dash__putf(y + 4, 12, cw - 10, n->restarts ? dash__role(ui, DASH_ROLE_WARN) : text, "%d",
             n->restarts);
  dash__put(y + 1, 2 + cw, 10, dim, "cpu");
  dash__put(y + 1, 12 + cw, cw - 10, text, cpu);
  dash__put(y + 2, 2 + cw, 10, dim, "rss");
  dash__put(y + 2, 12 + cw, cw - 10, text, rss);
  dash__put(y + 3, 2 + cw, 10, dim, "heartbeat");
  dash__put(y + 3, 12 + cw, cw - 10, text, hb);
  dash__put(y + 4, 2 + cw, 10, dim, "in flight");
  dash__putf(y + 4, 12 + cw, cw - 10, text, "%d  backlog %s", n->inflight, bl);
  dash__put(y + 5, 2, 8, dim, "got");
  dash__put(y + 5, 12, cols - 14, text, n->got[0] ? n->got : "-");
  dash__put(y + 6, 2, 8, dim, "links");
  dash__put(y + 6, 12, cols - 14, text, n->links[0] ? n->links : "-");
  dash__put(y + 7, 2, 8, dim, "log");
  dash__put(y + 7, 12, cols - 14, text, n->log[0] ? n->log : "-");

  refresh_log(ui, n);
  int lh = h - fh;
  if (lh < 3) return;
  dash__box(y + fh, 0, lh, cols, border, "log (newest last)", dash__role(ui, DASH_ROLE_TITLE));
  /* The last lines that fit, newest at the bottom. */
  int room = lh - 2, nl = 0;
  const char *starts[DASH_LOG_LINES + 1];
  const char *end = ui->log + strlen(ui->log);
  if (end > ui->log && end[-1] == '\n') end--;
  const char *p = end;
  while (nl < room && nl < DASH_LOG_LINES) {
    const char *q = p;
    while (q > ui->log && q[-1] != '\n') q--;
    starts[nl++] = q;
    if (q == ui->log) break;
    p = q - 1;
  }
  for (int i = 0; i < nl; i++) {
    const char *s = starts[nl - 1 - i];
    const char *e = strchr(s, '\n');
    char line[512];
    snprintf(line, sizeof line, "%.*s", (int)((e && e < end ? e : end) - s), s);
    dash__put(y + fh + 1 + i, 2, cols - 4, text, line);
  }
}

/* ============================== help overlay ============================= */

static void draw_help(dash_ui *ui, int rows, int cols) {
  const char *const *keys, *const *helps;
  int n = dash_input_help(&keys, &helps);
  int w = cols - 4 < 76 ? cols - 4 : 76;
  int h = n + 6 < rows - 2 ? n + 6 : rows - 2;
  int y = (rows - h) / 2, x = (cols - w) / 2;
  unsigned long text = dash__role(ui, DASH_ROLE_TEXT), key = dash__role(ui, DASH_ROLE_TITLE);
  attrset((int)text);
  for (int i = 0; i < h; i++) mvhline(y + i, x, ' ', w);
  dash__box(y, x, h, w, dash__role(ui, DASH_ROLE_FOCUS), "keys - any key closes this help",
            dash__role(ui, DASH_ROLE_FOCUS));
  int line = 0;
  for (int i = 0; i < n && line < h - 4; i++, line++) {
    dash__put(y + 1 + line, x + 2, 12, key, keys[i]);
    dash__put(y + 1 + line, x + 15, w - 17, text, helps[i]);
  }
  char themes[256] = "";
  for (int i = 0; i < ui->nthemes; i++) {
    size_t l = strlen(themes);
    snprintf(themes + l, sizeof themes - l, "%s%s", i ? " " : "", ui->themes[i]);
  }
  dash__putf(y + h - 3, x + 2, w - 4, dash__role(ui, DASH_ROLE_DIM), "themes: %s", themes);
  dash__put(y + h - 2, x + 2, w - 4, dash__role(ui, DASH_ROLE_DIM),
            "charts: raw values dim, smoothed bright (TensorBoard's EMA)");
}

/* ============================== the frame ================================ */

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

static void draw_body(dash_ui *ui, const runview *m, int y, int h, int cols) {
  bool large = cols >= 120 && h >= 34;
  if (!large) {
    dash__queue_line(ui, m, y, cols);
    y++;
    h--;
  }
  int ev_h = large ? clampi(h / 5, 5, 12) : clampi(h / 6, 4, 8);
  int ch_h = large ? clampi(h * 2 / 5, 8, 30) : clampi(h * 2 / 5, 6, 14);
  int nodes_h = h - ev_h - ch_h;
  int need = clampi(ui->nrows + 3, 5, 1000);
  int ntables = 0; /* each takes two lines of the queue box, and a title */
  for (const char *l = m->tables; *l; l++) ntables += *l == '\n';
  int qneed = 12 + (ntables ? 2 + 2 * ntables : 0);
  if (large && need < qneed) need = qneed; /* room for the queue box beside it */
  if (nodes_h > need) { /* the rest goes to the charts */
    ch_h += nodes_h - need;
    nodes_h = need;
  } else if (nodes_h < 5) {
    ch_h -= 5 - nodes_h;
    nodes_h = 5;
  }
  int qw = large ? 30 : 0;
  dash__nodes(ui, m, y, 0, nodes_h, cols - qw);
  if (large) dash__queue_box(ui, m, y, cols - qw, nodes_h, qw);
  dash__charts(ui, m, y + nodes_h, 0, ch_h, cols, large);
  dash__events(ui, m, y + nodes_h + ch_h, 0, ev_h, cols);
}

void dash_view_draw(dash_ui *ui, const runview *m, int rows, int cols) {
  bkgdset((chtype)(' ' | dash__role(ui, DASH_ROLE_BACKGROUND)));
  erase();
  if (cols < DASH_MIN_W || rows < DASH_MIN_H) {
    char msg[80];
    snprintf(msg, sizeof msg, "terminal too small (need %d%s%d)", DASH_MIN_W,
             ui->utf8 ? "\xc3\x97" : "x", DASH_MIN_H);
    int len = (int)strlen(msg) - (ui->utf8 ? 1 : 0);
    int x = cols > len ? (cols - len) / 2 : 0;
    dash__put(rows / 2, x, cols, dash__role(ui, DASH_ROLE_TEXT), msg);
    return;
  }
  dash_view_rows(ui, m);
  draw_header(ui, m, cols);
  if (ui->mode == DASH_MODE_DETAIL || (ui->mode != DASH_MODE_NORMAL && ui->detail[0]))
    draw_detail(ui, m, 1, rows - 2, cols);
  else
    draw_body(ui, m, 1, rows - 2, cols);
  if (ui->mode == DASH_MODE_HELP) draw_help(ui, rows, cols);
  draw_status(ui, m, rows - 1, cols);
}
