/* test_dash_chart.c - the dashboard's chart functions: TensorBoard's EMA
 * against hand computations (debiasing, non-finite values, a constant
 * series), the robust y range (outliers, flat series, log scale, against
 * a sort), Braille cell encoding, the canvas and a plotted series. */
#include <stdint.h>

#include "ui/dash_chart.h"
#include "harness.h"

/* ============================== EMA ====================================== */

TEST(dash_ema_matches_a_hand_computation) {
  /* w = 0.6, from last = 0:
   *   last1 = 0.4*1 = 0.4;             /(1-0.6)   = 1
   *   last2 = 0.6*0.4 + 0.4*2 = 1.04;  /(1-0.36)  = 1.625
   *   last3 = 0.6*1.04 + 0.4*3 = 1.824 /(1-0.216) = 2.326530612... */
  double v[3] = {1, 2, 3}, out[3];
  dash_ema(v, 3, 0.6, out);
  CHECK_NEAR(out[0], 1.0, 1e-12);
  CHECK_NEAR(out[1], 1.625, 1e-12);
  CHECK_NEAR(out[2], 1.824 / 0.784, 1e-12);
}

TEST(dash_ema_debiasing_keeps_a_steady_start_exact) {
  /* Without the debias factor the first values would be pulled towards
   * 0 (4, 6.4, 7.84); with it a steady prefix stays at its value. Then
   * last4 = 0.6*7.84 + 0.4*20 = 12.704, /(1 - 0.6^4 = 0.8704). */
  double v[4] = {10, 10, 10, 20}, out[4];
  dash_ema(v, 4, 0.6, out);
  for (int i = 0; i < 3; i++) CHECK_NEAR(out[i], 10, 1e-12);
  CHECK_NEAR(out[3], 12.704 / 0.8704, 1e-12);
}

TEST(dash_ema_skips_non_finite_values) {
  double v[4] = {1, NAN, 2, INFINITY}, out[4];
  dash_ema(v, 4, 0.6, out);
  CHECK_NEAR(out[0], 1, 1e-12);
  CHECK(isnan(out[1]));
  CHECK_NEAR(out[2], 1.625, 1e-12); /* as if the NaN was not there */
  CHECK(isinf(out[3]));
}

TEST(dash_ema_weight_zero_and_constant_series_are_the_raw_values) {
  double v[5] = {3, -1, 4, 1, 5}, out[5];
  dash_ema(v, 5, 0, out);
  for (int i = 0; i < 5; i++) CHECK_NEAR(out[i], v[i], 1e-12);
  double c[4] = {7, 7, 7, 7};
  dash_ema(c, 4, 0.99, out);
  for (int i = 0; i < 4; i++) CHECK(out[i] == 7);
  /* in place */
  double w[3] = {1, 2, 3};
  dash_ema(w, 3, 0.6, w);
  CHECK_NEAR(w[1], 1.625, 1e-12);
}

/* ============================== y range ================================== */

