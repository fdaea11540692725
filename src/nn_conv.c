/* nn_conv.c - the image layers: Conv2d (im2col and one sgemm per example)
 * and MaxPool2d / AvgPool2d, on [N, C, H, W] tensors, with PyTorch's
 * parameter names, layouts and output sizes.
 *
 * Conv2d keeps one example's im2col matrix, [in k k, OH OW], and builds it
 * again in backward rather than keeping the whole batch's: the batch's
 * would be k*k times the input's size, the rebuild is a cheap copy next to
 * the two products that read it.
 */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "nn.h"
#include "nn_int.h"
#include "util.h"

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
    return drv_error(DRV_ESHAPE, "%s: input %s is not [batch, %s%lld, height, width]",
                     nn_name_of(m, nm, sizeof nm), SHAPE(x, a), channels > 0 ? "" : "channels ",
                     (long long)(channels > 0 ? channels : 0));
  int64_t oh = out_size(d[2], m->k, m->stride, m->pad, m->dil);
  int64_t ow = out_size(d[3], m->k, m->stride, m->pad, m->dil);
  if (oh < 1 || ow < 1)
    return drv_error(DRV_ESHAPE, "%s: input %s is smaller than the kernel",
                     nn_name_of(m, nm, sizeof nm), SHAPE(x, a));
  shape[0] = d[0];
  shape[1] = out_channels > 0 ? out_channels : d[1];
  shape[2] = oh;
  shape[3] = ow;
  return 0;
}

/* ---- Conv2d ---------------------------------------------------------------- */

/* One example x [C, H, W] into cols [C k k, OH OW]; padding reads as 0. */
static void im2col(const nn_module *m, const float *x, int64_t c, int64_t h, int64_t w,
                   int64_t oh, int64_t ow, float *cols) {
  int64_t k = m->k, s = m->stride, p = m->pad, d = m->dil;
  for (int64_t ch = 0; ch < c; ch++)
    for (int64_t ki = 0; ki < k; ki++)
      for (int64_t kj = 0; kj < k; kj++) {
        float *row = cols + ((ch * k + ki) * k + kj) * oh * ow;
        for (int64_t i = 0; i < oh; i++) {
          int64_t y = i * s - p + ki * d;
          for (int64_t j = 0; j < ow; j++) {
            int64_t xx = j * s - p + kj * d;
            bool in = y >= 0 && y < h && xx >= 0 && xx < w;
            row[i * ow + j] = in ? x[(ch * h + y) * w + xx] : 0.0f;
          }
        }
      }
}

/* The adjoint of im2col: adds cols [C k k, OH OW] into dx [C, H, W]. */
static void col2im(const nn_module *m, const float *cols, int64_t c, int64_t h, int64_t w,
                   int64_t oh, int64_t ow, float *dx) {
  int64_t k = m->k, s = m->stride, p = m->pad, d = m->dil;
  for (int64_t ch = 0; ch < c; ch++)
    for (int64_t ki = 0; ki < k; ki++)
      for (int64_t kj = 0; kj < k; kj++) {
        const float *row = cols + ((ch * k + ki) * k + kj) * oh * ow;
        for (int64_t i = 0; i < oh; i++) {
          int64_t y = i * s - p + ki * d;
          if (y < 0 || y >= h) continue;
          for (int64_t j = 0; j < ow; j++) {
            int64_t xx = j * s - p + kj * d;
            if (xx >= 0 && xx < w) dx[(ch * h + y) * w + xx] += row[i * ow + j];
          }
        }
      }
}

static int conv_cols(nn_module *m, const tensor *x, const int64_t *oshape) {
  int64_t d[4];
  as_nchw(x, d);
  int64_t shape[2] = {d[1] * m->k * m->k, oshape[2] * oshape[3]};
  return nn_ensure(&m->cols, 2, shape);
}

