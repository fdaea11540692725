/* nn_conv.c - the image layers: Conv2d (im2col and sgemm, one example at
 * a time) and MaxPool2d / AvgPool2d, on [N, C, H, W] tensors, with
 * PyTorch's parameter names, layouts and output sizes; kernels, strides,
 * paddings and dilations are {height, width} pairs.
 *
 * Conv2d works one example at a time: its im2col matrix [in kh kw, OH OW]
 * stays in cache between im2col and the sgemm that reads it, and the
 * example's output (and its gradient) is a contiguous [out, OH OW] block
 * of the NCHW tensor, so the products write and read the tensors in place:
 * no layout copy. Measured on the CNN of tests/bench (one thread): the
 * batch-wide matrix (a 13 MB [800, 64 x 64] for its second conv) ran its
 * three sgemms at 60-80 GFLOP/s against 90-100 for the per-example ones,
 * whose operands fit in L2, and it needed the layout copies besides.
 */
/* im2col's rows are a few dozen floats: GCC would turn their copy loops
 * into memcpy calls (loop distribution), each costing more than the copy
 * (measured: 4 ms of a 50 ms CNN step). Kept as loops, they vectorise. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-tree-loop-distribute-patterns")
#endif

/* The copies of im2col and col2im are bound by their stores: an AVX2
 * build (32-byte moves), chosen at load time where the CPU has it, takes
 * half as many. The default build stays baseline x86-64 (the binary is
 * shipped to other machines). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define CONV_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define CONV_CLONES
#endif

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "numeric/nn.h"
#include "numeric/nn_int.h"
#include "base/util.h"

/* ---- geometry -------------------------------------------------------------- */

/* Output size of one spatial dimension (PyTorch's floor formula), < 1 when
 * the input is too small. */
static int64_t out_size(int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t dil) {
  return (in + 2 * pad - dil * (k - 1) - 1) / stride + 1;
}

/* x as [N, C, H, W]: a 4-D x as it is, a 3-D [N, H, W] (images as the
 * IDX reader gives them) as one channel [N, 1, H, W]. */
static void as_nchw(const tensor *x, int64_t *d) {
  bool three = x->ndim == 3;
  d[0] = x->shape[0];
  d[1] = three ? 1 : x->shape[1];
  d[2] = x->shape[three ? 1 : 2];
  d[3] = x->shape[three ? 2 : 3];
}

static bool is_pair(const int64_t *v, int64_t a) { return v[0] == a && v[1] == a; }

/* "3x3" or "3x5": a pair as describe and errors print it. */
static const char *pair_str(const int64_t *v, char *buf, size_t n) {
  snprintf(buf, n, "%lldx%lld", (long long)v[0], (long long)v[1]);
  return buf;
}

/* "2" for {2, 2}, "2x1" otherwise: strides, paddings and dilations. */
static const char *num_str(const int64_t *v, char *buf, size_t n) {
  if (v[0] == v[1]) snprintf(buf, n, "%lld", (long long)v[0]);
  else pair_str(v, buf, n);
  return buf;
}

/* x must be a contiguous [N, channels, H, W] (or [N, H, W] when a Conv2d
 * takes one channel) with an output of at least 1 x 1; fills `shape`
 * with the output's [N, out_channels, OH, OW]. */
static int spatial_check(const nn_module *m, const tensor *x, int64_t channels,
                         int64_t out_channels, int64_t *shape) {
  char a[64], nm[96];
  int rc = nn_need_contiguous(m, x, "input");
  if (rc < 0) return rc;
  int64_t d[4];
  bool ok = x->ndim == 4 || (x->ndim == 3 && channels == 1);
  if (ok) as_nchw(x, d);
  if (!ok || (channels > 0 && d[1] != channels))
    return err_set(DRV_ESHAPE, "%s: input %s is not [batch, %s%lld, height, width]",
                   nn_name_of(m, nm, sizeof nm), SHAPE(x, a), channels > 0 ? "" : "channels ",
                   (long long)(channels > 0 ? channels : 0));
  int64_t oh = out_size(d[2], m->k[0], m->stride[0], m->pad[0], m->dil[0]);
  int64_t ow = out_size(d[3], m->k[1], m->stride[1], m->pad[1], m->dil[1]);
  if (oh < 1 || ow < 1)
    return err_set(DRV_ESHAPE, "%s: input %s is smaller than the kernel",
                   nn_name_of(m, nm, sizeof nm), SHAPE(x, a));
  shape[0] = d[0];
  shape[1] = out_channels > 0 ? out_channels : d[1];
  shape[2] = oh;
  shape[3] = ow;
  return 0;
}

