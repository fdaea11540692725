/* dash_chart.c - line charts for the dashboard, as pure functions over a
 * series and a dot canvas (see dash_chart.h). dash_view.c paints the
 * canvas; nothing here knows about curses.
 */
#include "ui/dash_chart.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"

/* ============================== smoothing ================================ */

void dash_ema(const double *v, int n, double w, double *out) {
  bool constant = true;
  for (int i = 1; i < n && constant; i++) constant = v[i] == v[0];
  double last = 0;
  int k = 0;
  for (int i = 0; i < n; i++) {
    double x = v[i];
    if (constant || !isfinite(x)) {
      out[i] = x;
      continue;
    }
    last = last * w + (1 - w) * x;
    k++;
    /* Started from 0, the average after k values is biased by a factor
     * 1 - w^k towards 0: divide it out, as TensorBoard does. */
    double debias = w == 1 ? 1 : 1 - pow(w, k);
    out[i] = last / debias;
  }
}

/* ============================== y range ================================== */

/* The k-th smallest of a[0..n) (Hoare's quickselect; reorders a). */
static double select_kth(double *a, int n, int k) {
  int lo = 0, hi = n - 1;
  while (lo < hi) {
    double pivot = a[lo + (hi - lo) / 2];
    int i = lo, j = hi;
    while (i <= j) {
      while (a[i] < pivot) i++;
      while (a[j] > pivot) j--;
      if (i <= j) {
        double t = a[i];
        a[i++] = a[j];
        a[j--] = t;
      }
    }
    if (k <= j) hi = j;
    else if (k >= i) lo = i;
    else break;
  }
  return a[k];
}

int dash_chart_range(const double *v, int n, bool logy, double *scratch, dash_range *out) {
  int m = 0;
  for (int i = 0; i < n; i++) {
    double x = v[i];
    if (!isfinite(x) || (logy && x <= 0)) continue;
    scratch[m++] = logy ? log10(x) : x;
  }
  if (m == 0) {
    *out = (dash_range){0, 1};
    return 0;
  }
  /* Percentiles only once there are enough points for 2% to mean
   * something; a short series shows all of itself. */
  int klo = m >= 50 ? (int)(0.02 * (m - 1)) : 0;
  int khi = m >= 50 ? (int)ceil(0.98 * (m - 1)) : m - 1;
  double hi = select_kth(scratch, m, khi);
  double lo = select_kth(scratch, khi + 1, klo); /* [0, khi] holds the smaller ones */
  double span = hi - lo;
  if (!(span > 1e-12 * fmax(fabs(hi), fabs(lo)))) {
    /* Flat: a band around the value (a tenth of it, or 1 at zero). */
    double half = fabs(hi) > 0 ? fabs(hi) * 0.1 : 1;
    if (logy) half = 0.5; /* half a decade */
    out->lo = hi - half;
    out->hi = hi + half;
  } else {
    out->lo = lo - span * 0.05;
    out->hi = hi + span * 0.05;
    /* Padding must not invent negative values for a series that has none
     * (a rate starting at 0). */
    if (!logy && lo >= 0 && out->lo < 0) out->lo = 0;
  }
  return m;
}

/* ============================== Braille ================================== */

unsigned dash_braille_bit(int dx, int dy) {
  static const unsigned char bit[4][2] = {{0x01, 0x08}, {0x02, 0x10}, {0x04, 0x20}, {0x40, 0x80}};
  if (dx < 0 || dx > 1 || dy < 0 || dy > 3) return 0;
  return bit[dy][dx];
}

void dash_braille_utf8(unsigned bits, char out[4]) {
  unsigned cp = 0x2800 + (bits & 0xff);
  out[0] = (char)(0xE0 | (cp >> 12));
  out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
  out[2] = (char)(0x80 | (cp & 0x3F));
  out[3] = '\0';
}

/* ============================== canvas =================================== */

int dash_canvas_resize(dash_canvas *c, int w, int h, bool braille) {
  if (w < 1) w = 1;
  if (h < 1) h = 1;
  if (w * h > c->w * c->h || !c->bits[0]) {
    for (int l = 0; l < 2; l++) {
      uint8_t *p = realloc(c->bits[l], (size_t)w * (size_t)h);
      if (!p) return err_set(DRV_ENOMEM, "out of memory for a %dx%d chart", w, h);
      c->bits[l] = p;
    }
  }
  c->w = w;
  c->h = h;
  c->braille = braille;
  memset(c->bits[0], 0, (size_t)w * (size_t)h);
  memset(c->bits[1], 0, (size_t)w * (size_t)h);
  return 0;
}

void dash_canvas_free(dash_canvas *c) {
  free(c->bits[0]);
  free(c->bits[1]);
  free(c->xs);
  free(c->vs);
  free(c->sm);
  free(c->tmp);
  memset(c, 0, sizeof *c);
}