/* Per example: out [O, L] = bias (broadcast), then += W [O, CKK] cols. */
static int conv_forward(nn_module *m, const tensor *x, const tensor **y) {
  int64_t os[4];
  int rc = spatial_check(m, x, m->in_features, m->out_features, os);
  if (rc < 0 || (rc = nn_ensure(&m->out, 4, os)) < 0 || (rc = conv_cols(m, x, os)) < 0)
    return rc;
  int64_t xd[4];
  as_nchw(x, xd);
  int64_t c = xd[1], h = xd[2], w = xd[3], o = os[1], l = os[2] * os[3];
  int64_t ckk = c * m->k * m->k;
  const float *wt = tensor_data(m->params[0].value);
  float *cols = tensor_data(m->cols);
  for (int64_t n = 0; n < os[0]; n++) {
    float *out = tensor_data(m->out) + n * o * l;
    for (int64_t i = 0; i < o; i++) {
      float b = m->nparams > 1 ? tensor_data(m->params[1].value)[i] : 0.0f;
      for (int64_t j = 0; j < l; j++) out[i * l + j] = b;
    }
    im2col(m, tensor_data(x) + n * c * h * w, c, h, w, os[2], os[3], cols);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)o, (int)l, (int)ckk, 1.0f, wt,
                (int)ckk, cols, (int)l, 1.0f, out, (int)l);
  }
  *y = m->out;
  return 0;
}

/* Per example: dW += dy cols^T, db += row sums of dy; when asked,
 * dcols = W^T dy (into the cols buffer, no longer needed) and col2im. */
static int conv_backward(nn_module *m, const tensor *x, const tensor *dy, const tensor **dx) {
  int64_t os[4];
  int rc = spatial_check(m, x, m->in_features, m->out_features, os);
  if (rc < 0 || (rc = nn_check_grad(m, dy, 4, os)) < 0 || (rc = conv_cols(m, x, os)) < 0)
    return rc;
  if (dx && (rc = nn_ensure_like(&m->dx, x)) < 0) return rc;
  int64_t xd[4];
  as_nchw(x, xd);
  int64_t c = xd[1], h = xd[2], w = xd[3], o = os[1], l = os[2] * os[3];
  int64_t ckk = c * m->k * m->k;
  float *cols = tensor_data(m->cols), *dw = tensor_data(m->params[0].grad);
  if (dx) tensor_fill(m->dx, 0.0f);
  for (int64_t n = 0; n < os[0]; n++) {
    const float *g = tensor_data(dy) + n * o * l;
    im2col(m, tensor_data(x) + n * c * h * w, c, h, w, os[2], os[3], cols);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)o, (int)ckk, (int)l, 1.0f, g,
                (int)l, cols, (int)l, 1.0f, dw, (int)ckk);
    if (m->nparams > 1) {
      float *db = tensor_data(m->params[1].grad);
      for (int64_t i = 0; i < o; i++) {
        double s = 0;
        for (int64_t j = 0; j < l; j++) s += g[i * l + j];
        db[i] += (float)s;
      }
    }
    if (!dx) continue;
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)ckk, (int)l, (int)o, 1.0f,
                tensor_data(m->params[0].value), (int)ckk, g, (int)l, 0.0f, cols, (int)l);
    col2im(m, cols, c, h, w, os[2], os[3], tensor_data(m->dx) + n * c * h * w);
  }
  if (dx) *dx = m->dx;
  return 0;
}

static int conv_describe(const nn_module *m, char *buf, size_t n, int indent) {
  (void)indent;
  nn_append(buf, n, "nn.Conv2d(%lld -> %lld, %lldx%lld", (long long)m->in_features,
            (long long)m->out_features, (long long)m->k, (long long)m->k);
  if (m->stride != 1) nn_append(buf, n, ", stride %lld", (long long)m->stride);
  if (m->pad != 0) nn_append(buf, n, ", padding %lld", (long long)m->pad);
  if (m->dil != 1) nn_append(buf, n, ", dilation %lld", (long long)m->dil);
  if (m->nparams < 2) nn_append(buf, n, ", no bias");
  nn_append(buf, n, ")");
  return 0;
}

static const nn_module_ops conv_ops = {"Conv2d", conv_forward, conv_backward, conv_describe,
                                       NULL};

