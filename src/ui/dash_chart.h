/* dash_chart.h - the dashboard's line charts as pure functions: TensorBoard's
 * debiased EMA, an outlier-robust y range, and a canvas of Braille (or
 * ASCII) cells holding a raw and a smoothed line, which dash_view.c paints.
 * Nothing here calls curses, so all of it is unit-tested.
 */
#ifndef DROVER_DASH_CHART_H
#define DROVER_DASH_CHART_H

#include <stdbool.h>
#include <stdint.h>

#include "proto/runview.h"

#define DASH_SMOOTH_DEFAULT 0.6
#define DASH_SMOOTH_STEP 0.05
#define DASH_SMOOTH_MAX 0.99

/* TensorBoard's smoothing: last = last*w + (1-w)*v from last = 0, divided
 * by the debias factor 1 - w^k (k = finite values so far). Non-finite
 * values pass through unchanged and do not count; a constant series stays
 * as it is. out[i] for v[i]; out may be v. w in [0, 1). */
void dash_ema(const double *v, int n, double w, double *out);

typedef struct dash_range {
  double lo, hi; /* lo < hi always; in log10 units when the chart is log */
} dash_range;

/* The y range of the finite values of v (the positive ones, in log10, when
 * logy): from the 2nd to the 98th percentile, so that a few wild points do
 * not flatten the curve, padded by 5% each side; a flat series gets a
 * range around its value, never zero height. Returns how many values
 * counted (0: *out is [0, 1]). `scratch` holds n doubles (caller's). */
int dash_chart_range(const double *v, int n, bool logy, double *scratch, dash_range *out);

/* Braille: the bit of dot (dx, dy) of a cell, dx in 0..1 left to right,
 * dy in 0..3 top to bottom (Unicode's dot numbering 1 2 3 7 / 4 5 6 8). */
unsigned dash_braille_bit(int dx, int dy);
/* UTF-8 of U+2800 + bits into out (3 bytes and a NUL). */
void dash_braille_utf8(unsigned bits, char out[4]);

enum { DASH_LAYER_RAW, DASH_LAYER_SMOOTH };

/* A w x h cell grid of dots: 2 x 4 per cell in Braille, 1 x 3 in ASCII
 * (top, middle, bottom of the cell). Two layers of dot bits per cell. */
typedef struct dash_canvas {
  int w, h;
  bool braille;
  uint8_t *bits[2]; /* [layer][y * w + x] (owned) */
  /* scratch for dash_chart_plot, grown as needed (owned) */
  double *xs, *vs, *sm, *tmp;
  int scap;
} dash_canvas;

/* Sizes the canvas (w, h >= 1) and clears it; a canvas starts zeroed
 * ({0}) and keeps its memory between calls. 0 or DRV_ENOMEM. */
int dash_canvas_resize(dash_canvas *c, int w, int h, bool braille);
void dash_canvas_free(dash_canvas *c);
/* Dots across and down. */
int dash_canvas_dots_w(const dash_canvas *c);
int dash_canvas_dots_h(const dash_canvas *c);
/* Sets one dot (x from the left, y from the top; outside is ignored). */
void dash_canvas_dot(dash_canvas *c, int layer, int x, int y);
/* A straight line between two dots (Bresenham). */
void dash_canvas_line(dash_canvas *c, int layer, int x0, int y0, int x1, int y1);
/* The glyph of cell (cx, cy) into out (NUL-terminated UTF-8 or ASCII; " "
 * when empty) and which layer it shows: the smoothed line wins a cell.
 * Returns the layer, or -1 for an empty cell. */
int dash_canvas_glyph(const dash_canvas *c, int cx, int cy, char out[4]);

typedef struct dash_chart_opts {
  double smoothing; /* EMA weight */
  bool logy;        /* log10 y; non-positive values are skipped */
  bool wall_x;      /* x = wall seconds; else the step */
} dash_chart_opts;

typedef struct dash_chart_stats {
  int n;                    /* points drawn */
  double cur, cur_smooth;   /* newest raw and smoothed value */
  double min, max;          /* of every finite value (raw) */
  dash_range y;             /* the y range drawn (log10 units when logy) */
  double x0, x1;            /* the x range drawn */
} dash_chart_stats;

/* Draws series s into c (cleared first): the raw line on DASH_LAYER_RAW,
 * the smoothed one on DASH_LAYER_SMOOTH; lines towards points outside the
 * y range are clipped at the edge. Fills *st. 0, or DRV_ENOMEM. */
int dash_chart_plot(const runview_series *s, const dash_chart_opts *o, dash_canvas *c,
                    dash_chart_stats *st);

/* Two runs' series in one chart (`drover attach A B`): a's smoothed line
 * on DASH_LAYER_SMOOTH, b's on DASH_LAYER_RAW (no raw lines), over the
 * x and y ranges of both; *st is a's (its range that of both). Either may
 * be NULL or empty. 0, or DRV_ENOMEM. */
int dash_chart_plot_pair(const runview_series *a, const runview_series *b, const dash_chart_opts *o,
                         dash_canvas *c, dash_chart_stats *st);

/* A short human form of v into out: 4 significant digits, k/M/G suffixes
 * from 10^4 up, "-" for NaN. */
void dash_fmt_num(double v, char *out, int n);
/* v in at most `width` columns (an axis label): the most significant
 * digits that fit, exponents written short ("2.29e-5"), at least one
 * digit even when that does not fit. */
void dash_fmt_fit(double v, int width, char *out, int n);

#endif
