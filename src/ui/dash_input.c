/* dash_input.c - the dashboard's keys: one table of bindings (key, what
 * the help overlay says, the action), actions that change the view state
 * and return what the driver must do (DASH_DO_*), and the prompt line's
 * modes (filter, command, confirmation). No drawing, no sockets: ':', 'k'
 * and '+'/'-' on a worker row go through the dash_source.
 */
#include <curses.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ui/dash_int.h"

#define KEY_ESC 27
#define CTRL_KEY(c) ((c) & 0x1f)
#define READ_ONLY "read-only: attach with --control to use ':' and 'k'"
#define READ_ONLY_SCALE "read-only: attach with --control to add or remove workers (+ -)"

/* ============================== the view state =========================== */

void dash_ui_init(dash_ui *ui, dash_source src) {
  memset(ui, 0, sizeof *ui);
  ui->src = src;
  ui->smoothing = DASH_SMOOTH_DEFAULT;
  ui->panel = DASH_PANEL_NODES;
  ui->page_rows = 10;
}

void dash_ui_free(dash_ui *ui) {
  free(ui->rows);
  for (int i = 0; i <= DASH_MAX_CHARTS; i++) dash_canvas_free(&ui->canvas[i]);
  ui->rows = NULL;
  ui->nrows = ui->caprows = 0;
}

void dash_ui_status(dash_ui *ui, double secs, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ui->status, sizeof ui->status, fmt, ap);
  va_end(ap);
  ui->status_until = ui->now + secs;
}

/* ============================== actions ================================== */

typedef int (*action)(dash_ui *ui, const runview *m);

static const runview_node *selected(const dash_ui *ui, const runview *m) {
  if (ui->nrows == 0 || ui->sel < 0 || ui->sel >= ui->nrows) return NULL;
  return &m->nodes[ui->rows[ui->sel]];
}

/* Moves the selection (nodes) or scrolls (charts, events) by d rows. */
static int shift(dash_ui *ui, const runview *m, int d) {
  if (ui->panel == DASH_PANEL_NODES) {
    if (ui->nrows == 0) return 0;
    int s = ui->sel + d;
    if (s < 0) s = 0;
    if (s >= ui->nrows) s = ui->nrows - 1;
    ui->sel = s;
    snprintf(ui->sel_name, sizeof ui->sel_name, "%s", m->nodes[ui->rows[s]].name);
  } else if (ui->panel == DASH_PANEL_CHARTS) {
    int f = ui->chart_first + (d > 0 ? 1 : d < 0 ? -1 : 0) * (abs(d) > 1 ? 4 : 1);
    if (f > m->nmetrics - 1) f = m->nmetrics - 1;
    ui->chart_first = f < 0 ? 0 : f;
  } else {
    /* events: up goes back in time */
    int b = ui->event_back - d;
    if (b > m->nevents - 1) b = m->nevents - 1;
    ui->event_back = b < 0 ? 0 : b;
  }
  return DASH_DO_REDRAW;
}

static int act_up(dash_ui *ui, const runview *m) { return shift(ui, m, -1); }
static int act_down(dash_ui *ui, const runview *m) { return shift(ui, m, 1); }
static int act_pgup(dash_ui *ui, const runview *m) { return shift(ui, m, -ui->page_rows); }
static int act_pgdn(dash_ui *ui, const runview *m) { return shift(ui, m, ui->page_rows); }
static int act_home(dash_ui *ui, const runview *m) { return shift(ui, m, -1000000); }
static int act_end(dash_ui *ui, const runview *m) { return shift(ui, m, 1000000); }

static int act_next_panel(dash_ui *ui, const runview *m) {
  (void)m;
  ui->panel = (ui->panel + 1) % DASH_NPANELS;
  return DASH_DO_REDRAW;
}

static int act_prev_panel(dash_ui *ui, const runview *m) {
  (void)m;
  ui->panel = (ui->panel + DASH_NPANELS - 1) % DASH_NPANELS;
  return DASH_DO_REDRAW;
}

static int act_help(dash_ui *ui, const runview *m) {
  (void)m;
  ui->mode = DASH_MODE_HELP;
  return DASH_DO_REDRAW;
}