TEST(dash_range_ignores_a_few_outliers) {
  double v[1005], scratch[1005];
  for (int i = 0; i < 1000; i++) v[i] = i / 999.0;
  for (int i = 1000; i < 1005; i++) v[i] = 1e6; /* a few wild points */
  dash_range r;
  CHECK_INT_EQ(dash_chart_range(v, 1005, false, scratch, &r), 1005);
  CHECK(r.hi < 1.1);
  CHECK(r.hi > 0.95);
  CHECK(r.lo >= 0);     /* padding stops at 0 for non-negative data */
  CHECK(r.lo < 0.03);
  /* and without outliers the whole range shows */
  CHECK_INT_EQ(dash_chart_range(v, 1000, false, scratch, &r), 1000);
  CHECK(r.hi >= 0.98);
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

TEST(dash_range_percentiles_agree_with_a_sort) {
  enum { N = 777 };
  double v[N], s[N], scratch[N];
  uint64_t x = 88172645463325252ull;
  for (int i = 0; i < N; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    v[i] = (double)(x % 100000) / 7.0 - 5000; /* negative and positive, repeats */
    s[i] = v[i];
  }
  qsort(s, N, sizeof *s, cmp_d);
  double lo = s[(int)(0.02 * (N - 1))], hi = s[(int)ceil(0.98 * (N - 1))];
  dash_range r;
  dash_chart_range(v, N, false, scratch, &r);
  CHECK_NEAR(r.lo, lo - 0.05 * (hi - lo), 1e-9);
  CHECK_NEAR(r.hi, hi + 0.05 * (hi - lo), 1e-9);
}

TEST(dash_range_of_a_short_series_is_all_of_it) {
  double v[3] = {1, 2, 100}, scratch[3];
  dash_range r;
  dash_chart_range(v, 3, false, scratch, &r);
  CHECK(r.lo <= 1 && r.hi >= 100);
}

TEST(dash_range_never_collapses) {
  double v[60], scratch[60];
  dash_range r;
  for (int i = 0; i < 60; i++) v[i] = 3.0;
  dash_chart_range(v, 60, false, scratch, &r);
  CHECK(r.lo < 3 && r.hi > 3);
  for (int i = 0; i < 60; i++) v[i] = 0;
  dash_chart_range(v, 60, false, scratch, &r);
  CHECK(r.lo < 0 && r.hi > 0 && r.hi - r.lo >= 1);
  double nan = NAN;
  CHECK_INT_EQ(dash_chart_range(&nan, 1, false, scratch, &r), 0);
  CHECK(r.hi > r.lo);
}

TEST(dash_range_log_scale_skips_non_positive_values) {
  double v[6] = {-1, 0, 10, 100, 1000, NAN}, scratch[6];
  dash_range r;
  CHECK_INT_EQ(dash_chart_range(v, 6, true, scratch, &r), 3);
  /* log10: 1..3, padded by 5% of the span */
  CHECK_NEAR(r.lo, 1 - 0.1, 1e-9);
  CHECK_NEAR(r.hi, 3 + 0.1, 1e-9);
  double neg[2] = {-5, 0};
  CHECK_INT_EQ(dash_chart_range(neg, 2, true, scratch, &r), 0);
}

/* ============================== Braille and canvas ======================= */

TEST(dash_braille_cells_follow_unicode_dot_numbering) {
  /* dots 1 2 3 7 down the left column, 4 5 6 8 down the right */
  CHECK_INT_EQ(dash_braille_bit(0, 0), 0x01);
  CHECK_INT_EQ(dash_braille_bit(0, 1), 0x02);
  CHECK_INT_EQ(dash_braille_bit(0, 2), 0x04);
  CHECK_INT_EQ(dash_braille_bit(1, 0), 0x08);
  CHECK_INT_EQ(dash_braille_bit(1, 1), 0x10);
  CHECK_INT_EQ(dash_braille_bit(1, 2), 0x20);
  CHECK_INT_EQ(dash_braille_bit(0, 3), 0x40);
  CHECK_INT_EQ(dash_braille_bit(1, 3), 0x80);
  CHECK_INT_EQ(dash_braille_bit(2, 0), 0);
  char u[4];
  dash_braille_utf8(0, u);
  CHECK(strcmp(u, "\xe2\xa0\x80") == 0); /* U+2800 */
  dash_braille_utf8(0xff, u);
  CHECK(strcmp(u, "\xe2\xa3\xbf") == 0); /* U+28FF */
  dash_braille_utf8(0x47, u);             /* the left column: U+2847 */
  CHECK(strcmp(u, "\xe2\xa1\x87") == 0);
}

TEST(dash_canvas_dots_land_in_their_cells) {
  dash_canvas c = {0};
  CHECK_OK(dash_canvas_resize(&c, 4, 3, true));
  CHECK_INT_EQ(dash_canvas_dots_w(&c), 8);
  CHECK_INT_EQ(dash_canvas_dots_h(&c), 12);
  dash_canvas_dot(&c, DASH_LAYER_RAW, 3, 5);   /* cell (1, 1), dot (1, 1) */
  dash_canvas_dot(&c, DASH_LAYER_RAW, 99, 99); /* outside: ignored */
  CHECK_INT_EQ(c.bits[DASH_LAYER_RAW][1 * 4 + 1], 0x10);
  char g[4];
  CHECK_INT_EQ(dash_canvas_glyph(&c, 1, 1, g), DASH_LAYER_RAW);
  CHECK(strcmp(g, "\xe2\xa0\x90") == 0);
  CHECK_INT_EQ(dash_canvas_glyph(&c, 0, 0, g), -1);
  CHECK(strcmp(g, " ") == 0);
  /* the smoothed line wins a shared cell */
  dash_canvas_dot(&c, DASH_LAYER_SMOOTH, 2, 4);
  CHECK_INT_EQ(dash_canvas_glyph(&c, 1, 1, g), DASH_LAYER_SMOOTH);
  /* a horizontal line across the canvas touches every cell of its row */
  dash_canvas_line(&c, DASH_LAYER_RAW, 0, 10, 7, 10);
  /* dot row 10 is the third of cell row 2: dots 3 and 6 */
  for (int x = 0; x < 4; x++) CHECK(c.bits[DASH_LAYER_RAW][2 * 4 + x] == (0x04 | 0x20));
  /* ASCII: 1 x 3 dots a cell */
  CHECK_OK(dash_canvas_resize(&c, 2, 2, false));
  CHECK_INT_EQ(dash_canvas_dots_h(&c), 6);
  dash_canvas_line(&c, DASH_LAYER_RAW, 0, 0, 0, 2);
  dash_canvas_dot(&c, DASH_LAYER_RAW, 1, 4);
  dash_canvas_glyph(&c, 0, 0, g);
  CHECK(strcmp(g, "|") == 0);
  dash_canvas_glyph(&c, 1, 1, g);
  CHECK(strcmp(g, "-") == 0);
  dash_canvas_free(&c);
}

static void fill(runview *m, const char *tag, int n, double (*f)(int)) {
  for (int i = 0; i < n; i++)
    CHECK_OK(runview_add_point(m, tag, (runview_point){i, i * 0.5, f(i)}));
}

static double rising(int i) { return i; }
static double signed_wave(int i) { return i % 2 ? -1.0 * i : (double)i; }

TEST(dash_chart_plot_draws_raw_and_smoothed_lines) {
  runview m;
  runview_init(&m);
  fill(&m, "up", 100, rising);
  dash_canvas c = {0};
  CHECK_OK(dash_canvas_resize(&c, 20, 5, true));
  dash_chart_opts o = {0.6, false, false};
  dash_chart_stats st;
  CHECK_OK(dash_chart_plot(runview_find_series(&m, "up"), &o, &c, &st));
  CHECK_INT_EQ(st.n, 100);
  CHECK(st.cur == 99 && st.min == 0 && st.max == 99);
  CHECK(st.cur_smooth < 99 && st.cur_smooth > 95); /* lags behind a rise */
  CHECK(st.x0 == 0 && st.x1 == 99);
  /* rising: the bottom-left and top-right cells hold raw dots */
  CHECK(c.bits[DASH_LAYER_RAW][4 * 20 + 0] != 0);
  CHECK(c.bits[DASH_LAYER_RAW][0 * 20 + 19] != 0);
  CHECK(c.bits[DASH_LAYER_RAW][0 * 20 + 0] == 0);
  int smooth = 0;
  for (int i = 0; i < 100; i++) smooth += c.bits[DASH_LAYER_SMOOTH][i] != 0;
  CHECK(smooth >= 20);
  /* wall time on x */
  o.wall_x = true;
  CHECK_OK(dash_chart_plot(runview_find_series(&m, "up"), &o, &c, &st));
  CHECK(st.x1 == 49.5);
  /* log scale with non-positive values: only the positive ones count */
  fill(&m, "wave", 50, signed_wave);
  o.logy = true;
  CHECK_OK(dash_chart_plot(runview_find_series(&m, "wave"), &o, &c, &st));
  CHECK(st.y.hi <= log10(48) + 0.2 && st.y.lo >= log10(2) - 0.2);
  /* an empty series draws nothing */
  CHECK_OK(dash_chart_plot(NULL, &o, &c, &st));
  CHECK_INT_EQ(st.n, 0);
  dash_canvas_free(&c);
  runview_free(&m);
}

TEST(dash_fmt_num_is_short) {
  char b[32];
  dash_fmt_num(0.123456, b, sizeof b);
  CHECK(strcmp(b, "0.1235") == 0);
  dash_fmt_num(12345, b, sizeof b);
  CHECK(strcmp(b, "12.3k") == 0);
  dash_fmt_num(25e6, b, sizeof b);
  CHECK(strcmp(b, "25M") == 0);
  dash_fmt_num(NAN, b, sizeof b);
  CHECK(strcmp(b, "-") == 0);
  dash_fmt_num(1.95e6, b, sizeof b); /* not 1.95e+03k */
  CHECK(strcmp(b, "1.95M") == 0);
}

TEST(dash_fmt_fit_fits_axis_labels) {
  char b[32];
  dash_fmt_fit(2.287e-5, 7, b, sizeof b); /* was "2.287e-" cut off */
  CHECK(strcmp(b, "2.287e-5") != 0 && strlen(b) <= 7);
  CHECK(strcmp(b, "2.29e-5") == 0);
  dash_fmt_fit(0.5, 7, b, sizeof b);
  CHECK(strcmp(b, "0.5") == 0);
  dash_fmt_fit(123456789, 7, b, sizeof b);
  CHECK(strcmp(b, "1.235e8") == 0);
  dash_fmt_fit(-3.1e-7, 7, b, sizeof b);
  CHECK(strcmp(b, "-3.1e-7") == 0);
  dash_fmt_fit(1e-100, 7, b, sizeof b);
  CHECK(strcmp(b, "1e-100") == 0);
}

static double spiky(int i) { return i == 60 ? 1e300 : 1 + (i % 3) * 0.01; }

TEST(dash_chart_clips_lines_to_wild_points) {
  runview m;
  runview_init(&m);
  fill(&m, "spiky", 100, spiky);
  dash_canvas c = {0};
  CHECK_OK(dash_canvas_resize(&c, 50, 6, true));
  dash_chart_opts o = {0, false, false};
  dash_chart_stats st;
  CHECK_OK(dash_chart_plot(runview_find_series(&m, "spiky"), &o, &c, &st)); /* returns: bounded */
  CHECK(st.y.hi < 1.1);    /* the robust range ignores the spike */
  CHECK(st.max == 1e300);  /* but max reports it */
  /* the line towards it leaves through the top edge near x = 60%: the
   * topmost dots (bits 0x01, 0x08) of the first cell row are set there */
  int col = (int)lround(60.0 / 99 * (2 * 50 - 1)) / 2;
  CHECK(c.bits[DASH_LAYER_RAW][col] & 0x09);
  /* and nowhere else: the other values sit below the padded top */
  int top = 0;
  for (int x = 0; x < 50; x++) top += (c.bits[DASH_LAYER_RAW][x] & 0x09) != 0;
  CHECK(top <= 2);
  dash_canvas_free(&c);
  runview_free(&m);
}
