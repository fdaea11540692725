/* nn_containers.c - the containers beyond Sequential: Residual (y = x +
 * m(x)) and Concat (children side by side, outputs joined along dimension
 * 1). Both keep their own output and input-gradient buffers, so a parent
 * Sequential treats them as leaves.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "numeric/nn.h"
#include "numeric/nn_int.h"
#include "base/util.h"

/* Prefixes a child's error with the container's name and its position. */
static int wrap(const nn_module *m, int rc, int pos) {
  char msg[1024];
  snprintf(msg, sizeof msg, "%s", err_msg());
  return err_set(rc, "nn.%s (%d): %s", m->ops->type, pos, msg);
}

/* ---- Residual ---------------------------------------------------------------- */

static int residual_forward(nn_module *m, const tensor *x, const tensor **y) {
  char a[64], b[64];
  const tensor *h;
  int rc = nn_need_contiguous(m, x, "input");
  if (rc < 0) return rc;
  if ((rc = nn_forward(m->children[0], x, &h)) < 0) return wrap(m, rc, 1);
  if (!tensor_same_shape(h, x))
    return err_set(DRV_ESHAPE, "nn.Residual: its module maps %s to %s; the shapes must match",
                   SHAPE(x, a), SHAPE(h, b));
  if ((rc = nn_ensure_like(&m->out, x)) < 0) return rc;
  const float *xp = tensor_data(x), *hp = tensor_data(h);
  float *o = tensor_data(m->out);
  for (int64_t i = 0; i < tensor_numel(x); i++) o[i] = xp[i] + hp[i];
  *y = m->out;
  return 0;
}

/* dx = dy + the module's input gradient; its parameters accumulate. */
static int residual_backward(nn_module *m, const tensor *x, const tensor *dy, const tensor **dx) {
  const tensor *dh;
  int rc = nn_check_grad(m, dy, x->ndim, x->shape);
  if (rc < 0) return rc;
  if ((rc = nn_backward(m->children[0], x, dy, dx ? &dh : NULL)) < 0) return wrap(m, rc, 1);
  if (!dx) return 0;
  if ((rc = nn_ensure_like(&m->dx, x)) < 0) return rc;
  const float *g = tensor_data(dy), *hp = tensor_data(dh);
  float *o = tensor_data(m->dx);
  for (int64_t i = 0; i < tensor_numel(x); i++) o[i] = g[i] + hp[i];
  *dx = m->dx;
  return 0;
}

static const nn_module_ops residual_ops = {"Residual", residual_forward, residual_backward,
                                           nn_describe_container, NULL};

nn_module *nn_residual(nn_module *child) {
  if (!child) {
    err_set(DRV_EINVAL, "nn.Residual: NULL module");
    return NULL;
  }
  nn_module *m = nn_module_new(&residual_ops);
  nn_module **kids = m ? calloc(1, sizeof *kids) : NULL;
  if (!kids) {
    nn_unref(m);
    err_set(DRV_ENOMEM, "out of memory creating nn.Residual");
    return NULL;
  }
  m->children = kids;
  m->capchildren = 1;
  m->children[m->nchildren++] = nn_ref(child);
  child->nparents++;
  return m;
}

/* ---- Concat ------------------------------------------------------------------- */

/* The product of the dimensions after 1. */
static int64_t trailing(const tensor *t) {
  int64_t r = 1;
  for (int d = 2; d < t->ndim; d++) r *= t->shape[d];
  return r;
}

/* Output i's shape must equal output 0's except in dimension 1. */
static int concat_check(const tensor *first, const tensor *y, int i) {
  char a[64], b[64];
  bool ok = y->ndim == first->ndim && y->ndim >= 2;
  for (int d = 0; ok && d < y->ndim; d++) ok = d == 1 || y->shape[d] == first->shape[d];
  if (!ok)
    return err_set(DRV_ESHAPE, "nn.Concat: output %d is %s, output 1 is %s; they may differ "
                   "only in dimension 2", i + 1, SHAPE(y, a), SHAPE(first, b));
  return 0;
}

/* Rows of the output: [N, sum of widths, rest] with rest = the product of
 * the dimensions after 1; child i's block of each example is contiguous. */
static int concat_forward(nn_module *m, const tensor *x, const tensor **y) {
  if (m->nchildren == 0) return err_set(DRV_EINVAL, "nn.Concat: no modules");
  const tensor *h[64];
  if (m->nchildren > 64) return err_set(DRV_EINVAL, "nn.Concat: more than 64 modules");
  int64_t width = 0;
  /* Each child's width, for backward (a Sequential child has no out). */
  if (util_grow(&m->argmax, &m->capargmax, (size_t)m->nchildren, sizeof *m->argmax, 4) < 0)
    return err_set(DRV_ENOMEM, "nn.Concat: out of memory");
  for (int i = 0; i < m->nchildren; i++) {
    int rc = nn_forward(m->children[i], x, &h[i]);
    if (rc < 0) return wrap(m, rc, i + 1);
    if ((rc = concat_check(h[0], h[i], i)) < 0) return rc;
    width += m->argmax[i] = h[i]->shape[1];
  }
  int64_t shape[4];
  memcpy(shape, h[0]->shape, sizeof shape);
  shape[1] = width;
  int rc = nn_ensure(&m->out, h[0]->ndim, shape);
  if (rc < 0) return rc;
  int64_t n = shape[0], rest = trailing(m->out), at = 0;
  for (int i = 0; i < m->nchildren; i++) {
    int64_t blk = h[i]->shape[1] * rest;
    for (int64_t e = 0; e < n; e++)
      memcpy(tensor_data(m->out) + e * width * rest + at, tensor_data(h[i]) + e * blk,
             (size_t)blk * sizeof(float));
    at += blk;
  }
  *y = m->out;
  return 0;
}