int dash_canvas_dots_w(const dash_canvas *c) { return c->w * (c->braille ? 2 : 1); }
int dash_canvas_dots_h(const dash_canvas *c) { return c->h * (c->braille ? 4 : 3); }

void dash_canvas_dot(dash_canvas *c, int layer, int x, int y) {
  if (x < 0 || y < 0 || x >= dash_canvas_dots_w(c) || y >= dash_canvas_dots_h(c)) return;
  if (c->braille)
    c->bits[layer][(y / 4) * c->w + x / 2] |= (uint8_t)dash_braille_bit(x % 2, y % 4);
  else
    c->bits[layer][(y / 3) * c->w + x] |= (uint8_t)(1u << (y % 3));
}

void dash_canvas_line(dash_canvas *c, int layer, int x0, int y0, int x1, int y1) {
  int dx = abs(x1 - x0), sx = x0 < x1 ? 1 : -1;
  int dy = -abs(y1 - y0), sy = y0 < y1 ? 1 : -1;
  int err = dx + dy;
  for (;;) {
    dash_canvas_dot(c, layer, x0, y0);
    if (x0 == x1 && y0 == y1) break;
    int e2 = 2 * err;
    if (e2 >= dy) {
      err += dy;
      x0 += sx;
    }
    if (e2 <= dx) {
      err += dx;
      y0 += sy;
    }
  }
}

int dash_canvas_glyph(const dash_canvas *c, int cx, int cy, char out[4]) {
  int i = cy * c->w + cx;
  int layer = c->bits[DASH_LAYER_SMOOTH][i] ? DASH_LAYER_SMOOTH
              : c->bits[DASH_LAYER_RAW][i]  ? DASH_LAYER_RAW
                                            : -1;
  if (layer < 0) {
    out[0] = ' ';
    out[1] = '\0';
    return -1;
  }
  unsigned b = c->bits[layer][i];
  if (c->braille) {
    dash_braille_utf8(b, out);
  } else {
    /* 1 top, 2 middle, 4 bottom; a cell crossed vertically is a bar. */
    static const char ascii[8] = {' ', '\'', '-', '|', '.', '|', '|', '|'};
    out[0] = ascii[b & 7];
    out[1] = '\0';
  }
  return layer;
}

/* ============================== plotting ================================= */

static int ensure_scratch(dash_canvas *c, int n) {
  if (n <= c->scap) return 0;
  int cap = c->scap ? c->scap : 256;
  while (cap < n) cap *= 2;
  double **bufs[4] = {&c->xs, &c->vs, &c->sm, &c->tmp};
  for (int i = 0; i < 4; i++) {
    double *p = realloc(*bufs[i], (size_t)cap * sizeof *p);
    if (!p) return err_set(DRV_ENOMEM, "out of memory for a chart of %d points", n);
    *bufs[i] = p;
  }
  c->scap = cap;
  return 0;
}

/* Draws one polyline; a point that cannot be drawn (not finite, or not
 * positive on a log axis) breaks the line. */
static void plot_line(dash_canvas *c, int layer, const double *xs, const double *vs, int n,
                      const dash_chart_stats *st, bool logy) {
  int W = dash_canvas_dots_w(c), H = dash_canvas_dots_h(c);
  double xspan = st->x1 - st->x0, yspan = st->y.hi - st->y.lo;
  bool have_prev = false;
  int px = 0, py = 0;
  for (int i = 0; i < n; i++) {
    double v = vs[i];
    if (!isfinite(v) || (logy && v <= 0)) {
      have_prev = false;
      continue;
    }
    if (logy) v = log10(v);
    double fx = xspan > 0 ? (xs[i] - st->x0) / xspan : 0;
    /* Points outside the range are drawn off the canvas, whose edge clips
     * the line towards them; bounded, so that a wild point costs a short
     * line, not a billion dots. */
    double fy = (v - st->y.lo) / yspan;
    if (fy < -1) fy = -1;
    if (fy > 2) fy = 2;
    int x = (int)lround(fx * (W - 1));
    int y = (int)lround((1 - fy) * (H - 1));
    if (have_prev)
      dash_canvas_line(c, layer, px, py, x, y);
    else
      dash_canvas_dot(c, layer, x, y);
    px = x;
    py = y;
    have_prev = true;
  }
}