static int act_quit(dash_ui *ui, const runview *m) {
  (void)ui, (void)m;
  return DASH_DO_QUIT;
}

static int act_filter(dash_ui *ui, const runview *m) {
  (void)m;
  ui->mode = DASH_MODE_FILTER;
  snprintf(ui->filter_saved, sizeof ui->filter_saved, "%s", ui->filter);
  snprintf(ui->line, sizeof ui->line, "%s", ui->filter);
  ui->linelen = (int)strlen(ui->line);
  ui->panel = DASH_PANEL_NODES;
  return DASH_DO_REDRAW;
}

static int act_sort(dash_ui *ui, const runview *m) {
  (void)m;
  ui->sort = (ui->sort + 1) % DASH_NSORTS;
  dash_ui_status(ui, 2, "sort: %s", dash_sort_name(ui->sort));
  return DASH_DO_REDRAW;
}

static int act_detail(dash_ui *ui, const runview *m) {
  const runview_node *n = selected(ui, m);
  if (!n) return 0;
  ui->mode = DASH_MODE_DETAIL;
  snprintf(ui->detail, sizeof ui->detail, "%s", n->name);
  ui->log_read_at = -1; /* read the log on the next frame */
  return DASH_DO_REDRAW;
}

static int act_kill(dash_ui *ui, const runview *m) {
  const char *name = ui->mode == DASH_MODE_DETAIL ? ui->detail : NULL;
  if (!name) {
    const runview_node *n = selected(ui, m);
    if (!n) return 0;
    name = n->name;
  }
  if (!ui->src.kill_node) {
    dash_ui_status(ui, 5, "%s", READ_ONLY);
    return DASH_DO_REDRAW;
  }
  snprintf(ui->confirm, sizeof ui->confirm, "%s", name);
  ui->plan[0] = '\0';
  if (ui->src.stop_plan && ui->src.stop_plan(ui->src.ud, name, ui->plan, sizeof ui->plan) < 0)
    ui->plan[0] = '\0';
  ui->mode = DASH_MODE_CONFIRM;
  return DASH_DO_REDRAW;
}

static int set_smoothing(dash_ui *ui, double s) {
  /* Whole hundredths, so that repeated steps land on 0.60, not 0.6000001. */
  s = (double)(long)(s * 100 + 0.5) / 100;
  if (s < 0) s = 0;
  if (s > DASH_SMOOTH_MAX) s = DASH_SMOOTH_MAX;
  ui->smoothing = s;
  dash_ui_status(ui, 2, "smoothing %.2f", s);
  return DASH_DO_REDRAW;
}

static int act_smooth_more(dash_ui *ui, const runview *m) {
  (void)m;
  return set_smoothing(ui, ui->smoothing + DASH_SMOOTH_STEP);
}


/* '+' / '-': on a worker row of the nodes panel, one worker more / fewer
 * (`drover scale RUN worker=+1`); elsewhere the smoothing. */
static int scale_by(dash_ui *ui, const runview *m, int d) {
  const runview_node *n = ui->panel == DASH_PANEL_NODES ? selected(ui, m) : NULL;
  if (!n || strncmp(n->name, "worker:", 7) != 0)
    return set_smoothing(ui, ui->smoothing + d * DASH_SMOOTH_STEP);
  if (!ui->src.scale) {
    dash_ui_status(ui, 5, "%s", READ_ONLY_SCALE);
    return DASH_DO_REDRAW;
  }
  char out[256] = "";
  int rc = ui->src.scale(ui->src.ud, d > 0 ? "worker=+1" : "worker=-1", out, sizeof out);
  if (rc < 0) dash_ui_status(ui, 8, "cannot scale: %s", out[0] ? out : "refused");
  else dash_ui_status(ui, 5, "%s", out[0] ? out : "scaling");
  return DASH_DO_REDRAW;
}

static int act_plus(dash_ui *ui, const runview *m) { return scale_by(ui, m, 1); }
static int act_minus(dash_ui *ui, const runview *m) { return scale_by(ui, m, -1); }

static int act_log(dash_ui *ui, const runview *m) {
  (void)m;
  ui->logy = !ui->logy;
  dash_ui_status(ui, 2, "y axis: %s", ui->logy ? "log" : "linear");
  return DASH_DO_REDRAW;
}