/* ---- Conv2d ---------------------------------------------------------------- */

/* The geometry of one conv call: input [n, c, h, w], output [n, o, oh, ow],
 * l = oh ow positions an example, ckk = c kh kw rows of the matrix. */
typedef struct conv_geom {
  int64_t n, c, h, w, o, oh, ow, l, ckk;
} conv_geom;

/* Fills g from x and the output shape; refuses sizes BLAS's int cannot
 * index (DRV_ERANGE) and sizes the im2col matrix of one example. */
static int conv_begin(nn_module *m, const tensor *x, const int64_t *os, conv_geom *g) {
  char nm[96];
  int64_t d[4];
  as_nchw(x, d);
  *g = (conv_geom){.n = d[0], .c = d[1], .h = d[2], .w = d[3], .o = os[1], .oh = os[2],
                   .ow = os[3], .l = os[2] * os[3]};
  size_t ckk = 0, per = 0;
  bool ok = util_mul_ok((size_t)g->c, (size_t)(m->k[0] * m->k[1]), &ckk) && ckk <= INT32_MAX &&
            g->l <= INT32_MAX && util_mul_ok(ckk, (size_t)g->l, &per);
  g->ckk = (int64_t)ckk;
  if (!ok)
    return err_set(DRV_ERANGE, "%s: the im2col matrix of one example is too large",
                   nn_name_of(m, nm, sizeof nm));
  int64_t cs[2] = {g->ckk, g->l};
  return nn_ensure(&m->cols, 2, cs);
}

/* The output columns j0 <= j < j1 whose input column j s - p + kj d lies
 * inside 0..w-1 (empty when j0 >= j1). */
static void valid_cols(int64_t w, int64_t ow, int64_t s, int64_t off,
                       int64_t *j0, int64_t *j1) {
  /* off = kj d - p: column j reads input column j s + off. */
  int64_t lo = off >= 0 ? 0 : (-off + s - 1) / s;
  int64_t hi = w - off <= 0 ? 0 : (w - off - 1) / s + 1;
  *j0 = lo < ow ? lo : ow;
  *j1 = hi < ow ? hi : ow;
  if (*j1 < *j0) *j1 = *j0;
}

/* One output row of im2col: dst[j] = src[j s + off] for j0 <= j < j1,
 * 0 elsewhere in 0..ow-1. Rows are short (a few dozen), so plain loops
 * the compiler vectorises beat memcpy/memset calls. */
static inline void gather_row(float *restrict dst, const float *restrict src, int64_t ow,
                              int64_t s, int64_t off, int64_t j0, int64_t j1) {
  for (int64_t j = 0; j < j0; j++) dst[j] = 0.0f;
  if (s == 1) {
    /* four floats a move (a constant-size memcpy is one unaligned load and
     * store): the vectorised loop's aliasing checks and remainder cost
     * more than rows of 8 or 24 floats take to copy */
    const float *from = src + off;
    int64_t j = j0;
    for (; j + 8 <= j1; j += 8) memcpy(dst + j, from + j, 8 * sizeof *dst);
    for (; j + 4 <= j1; j += 4) memcpy(dst + j, from + j, 4 * sizeof *dst);
    for (; j < j1; j++) dst[j] = from[j];
  } else {
    for (int64_t j = j0; j < j1; j++) dst[j] = src[j * s + off];
  }
  for (int64_t j = j1; j < ow; j++) dst[j] = 0.0f;
}

/* The adjoint of gather_row: dst[j s + off] += src[j], j0 <= j < j1. */
static inline void scatter_row(float *restrict dst, const float *restrict src, int64_t s,
                               int64_t off, int64_t j0, int64_t j1) {
  if (s == 1) {
    float *to = dst + off;
    for (int64_t j = j0; j < j1; j++) to[j] += src[j];
  } else {
    for (int64_t j = j0; j < j1; j++) dst[j * s + off] += src[j];
  }
}

/* One example's planes x [C, H, W] into cols [C kh kw, OH OW]: row
 * (ch, ki, kj), column (i, j) holds x[ch, i s - p + ki d, j s - p + kj d],
 * 0 outside the input. */