int dash_chart_plot(const runview_series *s, const dash_chart_opts *o, dash_canvas *c,
                    dash_chart_stats *st) {
  memset(c->bits[0], 0, (size_t)c->w * (size_t)c->h);
  memset(c->bits[1], 0, (size_t)c->w * (size_t)c->h);
  memset(st, 0, sizeof *st);
  st->cur = st->cur_smooth = st->min = st->max = NAN;
  st->y = (dash_range){0, 1};
  int n = s ? s->n : 0;
  if (n == 0) return 0;
  int rc = ensure_scratch(c, n);
  if (rc < 0) return rc;
  for (int i = 0; i < n; i++) {
    const runview_point *p = runview_series_at(s, i);
    c->xs[i] = o->wall_x ? p->wall : p->step;
    c->vs[i] = p->value;
  }
  dash_ema(c->vs, n, o->smoothing, c->sm);
  st->n = n;
  st->cur = c->vs[n - 1];
  st->cur_smooth = c->sm[n - 1];
  st->x0 = c->xs[0];
  st->x1 = c->xs[0];
  for (int i = 0; i < n; i++) {
    if (c->xs[i] < st->x0) st->x0 = c->xs[i];
    if (c->xs[i] > st->x1) st->x1 = c->xs[i];
    double v = c->vs[i];
    if (!isfinite(v)) continue;
    if (!(st->min <= v)) st->min = v; /* NaN compares false: the first value */
    if (!(st->max >= v)) st->max = v;
  }
  dash_chart_range(c->vs, n, o->logy, c->tmp, &st->y);
  plot_line(c, DASH_LAYER_RAW, c->xs, c->vs, n, st, o->logy);
  plot_line(c, DASH_LAYER_SMOOTH, c->xs, c->sm, n, st, o->logy);
  return 0;
}

int dash_chart_plot_pair(const runview_series *a, const runview_series *b, const dash_chart_opts *o,
                         dash_canvas *c, dash_chart_stats *st) {
  int rc = dash_chart_plot(a, o, c, st);
  int na = a ? a->n : 0, nb = b ? b->n : 0;
  if (rc < 0 || nb == 0) return rc;
  memset(c->bits[DASH_LAYER_RAW], 0, (size_t)c->w * (size_t)c->h);
  if ((rc = ensure_scratch(c, na + nb)) < 0) return rc;
  /* Both runs' points, a's first: one x and y range for the two. */
  const runview_series *both[2] = {a, b};
  for (int k = 0, i = 0; k < 2; k++)
    for (int j = 0; both[k] && j < both[k]->n; j++, i++) {
      const runview_point *p = runview_series_at(both[k], j);
      c->xs[i] = o->wall_x ? p->wall : p->step;
      c->vs[i] = p->value;
    }
  if (na) dash_ema(c->vs, na, o->smoothing, c->sm);
  dash_ema(c->vs + na, nb, o->smoothing, c->sm + na);
  if (na == 0) st->x0 = st->x1 = c->xs[0];
  for (int i = 0; i < na + nb; i++) {
    if (c->xs[i] < st->x0) st->x0 = c->xs[i];
    if (c->xs[i] > st->x1) st->x1 = c->xs[i];
  }
  dash_chart_range(c->vs, na + nb, o->logy, c->tmp, &st->y);
  memset(c->bits[DASH_LAYER_SMOOTH], 0, (size_t)c->w * (size_t)c->h);
  plot_line(c, DASH_LAYER_SMOOTH, c->xs, c->sm, na, st, o->logy);
  plot_line(c, DASH_LAYER_RAW, c->xs + na, c->sm + na, nb, st, o->logy);
  st->n = na + nb;
  return 0;
}

void dash_fmt_num(double v, char *out, int n) {
  if (isnan(v)) {
    snprintf(out, (size_t)n, "-");
    return;
  }
  double a = fabs(v);
  if (a >= 1e9) snprintf(out, (size_t)n, "%.3gG", v / 1e9);
  else if (a >= 1e6) snprintf(out, (size_t)n, "%.3gM", v / 1e6);
  else if (a >= 1e4) snprintf(out, (size_t)n, "%.3gk", v / 1e3);
  else snprintf(out, (size_t)n, "%.4g", v);
}

/* "2.29e-05" as "2.29e-5": the exponent without its sign's '+' and its
 * leading zeros. In place. */
static void compact_exponent(char *s) {
  char *e = strchr(s, 'e');
  if (!e) return;
  char *d = e + 1, *r = e + 1;
  if (*r == '+') r++;
  else if (*r == '-') *d++ = *r++;
  while (*r == '0' && r[1]) r++;
  memmove(d, r, strlen(r) + 1);
}

void dash_fmt_fit(double v, int width, char *out, int n) {
  if (!isfinite(v)) {
    dash_fmt_num(v, out, n);
    return;
  }
  for (int prec = 4; prec >= 1; prec--) {
    snprintf(out, (size_t)n, "%.*g", prec, v);
    compact_exponent(out);
    if ((int)strlen(out) <= width) return;
  }
}