nn_module *nn_conv2d(int64_t in, int64_t out, int64_t k, const nn_conv_opts *o, rng_t *r) {
  nn_conv_opts d = o ? *o : NN_CONV_DEFAULTS;
  bool ok = in > 0 && out > 0 && k > 0 && d.stride > 0 && d.padding >= 0 && d.dilation > 0 &&
            in <= INT32_MAX && out <= INT32_MAX && k <= 4096 && d.stride <= INT32_MAX &&
            d.padding <= INT32_MAX && d.dilation <= 4096 && r;
  if (!ok) {
    drv_error(DRV_EINVAL, "nn.Conv2d(%lld -> %lld, %lld): channels, kernel, stride and "
              "dilation must be positive, padding >= 0%s", (long long)in, (long long)out,
              (long long)k, r ? "" : ", and an rng is required");
    return NULL;
  }
  nn_module *m = nn_module_new(&conv_ops);
  if (!m) return NULL;
  m->in_features = in;
  m->out_features = out;
  m->k = k;
  m->stride = d.stride;
  m->pad = d.padding;
  m->dil = d.dilation;
  m->nparams = d.bias ? 2 : 1;
  int64_t wshape[4] = {out, in, k, k};
  if (nn_param_init(&m->params[0], "weight", 4, wshape) < 0 ||
      (d.bias && nn_param_init(&m->params[1], "bias", 1, &out) < 0)) {
    nn_unref(m);
    drv_error(DRV_ENOMEM, "out of memory creating nn.Conv2d(%lld -> %lld)", (long long)in,
              (long long)out);
    return NULL;
  }
  nn_init(m, "uniform", r); /* PyTorch's default: U(+-1/sqrt(in k k)) */
  return m;
}

/* ---- pooling ----------------------------------------------------------------- */

static int pool_begin(nn_module *m, const tensor *x, int64_t *os) {
  int rc = spatial_check(m, x, 0, 0, os);
  return rc < 0 ? rc : nn_ensure(&m->out, 4, os);
}