CONV_CLONES static void im2col(const nn_module *m, const conv_geom *g, const float *x,
                               float *cols) {
  int64_t kh = m->k[0], kw = m->k[1], sw = m->stride[1];
  for (int64_t ch = 0; ch < g->c; ch++) {
    const float *plane = x + ch * g->h * g->w;
    for (int64_t ki = 0; ki < kh; ki++)
      for (int64_t kj = 0; kj < kw; kj++) {
        int64_t off = kj * m->dil[1] - m->pad[1], j0, j1;
        valid_cols(g->w, g->ow, sw, off, &j0, &j1);
        float *row = cols + ((ch * kh + ki) * kw + kj) * g->l;
        for (int64_t i = 0; i < g->oh; i++) {
          float *dst = row + i * g->ow;
          int64_t y = i * m->stride[0] - m->pad[0] + ki * m->dil[0];
          if (y < 0 || y >= g->h)
            gather_row(dst, plane, g->ow, sw, 0, 0, 0);
          else
            gather_row(dst, plane + y * g->w, g->ow, sw, off, j0, j1);
        }
      }
  }
}

/* The adjoint of im2col: adds cols [C kh kw, OH OW] into one example's
 * planes dx [C, H, W]. */
CONV_CLONES static void col2im(const nn_module *m, const conv_geom *g, const float *cols,
                               float *dx) {
  int64_t kh = m->k[0], kw = m->k[1], sw = m->stride[1];
  for (int64_t ch = 0; ch < g->c; ch++) {
    float *plane = dx + ch * g->h * g->w;
    for (int64_t ki = 0; ki < kh; ki++)
      for (int64_t kj = 0; kj < kw; kj++) {
        int64_t off = kj * m->dil[1] - m->pad[1], j0, j1;
        valid_cols(g->w, g->ow, sw, off, &j0, &j1);
        const float *row = cols + ((ch * kh + ki) * kw + kj) * g->l;
        for (int64_t i = 0; i < g->oh; i++) {
          int64_t y = i * m->stride[0] - m->pad[0] + ki * m->dil[0];
          if (y >= 0 && y < g->h) scatter_row(plane + y * g->w, row + i * g->ow, sw, off, j0, j1);
        }
      }
  }
}

/* Per example e: cols = im2col(x[e]), then out[e] [O, L] = bias (by
 * rows) + W [O, CKK] cols [CKK, L], written in place in the NCHW output. */
static int conv_forward(nn_module *m, const tensor *x, const tensor **y) {
  int64_t os[4];
  conv_geom g;
  int rc = spatial_check(m, x, m->in_features, m->out_features, os);
  if (rc < 0 || (rc = nn_ensure(&m->out, 4, os)) < 0 || (rc = conv_begin(m, x, os, &g)) < 0)
    return rc;
  const float *wt = tensor_data(m->params[0].value), *xp = tensor_data(x);
  const float *bias = m->nparams > 1 ? tensor_data(m->params[1].value) : NULL;
  float *cols = tensor_data(m->cols), *out = tensor_data(m->out);
  for (int64_t e = 0; e < g.n; e++) {
    float *oe = out + e * g.o * g.l;
    im2col(m, &g, xp + e * g.c * g.h * g.w, cols);
    if (bias)
      for (int64_t i = 0; i < g.o; i++) EACH(j, g.l, oe[i * g.l + j] = bias[i]);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)g.o, (int)g.l, (int)g.ckk, 1.0f,
                wt, (int)g.ckk, cols, (int)g.l, bias ? 1.0f : 0.0f, oe, (int)g.l);
  }
  *y = m->out;
  return 0;
}

/* The sum of n floats: eight float partial sums the compiler vectorises,
 * added up in double. */
static double row_sum(const float *restrict src, int64_t n) {
  float part[8] = {0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; k++) part[k] += src[i + k];
  double s = 0;
  for (; i < n; i++) s += src[i];
  for (int k = 0; k < 8; k++) s += part[k];
  return s;
}

/* Per example e, reading dy[e] [O, L] in place: db += its row sums,
 * cols = im2col(x[e]) and dW += dy[e] cols^T; when asked, cols = W^T dy[e]
 * and col2im into dx[e]. */
