/* nn_interact.c - DLRM's dot interaction: a row's F vectors of d (the
 * dense part's and each field's embedding, side by side in [N, F*d]) give
 * the F(F-1)/2 dot products of their distinct pairs, the features a
 * DLRM's top MLP reads.
 *
 * Layout as DLRM's interact_features("dot", interaction_itself False):
 * pairs (i, j) with j < i, ordered i = 1..F-1 then j = 0..i-1, i.e.
 * (1,0), (2,0), (2,1), (3,0)...; keep_first puts vector 0 (the dense
 * part) before them, as DLRM concatenates it: [N, d + F(F-1)/2].
 * in_features holds F; out_features is 1 when the first vector is kept.
 */
#include <string.h>

#include "base/err.h"
#include "numeric/nn.h"
#include "numeric/nn_int.h"

static float dot(const float *a, const float *b, int64_t d) {
  float s = 0.0f;
  for (int64_t k = 0; k < d; k++) s += a[k] * b[k];
  return s;
}

/* x [N, F*d] with F = m->in_features: d in *d, the output's width in *w. */
static int dot_shape(const nn_module *m, const tensor *x, int64_t *d, int64_t *w) {
  char a[64], nm[96];
  int64_t f = m->in_features;
  if (x->ndim != 2 || x->shape[1] % f != 0 || x->shape[1] == 0)
    return err_set(DRV_ESHAPE, "%s: input %s is not [N, %lld * d] (%lld vectors side by side)",
                   nn_name_of(m, nm, sizeof nm), SHAPE(x, a), (long long)f, (long long)f);
  *d = x->shape[1] / f;
  *w = f * (f - 1) / 2 + (m->out_features ? *d : 0);
  return nn_need_contiguous(m, x, "input");
}

static int dot_forward(nn_module *m, const tensor *x, const tensor **y) {
  int64_t d, w, f = m->in_features;
  int rc = dot_shape(m, x, &d, &w);
  if (rc < 0 || (rc = nn_ensure(&m->out, 2, (int64_t[]){x->shape[0], w})) < 0) return rc;
  const float *xd = tensor_data(x);
  float *yd = tensor_data(m->out);
  for (int64_t n = 0; n < x->shape[0]; n++) {
    const float *v = xd + n * f * d;
    float *o = yd + n * w;
    if (m->out_features) memcpy(o, v, (size_t)d * sizeof *o), o += d;
    for (int64_t i = 1; i < f; i++)
      for (int64_t j = 0; j < i; j++) *o++ = dot(v + i * d, v + j * d, d);
  }
  *y = m->out;
  return 0;
}

/* d(v_i . v_j) = v_j for v_i and v_i for v_j. */
static int dot_backward(nn_module *m, const tensor *x, const tensor *dy, const tensor **dx) {
  int64_t d, w, f = m->in_features;
  int rc = dot_shape(m, x, &d, &w);
  if (rc < 0 || (rc = nn_check_grad(m, dy, 2, (int64_t[]){x->shape[0], w})) < 0) return rc;
  if (!dx) return 0;
  if ((rc = nn_ensure_like(&m->dx, x)) < 0) return rc;
  tensor_fill(m->dx, 0.0f);
  const float *xd = tensor_data(x), *gd = tensor_data(dy);
  float *dd = tensor_data(m->dx);
  for (int64_t n = 0; n < x->shape[0]; n++) {
    const float *v = xd + n * f * d, *g = gd + n * w;
    float *dv = dd + n * f * d;
    if (m->out_features)
      for (int64_t k = 0; k < d; k++) dv[k] = *g++;
    for (int64_t i = 1; i < f; i++)
      for (int64_t j = 0; j < i; j++, g++)
        for (int64_t k = 0; k < d; k++) {
          dv[i * d + k] += *g * v[j * d + k];
          dv[j * d + k] += *g * v[i * d + k];
        }
  }
  *dx = m->dx;
  return 0;
}

static int dot_describe(const nn_module *m, char *buf, size_t n, int indent) {
  (void)indent;
  nn_append(buf, n, "nn.DotInteraction(%lld%s)", (long long)m->in_features,
            m->out_features ? ", keep_first" : "");
  return 0;
}

static const nn_module_ops dot_ops = {"DotInteraction", dot_forward, dot_backward, dot_describe,
                                      NULL};

nn_module *nn_dot_interaction(int64_t fields, bool keep_first) {
  if (fields < 2 || fields > 4096) {
    err_set(DRV_EINVAL, "nn.DotInteraction: fields must be 2 to 4096 vectors (got %lld)",
            (long long)fields);
    return NULL;
  }
  nn_module *m = nn_module_new(&dot_ops);
  if (!m) return NULL;
  m->in_features = fields;
  m->out_features = keep_first;
  return m;
}