static int act_axis(dash_ui *ui, const runview *m) {
  (void)m;
  ui->wall_x = !ui->wall_x;
  dash_ui_status(ui, 2, "x axis: %s", ui->wall_x ? "wall time" : "step");
  return DASH_DO_REDRAW;
}

static int act_theme(dash_ui *ui, const runview *m) {
  (void)m;
  if (ui->nthemes == 0) return 0;
  ui->theme = (ui->theme + 1) % ui->nthemes;
  return DASH_DO_THEME | DASH_DO_REDRAW;
}

static int act_command(dash_ui *ui, const runview *m) {
  (void)m;
  if (!ui->src.command) {
    dash_ui_status(ui, 5, "%s", READ_ONLY);
    return DASH_DO_REDRAW;
  }
  ui->mode = DASH_MODE_COMMAND;
  ui->line[0] = '\0';
  ui->linelen = 0;
  return DASH_DO_REDRAW;
}

static int act_repaint(dash_ui *ui, const runview *m) {
  (void)ui, (void)m;
  return DASH_DO_REPAINT | DASH_DO_REDRAW;
}

/* The bindings, in the order the help overlay lists them. A row with a
 * NULL label shares the previous row's help line. */
static const struct binding {
  int key;
  const char *label;
  const char *help;
  action fn;
} bindings[] = {
    {'?', "?", "this help (any key closes it)", act_help},
    {'q', "q", "leave the dashboard (in a view: back)", act_quit},
    {'\t', "Tab  Right", "next panel (nodes, charts, events)", act_next_panel},
    {KEY_RIGHT, NULL, NULL, act_next_panel},
    {KEY_BTAB, "S-Tab  Left", "previous panel", act_prev_panel},
    {KEY_LEFT, NULL, NULL, act_prev_panel},
    {KEY_UP, "Up  Down", "select a node; scroll charts or events", act_up},
    {KEY_DOWN, NULL, NULL, act_down},
    {KEY_PPAGE, "PgUp  PgDn", "a page up / down", act_pgup},
    {KEY_NPAGE, NULL, NULL, act_pgdn},
    {KEY_HOME, "Home  End", "first / last", act_home},
    {KEY_END, NULL, NULL, act_end},
    {'/', "/", "filter nodes by name, host or state (Esc cancels)", act_filter},
    {'s', "s", "cycle the sort column", act_sort},
    {'\n', "Enter", "the selected node: fields and log (Esc/q back)", act_detail},
    {KEY_ENTER, NULL, NULL, act_detail},
    {'\r', NULL, NULL, act_detail},
    {'k', "k", "stop the selected node (asks first)", act_kill},
    {'+', "+  -", "on a worker row: one worker more / fewer (with the control key); "
                  "elsewhere more / less smoothing (EMA weight, 0 to 0.99)", act_plus},
    {'-', NULL, NULL, act_minus},
    {'=', "=", "more smoothing", act_smooth_more},
    {'l', "l", "log scale y on / off", act_log},
    {'x', "x", "x axis: step / wall time", act_axis},
    {'t', "t", "next theme", act_theme},
    {':', ":", "one line of Lua for the coordinator", act_command},
    {CTRL_KEY('l'), "Ctrl-L", "repaint the screen", act_repaint},
};

#define NBINDINGS ((int)(sizeof bindings / sizeof bindings[0]))

int dash_input_help(const char *const **keys, const char *const **helps) {
  static const char *k[NBINDINGS], *h[NBINDINGS];
  int n = 0;
  for (int i = 0; i < NBINDINGS; i++)
    if (bindings[i].label) {
      k[n] = bindings[i].label;
      h[n++] = bindings[i].help;
    }
  *keys = k;
  *helps = h;
  return n;
}

/* ============================== the prompt line ========================== */

/* Edits ui->line with key; 1 when Enter finished it, -1 when Esc
 * abandoned it, 0 otherwise. */