/* Each child's block of dy (copied contiguous into m->mask) goes through
 * its backward; their input gradients add up. */
static int concat_backward(nn_module *m, const tensor *x, const tensor *dy, const tensor **dx) {
  char a[64];
  if (!m->out || !tensor_same_shape(m->out, dy) || m->nchildren == 0)
    return err_set(DRV_ESHAPE, "nn.Concat: gradient %s does not match the last output",
                   SHAPE(dy, a));
  int64_t n = dy->shape[0], width = dy->shape[1], at = 0;
  int64_t rest = trailing(dy);
  int rc = dx ? nn_ensure_like(&m->dx, x) : 0;
  if (rc < 0 || (dx && (rc = tensor_fill(m->dx, 0.0f)) < 0)) return rc;
  for (int i = 0; i < m->nchildren; i++) {
    int64_t shape[4];
    memcpy(shape, dy->shape, sizeof shape);
    shape[1] = m->argmax[i];
    if ((rc = nn_ensure(&m->mask, dy->ndim, shape)) < 0) return rc;
    int64_t blk = shape[1] * rest;
    for (int64_t e = 0; e < n; e++)
      memcpy(tensor_data(m->mask) + e * blk, tensor_data(dy) + e * width * rest + at,
             (size_t)blk * sizeof(float));
    at += blk;
    const tensor *d;
    if ((rc = nn_backward(m->children[i], x, m->mask, dx ? &d : NULL)) < 0) return wrap(m, rc, i + 1);
    if (dx) tensor_axpy(1.0f, d, m->dx);
  }
  if (dx) *dx = m->dx;
  return 0;
}

static const nn_module_ops concat_ops = {"Concat", concat_forward, concat_backward,
                                         nn_describe_container, NULL};

nn_module *nn_concat(void) { return nn_module_new(&concat_ops); }

/* ---- Sum ---------------------------------------------------------------------- */

/* Every child gets x; their outputs, all of one shape, are added: a wide
 * and a deep part of a click-through model give one logit. */
static int sum_forward(nn_module *m, const tensor *x, const tensor **y) {
  if (m->nchildren == 0) return err_set(DRV_EINVAL, "nn.Sum: no modules");
  const tensor *h;
  int rc = nn_forward(m->children[0], x, &h);
  if (rc < 0) return wrap(m, rc, 1);
  if ((rc = nn_ensure_like(&m->out, h)) < 0 || (rc = tensor_copy(m->out, h)) < 0) return rc;
  for (int i = 1; i < m->nchildren; i++) {
    if ((rc = nn_forward(m->children[i], x, &h)) < 0) return wrap(m, rc, i + 1);
    if (!tensor_same_shape(h, m->out)) {
      char a[64], b[64];
      return err_set(DRV_ESHAPE, "nn.Sum: output %d is %s, output 1 is %s; they must be equal",
                     i + 1, SHAPE(h, a), SHAPE(m->out, b));
    }
    tensor_axpy(1.0f, h, m->out);
  }
  *y = m->out;
  return 0;
}

/* Each child's output gradient is dy itself; their input gradients add up. */
static int sum_backward(nn_module *m, const tensor *x, const tensor *dy, const tensor **dx) {
  char a[64];
  if (!m->out || !tensor_same_shape(m->out, dy) || m->nchildren == 0)
    return err_set(DRV_ESHAPE, "nn.Sum: gradient %s does not match the last output",
                   SHAPE(dy, a));
  int rc = dx ? nn_ensure_like(&m->dx, x) : 0;
  if (rc < 0 || (dx && (rc = tensor_fill(m->dx, 0.0f)) < 0)) return rc;
  for (int i = 0; i < m->nchildren; i++) {
    const tensor *d;
    if ((rc = nn_backward(m->children[i], x, dy, dx ? &d : NULL)) < 0) return wrap(m, rc, i + 1);
    if (dx) tensor_axpy(1.0f, d, m->dx);
  }
  if (dx) *dx = m->dx;
  return 0;
}

static const nn_module_ops sum_ops = {"Sum", sum_forward, sum_backward, nn_describe_container,
                                      NULL};

nn_module *nn_sum(void) { return nn_module_new(&sum_ops); }
