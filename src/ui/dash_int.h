/* dash_int.h - the dashboard's view state, shared by its modules: the
 * driver (dash.c) owns it, the frame (dash_view.c) and the panels
 * (dash_panels.c) draw from it and a runview, the keys (dash_input.c)
 * change it. Not for other callers.
 */
#ifndef DROVER_DASH_INT_H
#define DROVER_DASH_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ui/dash.h"
#include "ui/dash_chart.h"
#include "ui/dash_draw.h"
#include "proto/runview.h"
#include "ui/dash_theme.h"

/* Below this size only "terminal too small" is drawn. */
#define DASH_MIN_W 64
#define DASH_MIN_H 18

#define DASH_MAX_THEMES 32
#define DASH_MAX_CHARTS 16 /* chart slots on screen at once */

enum { DASH_PANEL_NODES, DASH_PANEL_CHARTS, DASH_PANEL_EVENTS, DASH_NPANELS };

enum {
  DASH_MODE_NORMAL,
  DASH_MODE_HELP,    /* the key overlay */
  DASH_MODE_DETAIL,  /* one node and its log */
  DASH_MODE_FILTER,  /* typing after '/' */
  DASH_MODE_COMMAND, /* typing after ':' */
  DASH_MODE_CONFIRM  /* "stop worker:1? (y/n)" */
};

/* Node table sort orders, cycled by 's'. */
enum { DASH_SORT_NONE, DASH_SORT_NAME, DASH_SORT_STATE, DASH_SORT_STEPS, DASH_SORT_RATE,
       DASH_SORT_CPU, DASH_SORT_RSS, DASH_SORT_HEARTBEAT, DASH_SORT_RESTARTS, DASH_NSORTS };

/* What dash_input_key asks the driver to do. */
enum {
  DASH_DO_REDRAW = 1,
  DASH_DO_QUIT = 2,
  DASH_DO_THEME = 4, /* load and apply ui->themes[ui->theme] */
  DASH_DO_REPAINT = 8 /* repaint every cell (Ctrl-L) */
};

typedef struct dash_ui {
  int panel, mode;
  /* nodes: rows (indices into the model's nodes, filtered and sorted) are
   * rebuilt each frame; the selection follows the node's name */
  int *rows, nrows, caprows;
  int sel, top;
  char sel_name[32];
  int sort;
  char filter[64], filter_saved[64];
  /* charts and events */
  int chart_first;  /* first metric chart shown */
  int event_back;   /* events scrolled back from the newest */
  double smoothing;
  bool logy, wall_x;
  dash_canvas canvas[DASH_MAX_CHARTS + 1];
  /* the prompt line (filter, command) and what it is for */
  char line[256];
  int linelen;
  char confirm[32]; /* node to stop */
  char plan[200];   /* what stopping it does (src.stop_plan), "" unknown */
  /* the status line: a message until status_until (seconds, ui clock) */
  char status[256];
  double status_until;
  /* detail view */
  char detail[32];
  char log[8192];     /* the source's log tail of log_node */
  char log_node[32];
  double log_read_at; /* < 0: ask the source next frame */
  /* themes */
  char themes[DASH_MAX_THEMES][64];
  int nthemes, theme;
  dash_palette pal;
  bool utf8;
  /* the source, for ':' and 'k' */
  dash_source src;
  double now; /* seconds, monotonic */
  /* layout of the last frame (for paging) */
  int page_rows;
} dash_ui;

/* Sets defaults (smoothing 0.6, nodes panel, ...); frees nothing. */
void dash_ui_init(dash_ui *ui, dash_source src);
void dash_ui_free(dash_ui *ui);
/* Shows msg on the status line for `secs` seconds. */
void dash_ui_status(dash_ui *ui, double secs, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* dash_view.c: rebuilds ui->rows from m (filter, sort, selection). */
void dash_view_rows(dash_ui *ui, const runview *m);
/* dash_view.c: draws one frame on stdscr (cols x rows), erased first. */
void dash_view_draw(dash_ui *ui, const runview *m, int rows, int cols);
/* The theme role that colours a node state ("busy" -> DASH_ROLE_BUSY). */
int dash_state_role(const char *state);
/* The node m->nodes[i] matches the filter (a substring of its name, host
 * or state; "" matches all). */
bool dash_node_matches(const runview_node *n, const char *filter);
/* The sort order's name ("state"). */
const char *dash_sort_name(int sort);

/* Copies src into dst[n], cut to fit, always NUL-terminated. */
static inline void dash__copy(char *dst, size_t n, const char *src) {
  size_t l = 0;
  while (l + 1 < n && src[l]) l++;
  for (size_t i = 0; i < l; i++) dst[i] = src[i];
  if (n) dst[l] = '\0';
}

/* The attribute of a colour role in the current palette. */
static inline unsigned long dash__role(const dash_ui *ui, int role) { return ui->pal.attr[role]; }

/* The panels (dash_panels.c), each inside its rectangle. */
void dash__nodes(dash_ui *ui, const runview *m, int y, int x, int h, int w);
void dash__queue_box(dash_ui *ui, const runview *m, int y, int x, int h, int w);
void dash__queue_line(dash_ui *ui, const runview *m, int y, int w);
void dash__charts(dash_ui *ui, const runview *m, int y, int x, int h, int w, bool large);
void dash__events(dash_ui *ui, const runview *m, int y, int x, int h, int w);

/* dash_input.c: one key (curses code) -> DASH_DO_* flags. */
int dash_input_key(dash_ui *ui, const runview *m, int key);

/* dash_input.c: the key table for the help overlay, in order; returns
 * the count and sets *keys / *helps to parallel arrays of strings. */
int dash_input_help(const char *const **keys, const char *const **helps);

#endif