/* Max over each window's in-bounds elements, remembering where it was. */
static int maxpool_forward(nn_module *m, const tensor *x, const tensor **y) {
  int64_t os[4];
  int rc = pool_begin(m, x, os);
  if (rc < 0) return rc;
  int64_t planes = os[0] * os[1], h = x->shape[2], w = x->shape[3], oh = os[2], ow = os[3];
  if (util_grow(&m->argmax, &m->capargmax, (size_t)(planes * oh * ow), sizeof *m->argmax, 64) < 0)
    return drv_error(DRV_ENOMEM, "nn.MaxPool2d: out of memory");
  const float *xp = tensor_data(x);
  float *yp = tensor_data(m->out);
  for (int64_t pl = 0; pl < planes; pl++)
    for (int64_t i = 0; i < oh; i++)
      for (int64_t j = 0; j < ow; j++) {
        int64_t best = -1, at = (pl * oh + i) * ow + j;
        for (int64_t ki = 0; ki < m->k; ki++)
          for (int64_t kj = 0; kj < m->k; kj++) {
            int64_t yy = i * m->stride - m->pad + ki, xx = j * m->stride - m->pad + kj;
            if (yy < 0 || yy >= h || xx < 0 || xx >= w) continue;
            int64_t idx = (pl * h + yy) * w + xx;
            /* NaN wins, as in PyTorch. */
            if (best < 0 || xp[idx] > xp[best] || isnan(xp[idx])) best = idx;
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
    return drv_error(DRV_EINVAL, "%s: backward of input %s without a forward of it",
                     nn_name_of(m, nm, sizeof nm), SHAPE(x, a));
  if ((rc = nn_ensure_like(&m->dx, x)) < 0) return rc;
  return tensor_fill(m->dx, 0.0f);
}

static int maxpool_backward(nn_module *m, const tensor *x, const tensor *dy, const tensor **dx) {
  if (!dx) return 0;
  int64_t os[4];
  int rc = pool_back_begin(m, x, dy, os);
  if (rc < 0) return rc;
  const float *g = tensor_data(dy);
  float *d = tensor_data(m->dx);
  int64_t n = tensor_numel(dy);
  for (int64_t i = 0; i < n; i++) d[m->argmax[i]] += g[i];
  *dx = m->dx;
  return 0;
}

/* Sum of each window's in-bounds elements over k*k: padding counts as 0
 * (count_include_pad), and with padding <= k/2 every window lies inside
 * the padded input, so the divisor is always k*k. */
static int avgpool_forward(nn_module *m, const tensor *x, const tensor **y) {
  int64_t os[4];
  int rc = pool_begin(m, x, os);
  if (rc < 0) return rc;
  int64_t planes = os[0] * os[1], h = x->shape[2], w = x->shape[3], oh = os[2], ow = os[3];
  const float *xp = tensor_data(x);
  float *yp = tensor_data(m->out), inv = 1.0f / (float)(m->k * m->k);
  for (int64_t pl = 0; pl < planes; pl++)
    for (int64_t i = 0; i < oh; i++)
      for (int64_t j = 0; j < ow; j++) {
        float s = 0.0f;
        for (int64_t ki = 0; ki < m->k; ki++)
          for (int64_t kj = 0; kj < m->k; kj++) {
            int64_t yy = i * m->stride - m->pad + ki, xx = j * m->stride - m->pad + kj;
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
  int64_t planes = os[0] * os[1], h = x->shape[2], w = x->shape[3], oh = os[2], ow = os[3];
  const float *g = tensor_data(dy);
  float *d = tensor_data(m->dx), inv = 1.0f / (float)(m->k * m->k);
  for (int64_t pl = 0; pl < planes; pl++)
    for (int64_t i = 0; i < oh; i++)
      for (int64_t j = 0; j < ow; j++) {
        float v = g[(pl * oh + i) * ow + j] * inv;
        for (int64_t ki = 0; ki < m->k; ki++)
          for (int64_t kj = 0; kj < m->k; kj++) {
            int64_t yy = i * m->stride - m->pad + ki, xx = j * m->stride - m->pad + kj;
            if (yy >= 0 && yy < h && xx >= 0 && xx < w) d[(pl * h + yy) * w + xx] += v;
          }
      }
  *dx = m->dx;
  return 0;
}

static int pool_describe(const nn_module *m, char *buf, size_t n, int indent) {
  (void)indent;
  nn_append(buf, n, "nn.%s(%lldx%lld", m->ops->type, (long long)m->k, (long long)m->k);
  if (m->stride != m->k) nn_append(buf, n, ", stride %lld", (long long)m->stride);
  if (m->pad != 0) nn_append(buf, n, ", padding %lld", (long long)m->pad);
  nn_append(buf, n, ")");
  return 0;
}

static const nn_module_ops maxpool_ops = {"MaxPool2d", maxpool_forward, maxpool_backward,
                                          pool_describe, NULL};
static const nn_module_ops avgpool_ops = {"AvgPool2d", avgpool_forward, avgpool_backward,
                                          pool_describe, NULL};

static nn_module *pool_new(const nn_module_ops *ops, int64_t k, int64_t stride, int64_t pad) {
  if (stride == 0) stride = k;
  if (k < 1 || k > 4096 || stride < 1 || stride > INT32_MAX || pad < 0 || pad > k / 2) {
    drv_error(DRV_EINVAL, "nn.%s(%lld, %lld, %lld): kernel and stride must be positive and "
              "padding in 0..kernel/2", ops->type, (long long)k, (long long)stride,
              (long long)pad);
    return NULL;
  }
  nn_module *m = nn_module_new(ops);
  if (!m) return NULL;
  m->k = k;
  m->stride = stride;
  m->pad = pad;
  m->dil = 1;
  return m;
}

nn_module *nn_maxpool2d(int64_t k, int64_t stride, int64_t padding) {
  return pool_new(&maxpool_ops, k, stride, padding);
}

nn_module *nn_avgpool2d(int64_t k, int64_t stride, int64_t padding) {
  return pool_new(&avgpool_ops, k, stride, padding);
}