static int conv_backward(nn_module *m, const tensor *x, const tensor *dy, const tensor **dx) {
  int64_t os[4];
  conv_geom g;
  int rc = spatial_check(m, x, m->in_features, m->out_features, os);
  if (rc < 0 || (rc = nn_check_grad(m, dy, 4, os)) < 0 || (rc = conv_begin(m, x, os, &g)) < 0)
    return rc;
  if (dx && (rc = nn_ensure_like(&m->dx, x)) < 0) return rc;
  float *cols = tensor_data(m->cols), *dw = tensor_data(m->params[0].grad);
  float *db = m->nparams > 1 ? tensor_data(m->params[1].grad) : NULL;
  const float *wt = tensor_data(m->params[0].value), *xp = tensor_data(x);
  int64_t in_e = g.c * g.h * g.w;
  for (int64_t e = 0; e < g.n; e++) {
    const float *dye = tensor_data(dy) + e * g.o * g.l;
    if (db)
      for (int64_t i = 0; i < g.o; i++) db[i] += (float)row_sum(dye + i * g.l, g.l);
    im2col(m, &g, xp + e * in_e, cols);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)g.o, (int)g.ckk, (int)g.l, 1.0f,
                dye, (int)g.l, cols, (int)g.l, 1.0f, dw, (int)g.ckk);
    if (!dx) continue;
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)g.ckk, (int)g.l, (int)g.o, 1.0f,
                wt, (int)g.ckk, dye, (int)g.l, 0.0f, cols, (int)g.l);
    float *dxe = tensor_data(m->dx) + e * in_e;
    memset(dxe, 0, (size_t)in_e * sizeof *dxe);
    col2im(m, &g, cols, dxe);
  }
  if (dx) *dx = m->dx;
  return 0;
}

static int conv_describe(const nn_module *m, char *buf, size_t n, int indent) {
  (void)indent;
  char p[48];
  nn_append(buf, n, "nn.Conv2d(%lld -> %lld, %s", (long long)m->in_features,
            (long long)m->out_features, pair_str(m->k, p, sizeof p));
  if (!is_pair(m->stride, 1)) nn_append(buf, n, ", stride %s", num_str(m->stride, p, sizeof p));
  if (!is_pair(m->pad, 0)) nn_append(buf, n, ", padding %s", num_str(m->pad, p, sizeof p));
  if (!is_pair(m->dil, 1)) nn_append(buf, n, ", dilation %s", num_str(m->dil, p, sizeof p));
  if (m->nparams < 2) nn_append(buf, n, ", no bias");
  nn_append(buf, n, ")");
  return 0;
}

static const nn_module_ops conv_ops = {"Conv2d", conv_forward, conv_backward, conv_describe,
                                       NULL};

static bool conv_args_ok(int64_t in, int64_t out, const int64_t *k, const nn_conv_opts *d) {
  bool ok = in > 0 && out > 0 && in <= INT32_MAX && out <= INT32_MAX;
  for (int i = 0; i < 2; i++)
    ok = ok && k[i] > 0 && k[i] <= 4096 && d->stride[i] > 0 && d->stride[i] <= INT32_MAX &&
         d->padding[i] >= 0 && d->padding[i] <= INT32_MAX && d->dilation[i] > 0 &&
         d->dilation[i] <= 4096;
  return ok;
}

nn_module *nn_conv2d(int64_t in, int64_t out, const int64_t k[2], const nn_conv_opts *o,
                     rng_t *r) {
  nn_conv_opts d = o ? *o : NN_CONV_DEFAULTS;
  if (!conv_args_ok(in, out, k, &d) || !r) {
    err_set(DRV_EINVAL, "nn.Conv2d(%lld -> %lld, %lldx%lld): channels, kernel, stride and "
            "dilation must be positive (kernel and dilation at most 4096), padding >= 0%s",
            (long long)in, (long long)out, (long long)k[0], (long long)k[1],
            r ? "" : ", and an rng is required");
    return NULL;
  }
  nn_module *m = nn_module_new(&conv_ops);
  if (!m) return NULL;
  m->in_features = in;
  m->out_features = out;
  for (int i = 0; i < 2; i++) {
    m->k[i] = k[i];
    m->stride[i] = d.stride[i];
    m->pad[i] = d.padding[i];
    m->dil[i] = d.dilation[i];
  }
  m->nparams = d.bias ? 2 : 1;
  int64_t wshape[4] = {out, in, k[0], k[1]};
  if (nn_param_init(&m->params[0], "weight", 4, wshape) < 0 ||
      (d.bias && nn_param_init(&m->params[1], "bias", 1, &out) < 0)) {
    nn_unref(m);
    err_set(DRV_ENOMEM, "out of memory creating nn.Conv2d(%lld -> %lld)", (long long)in,
            (long long)out);
    return NULL;
  }
  nn_init(m, "uniform", r); /* PyTorch's default: U(+-1/sqrt(in kh kw)) */
  return m;
}