static int edit_line(dash_ui *ui, int key) {
  if (key == KEY_ESC) return -1;
  if (key == '\n' || key == '\r' || key == KEY_ENTER) return 1;
  if (key == KEY_BACKSPACE || key == 127 || key == CTRL_KEY('h')) {
    /* drop a whole UTF-8 sequence */
    while (ui->linelen > 0 && ((unsigned char)ui->line[--ui->linelen] & 0xC0) == 0x80) {
    }
  } else if (key == CTRL_KEY('u')) {
    ui->linelen = 0;
  } else if (key >= 32 && key < 256 && key != 127 && ui->linelen < (int)sizeof ui->line - 1) {
    ui->line[ui->linelen++] = (char)key;
  }
  ui->line[ui->linelen] = '\0';
  return 0;
}

static int key_filter(dash_ui *ui, int key) {
  int r = edit_line(ui, key);
  if (r < 0) {
    snprintf(ui->filter, sizeof ui->filter, "%s", ui->filter_saved);
    ui->mode = DASH_MODE_NORMAL;
  } else {
    /* The table follows as the filter is typed. */
    dash__copy(ui->filter, sizeof ui->filter, ui->line);
    if (r > 0) ui->mode = DASH_MODE_NORMAL;
  }
  ui->sel = 0;
  ui->top = 0;
  ui->sel_name[0] = '\0';
  return DASH_DO_REDRAW;
}

static int key_command(dash_ui *ui, int key) {
  int r = edit_line(ui, key);
  if (r == 0) return DASH_DO_REDRAW;
  ui->mode = DASH_MODE_NORMAL;
  if (r < 0 || ui->linelen == 0) return DASH_DO_REDRAW;
  char out[256] = "";
  int rc = ui->src.command(ui->src.ud, ui->line, out, sizeof out);
  /* The reply stays until replaced: it may be what the user came for. */
  if (rc < 0) dash_ui_status(ui, 1e9, "error: %s", out[0] ? out : "command failed");
  else dash_ui_status(ui, 1e9, "%s", out[0] ? out : "ok");
  return DASH_DO_REDRAW;
}

static int key_confirm(dash_ui *ui, int key) {
  ui->mode = ui->detail[0] && strcmp(ui->detail, ui->confirm) == 0 ? DASH_MODE_DETAIL
                                                                   : DASH_MODE_NORMAL;
  if (key != 'y' && key != 'Y') {
    dash_ui_status(ui, 3, "not stopped");
    return DASH_DO_REDRAW;
  }
  char out[256] = "";
  int rc = ui->src.kill_node(ui->src.ud, ui->confirm, out, sizeof out);
  if (rc < 0) dash_ui_status(ui, 8, "cannot stop %s: %s", ui->confirm, out[0] ? out : "failed");
  else dash_ui_status(ui, 5, "stopping %s%s%s", ui->confirm, out[0] ? ": " : "", out);
  return DASH_DO_REDRAW;
}

/* ============================== dispatch ================================= */

int dash_input_key(dash_ui *ui, const runview *m, int key) {
  if (key == KEY_RESIZE) return DASH_DO_REDRAW;
  switch (ui->mode) {
  case DASH_MODE_HELP:
    /* back to where '?' was pressed */
    ui->mode = ui->detail[0] ? DASH_MODE_DETAIL : DASH_MODE_NORMAL;
    return DASH_DO_REDRAW;
  case DASH_MODE_FILTER:
    return key_filter(ui, key);
  case DASH_MODE_COMMAND:
    return key_command(ui, key);
  case DASH_MODE_CONFIRM:
    return key_confirm(ui, key);
  case DASH_MODE_DETAIL:
    if (key == KEY_ESC || key == 'q' || key == KEY_LEFT) {
      ui->mode = DASH_MODE_NORMAL;
      ui->detail[0] = '\0';
      return DASH_DO_REDRAW;
    }
    if (key == 'k') return act_kill(ui, m);
    if (key == '?' || key == 't' || key == CTRL_KEY('l')) break;
    return 0;
  default:
    if (key == KEY_ESC) {
      /* Esc clears a filter, like leaving a search. */
      if (!ui->filter[0]) return 0;
      ui->filter[0] = '\0';
      return DASH_DO_REDRAW;
    }
    break;
  }
  for (int i = 0; i < NBINDINGS; i++)
    if (bindings[i].key == key) return bindings[i].fn(ui, m);
  return 0;
}