nn_module *nn_conv2d_square(int64_t in, int64_t out, int64_t k, const nn_conv_opts *o,
                            rng_t *r) {
  return nn_conv2d(in, out, (int64_t[2]){k, k}, o, r);
}

/* ---- pooling ----------------------------------------------------------------- */

static int pool_begin(nn_module *m, const tensor *x, int64_t *os) {
  int rc = spatial_check(m, x, 0, 0, os);
  return rc < 0 ? rc : nn_ensure(&m->out, 4, os);
}

/* The max of one window of plane p (w columns) whose top-left corner is
 * at index base, all of it inside the input: its index. NaN wins, as in
 * PyTorch. The common case has no branch on the data: on real inputs
 * "v > bv" is a coin toss a branch predictor loses half the time, which
 * made this loop cost as much as a convolution's GEMM. */
static inline int64_t window_max(const float *restrict p, int64_t w, int64_t base, int64_t kh,
                                 int64_t kw) {
  int64_t best = base;
  float bv = p[base];
  int nan = 0;
  for (int64_t ki = 0; ki < kh; ki++)
    for (int64_t kj = 0; kj < kw; kj++) {
      int64_t idx = base + ki * w + kj;
      float v = p[idx];
      int64_t take = -(int64_t)(v > bv);
      best = (best & ~take) | (idx & take);
      bv = v > bv ? v : bv;
      nan |= v != v;
    }
  if (nan) /* rare: the last NaN wins */
    for (int64_t ki = 0; ki < kh; ki++)
      for (int64_t kj = 0; kj < kw; kj++)
        if (isnan(p[base + ki * w + kj])) best = base + ki * w + kj;
  return best;
}

/* ---- 2x2 windows, stride 2, no padding: the common pool ------------------ */

/* The general loops below go window by window through an 8-byte index per
 * output; these take two input rows at a time with constant bounds and no
 * branch on the data, and MaxPool2d keeps the max's place in its window
 * (the first of equal maxima or the last NaN, as window_max picks it) in
 * 32 bits, half the general index, the lanes of the float compares (a
 * byte made the compiler's vector loop 16 outputs long, longer than the
 * rows). Backward writes all four gradients of each window, so dx
 * needs no clearing (but for an odd row or column the windows leave out).
 * Measured on the CNN of tests/bench: the first pool went from 1.9 ms
 * (forward) + 0.45 (backward) to 0.33 + 0.36 a batch. */
static bool is_2x2(const nn_module *m) {
  return is_pair(m->k, 2) && is_pair(m->stride, 2) && is_pair(m->pad, 0);
}

/* The geometry of one pool call, [planes, h, w] -> [planes, oh, ow]. */
typedef struct pool_geom {
  int64_t planes, h, w, oh, ow;
} pool_geom;

/* y = the max of each window, pos = its place (0..3, row by row). */
static void max2x2_forward(const pool_geom *p, const float *x, float *y, uint32_t *pos) {
  int64_t w = p->w, ow = p->ow;
  for (int64_t pl = 0; pl < p->planes; pl++)
    for (int64_t i = 0; i < p->oh; i++) {
      const float *restrict r0 = x + (pl * p->h + 2 * i) * w, *restrict r1 = r0 + w;
      float *restrict yr = y + (pl * p->oh + i) * ow;
      uint32_t *restrict pr = pos + (pl * p->oh + i) * ow;
      int nan = 0;
      for (int64_t j = 0; j < ow; j++) {
        float a = r0[2 * j], b = r0[2 * j + 1], c = r1[2 * j], d = r1[2 * j + 1];
        float ab = b > a ? b : a, cd = d > c ? d : c, v = cd > ab ? cd : ab;
        yr[j] = v;
        /* the first element equal to the max: arithmetic, not branches */
        unsigned na = a != v, nab = na & (b != v), nabc = nab & (c != v);
        pr[j] = na + nab + nabc;
        nan |= (a != a) | (b != b) | (c != c) | (d != d);
      }
      if (nan) /* rare: NaN wins, as window_max has it */
        for (int64_t j = 0; j < ow; j++) {
          int64_t k = window_max(r0, w, 2 * j, 2, 2);
          yr[j] = r0[k];
          pr[j] = (uint32_t)((k >= w ? 2 : 0) + (k - 2 * j) % w);
        }
    }
}

/* dx = dy at each window's max, 0 at its other three places. */
static void max2x2_backward(const pool_geom *p, const uint32_t *pos, const float *g, float *dx) {
  int64_t w = p->w, ow = p->ow;
  if ((p->h | w) & 1) memset(dx, 0, (size_t)(p->planes * p->h * w) * sizeof *dx);
  for (int64_t pl = 0; pl < p->planes; pl++)
    for (int64_t i = 0; i < p->oh; i++) {
      float *restrict d0 = dx + (pl * p->h + 2 * i) * w, *restrict d1 = d0 + w;
      const float *restrict gr = g + (pl * p->oh + i) * ow;
      const uint32_t *restrict pr = pos + (pl * p->oh + i) * ow;
      for (int64_t j = 0; j < ow; j++) {
        uint32_t gv, k = pr[j]; /* masks, not branches: the place is a coin toss */
        memcpy(&gv, &gr[j], sizeof gv);
        uint32_t o[4] = {gv & -(uint32_t)(k == 0), gv & -(uint32_t)(k == 1),
                         gv & -(uint32_t)(k == 2), gv & -(uint32_t)(k == 3)};
        memcpy(&d0[2 * j], &o[0], 2 * sizeof *o);
        memcpy(&d1[2 * j], &o[2], 2 * sizeof *o);
      }
    }
}

static void avg2x2_forward(const pool_geom *p, const float *x, float *y) {
  int64_t w = p->w, ow = p->ow;
  for (int64_t pl = 0; pl < p->planes; pl++)
    for (int64_t i = 0; i < p->oh; i++) {
      const float *restrict r0 = x + (pl * p->h + 2 * i) * w, *restrict r1 = r0 + w;
      float *restrict yr = y + (pl * p->oh + i) * ow;
      for (int64_t j = 0; j < ow; j++)
        yr[j] = ((r0[2 * j] + r0[2 * j + 1]) + (r1[2 * j] + r1[2 * j + 1])) * 0.25f;
    }
}

static void avg2x2_backward(const pool_geom *p, const float *g, float *dx) {
  int64_t w = p->w, ow = p->ow;
  if ((p->h | w) & 1) memset(dx, 0, (size_t)(p->planes * p->h * w) * sizeof *dx);
  for (int64_t pl = 0; pl < p->planes; pl++)
    for (int64_t i = 0; i < p->oh; i++) {
      float *restrict d0 = dx + (pl * p->h + 2 * i) * w, *restrict d1 = d0 + w;
      const float *restrict gr = g + (pl * p->oh + i) * ow;
      for (int64_t j = 0; j < ow; j++) {
        float v = gr[j] * 0.25f;
        d0[2 * j] = d0[2 * j + 1] = d1[2 * j] = d1[2 * j + 1] = v;
      }
    }
}

static pool_geom pool_geom_of(const tensor *x, const int64_t *os) {
  return (pool_geom){os[0] * os[1], x->shape[2], x->shape[3], os[2], os[3]};
}

/* Max over each window's in-bounds elements, remembering where it was.
 * Without padding every window lies inside the input (window_max); with
 * it, the bounds are checked. */
static int maxpool_forward(nn_module *m, const tensor *x, const tensor **y) {
  int64_t os[4];
  int rc = pool_begin(m, x, os);
  if (rc < 0) return rc;
  if (is_2x2(m)) {
    pool_geom p = pool_geom_of(x, os);
    if (util_grow(&m->winpos, &m->capwinpos, (size_t)(p.planes * p.oh * p.ow), sizeof *m->winpos, 64) < 0)
      return err_set(DRV_ENOMEM, "nn.MaxPool2d: out of memory");
    max2x2_forward(&p, tensor_data(x), tensor_data(m->out), m->winpos);
    *y = m->out;
    return 0;
  }
  int64_t planes = os[0] * os[1], h = x->shape[2], w = x->shape[3], oh = os[2], ow = os[3];
  if (util_grow(&m->argmax, &m->capargmax, (size_t)(planes * oh * ow), sizeof *m->argmax, 64) < 0)
    return err_set(DRV_ENOMEM, "nn.MaxPool2d: out of memory");
  const float *xp = tensor_data(x);
  float *yp = tensor_data(m->out);
  bool inside = is_pair(m->pad, 0), two = is_pair(m->k, 2);
  for (int64_t pl = 0; pl < planes; pl++)
    for (int64_t i = 0; i < oh; i++)
      for (int64_t j = 0; j < ow; j++) {
        int64_t best = -1, at = (pl * oh + i) * ow + j;
        if (inside) {
          int64_t base = i * m->stride[0] * w + j * m->stride[1];
          /* 2x2, the common pool, with constant bounds the compiler unrolls */
          best = pl * h * w + (two ? window_max(xp + pl * h * w, w, base, 2, 2)
                                   : window_max(xp + pl * h * w, w, base, m->k[0], m->k[1]));
        } else {
          for (int64_t ki = 0; ki < m->k[0]; ki++)
            for (int64_t kj = 0; kj < m->k[1]; kj++) {
              int64_t yy = i * m->stride[0] - m->pad[0] + ki, xx = j * m->stride[1] - m->pad[1] + kj;
              if (yy < 0 || yy >= h || xx < 0 || xx >= w) continue;
              int64_t idx = (pl * h + yy) * w + xx;
              if (best < 0 || xp[idx] > xp[best] || isnan(xp[idx])) best = idx;
            }
        }
        m->argmax[at] = best;
        yp[at] = xp[best];
      }
  *y = m->out;
  return 0;
}

/* The last forward's output shape must be this input's. */
static int pool_back_begin(nn_module *m, const tensor *x, const tensor *dy, int64_t *os) {
  char a[64], nm[96];
  int rc = spatial_check(m, x, 0, 0, os);
  if (rc < 0 || (rc = nn_check_grad(m, dy, 4, os)) < 0) return rc;
  if (!m->out || !tensor_same_shape(m->out, dy))
    return err_set(DRV_EINVAL, "%s: backward of input %s without a forward of it",
                   nn_name_of(m, nm, sizeof nm), SHAPE(x, a));
  if ((rc = nn_ensure_like(&m->dx, x)) < 0) return rc;
  return is_2x2(m) ? 0 : tensor_fill(m->dx, 0.0f); /* the 2x2 loops clear what they need */
}

static int maxpool_backward(nn_module *m, const tensor *x, const tensor *dy, const tensor **dx) {
  if (!dx) return 0;
  int64_t os[4];
  int rc = pool_back_begin(m, x, dy, os);
  if (rc < 0) return rc;
  const float *g = tensor_data(dy);
  float *d = tensor_data(m->dx);
  if (is_2x2(m)) {
    pool_geom p = pool_geom_of(x, os);
    max2x2_backward(&p, m->winpos, g, d);
    *dx = m->dx;
    return 0;
  }
  int64_t n = tensor_numel(dy);
  for (int64_t i = 0; i < n; i++) d[m->argmax[i]] += g[i];
  *dx = m->dx;
  return 0;
}

/* Sum of each window's in-bounds elements over kh*kw: padding counts as 0
 * (count_include_pad), and with padding <= k/2 (each dimension) every
 * window lies inside the padded input, so the divisor is always kh*kw. */
static int avgpool_forward(nn_module *m, const tensor *x, const tensor **y) {
  int64_t os[4];
  int rc = pool_begin(m, x, os);
  if (rc < 0) return rc;
  if (is_2x2(m)) {
    pool_geom p = pool_geom_of(x, os);
    avg2x2_forward(&p, tensor_data(x), tensor_data(m->out));
    *y = m->out;
    return 0;
  }
  int64_t planes = os[0] * os[1], h = x->shape[2], w = x->shape[3], oh = os[2], ow = os[3];
  const float *xp = tensor_data(x);
  float *yp = tensor_data(m->out), inv = 1.0f / (float)(m->k[0] * m->k[1]);
  for (int64_t pl = 0; pl < planes; pl++)
    for (int64_t i = 0; i < oh; i++)
      for (int64_t j = 0; j < ow; j++) {
        float s = 0.0f;
        for (int64_t ki = 0; ki < m->k[0]; ki++)
          for (int64_t kj = 0; kj < m->k[1]; kj++) {
            int64_t yy = i * m->stride[0] - m->pad[0] + ki, xx = j * m->stride[1] - m->pad[1] + kj;
            if (yy >= 0 && yy < h && xx >= 0 && xx < w) s += xp[(pl * h + yy) * w + xx];
          }
        yp[(pl * oh + i) * ow + j] = s * inv;
      }
  *y = m->out;
  return 0;
}

static int avgpool_backward(nn_module *m, const tensor *x, const tensor *dy, const tensor **dx) {
  if (!dx) return 0;
  int64_t os[4];
  int rc = pool_back_begin(m, x, dy, os);
  if (rc < 0) return rc;
  if (is_2x2(m)) {
    pool_geom p = pool_geom_of(x, os);
    avg2x2_backward(&p, tensor_data(dy), tensor_data(m->dx));
    *dx = m->dx;
    return 0;
  }
  int64_t planes = os[0] * os[1], h = x->shape[2], w = x->shape[3], oh = os[2], ow = os[3];
  const float *g = tensor_data(dy);
  float *d = tensor_data(m->dx), inv = 1.0f / (float)(m->k[0] * m->k[1]);
  for (int64_t pl = 0; pl < planes; pl++)
    for (int64_t i = 0; i < oh; i++)
      for (int64_t j = 0; j < ow; j++) {
        float v = g[(pl * oh + i) * ow + j] * inv;
        for (int64_t ki = 0; ki < m->k[0]; ki++)
          for (int64_t kj = 0; kj < m->k[1]; kj++) {
            int64_t yy = i * m->stride[0] - m->pad[0] + ki, xx = j * m->stride[1] - m->pad[1] + kj;
            if (yy >= 0 && yy < h && xx >= 0 && xx < w) d[(pl * h + yy) * w + xx] += v;
          }
      }
  *dx = m->dx;
  return 0;
}

static int pool_describe(const nn_module *m, char *buf, size_t n, int indent) {
  (void)indent;
  char p[48];
  nn_append(buf, n, "nn.%s(%s", m->ops->type, pair_str(m->k, p, sizeof p));
  if (m->stride[0] != m->k[0] || m->stride[1] != m->k[1])
    nn_append(buf, n, ", stride %s", num_str(m->stride, p, sizeof p));
  if (!is_pair(m->pad, 0)) nn_append(buf, n, ", padding %s", num_str(m->pad, p, sizeof p));
  nn_append(buf, n, ")");
  return 0;
}

static const nn_module_ops maxpool_ops = {"MaxPool2d", maxpool_forward, maxpool_backward,
                                          pool_describe, NULL};
static const nn_module_ops avgpool_ops = {"AvgPool2d", avgpool_forward, avgpool_backward,
                                          pool_describe, NULL};

/* stride NULL or {0, 0}: the kernel's; padding NULL: none. */
static nn_module *pool_new(const nn_module_ops *ops, const int64_t *k, const int64_t *stride,
                           const int64_t *pad) {
  int64_t s[2] = {k[0], k[1]}, p[2] = {0, 0};
  if (stride && (stride[0] != 0 || stride[1] != 0)) s[0] = stride[0], s[1] = stride[1];
  if (pad) p[0] = pad[0], p[1] = pad[1];
  bool ok = true;
  for (int i = 0; i < 2; i++)
    ok = ok && k[i] >= 1 && k[i] <= 4096 && s[i] >= 1 && s[i] <= INT32_MAX && p[i] >= 0 &&
         p[i] <= k[i] / 2;
  if (!ok) {
    char a[48], b[48], c[48];
    err_set(DRV_EINVAL, "nn.%s(%s, stride %s, padding %s): kernel and stride must be "
            "positive and padding in 0..kernel/2", ops->type, pair_str(k, a, sizeof a),
            pair_str(s, b, sizeof b), pair_str(p, c, sizeof c));
    return NULL;
  }
  nn_module *m = nn_module_new(ops);
  if (!m) return NULL;
  for (int i = 0; i < 2; i++) m->k[i] = k[i], m->stride[i] = s[i], m->pad[i] = p[i], m->dil[i] = 1;
  return m;
}

nn_module *nn_maxpool2d(const int64_t k[2], const int64_t stride[2], const int64_t padding[2]) {
  return pool_new(&maxpool_ops, k, stride, padding);
}

nn_module *nn_avgpool2d(const int64_t k[2], const int64_t stride[2], const int64_t padding[2]) {
  return pool_new(&avgpool_ops, k, stride, padding);
}

nn_module *nn_maxpool2d_square(int64_t k, int64_t stride, int64_t padding) {
  return nn_maxpool2d((int64_t[2]){k, k}, (int64_t[2]){stride, stride},
                      (int64_t[2]){padding, padding});
}

nn_module *nn_avgpool2d_square(int64_t k, int64_t stride, int64_t padding) {
  return nn_avgpool2d((int64_t[2]){k, k}, (int64_t[2]){stride, stride},
                      (int64_t[2]){padding, padding});
}
