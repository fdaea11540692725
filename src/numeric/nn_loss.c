/* nn_loss.c - losses (CrossEntropy, MSE, BCEWithLogits, L1, Huber, NLL): mean loss, its
 * gradient with respect to the predictions, and correct-prediction counts.
 *
 * Each loss keeps its gradient buffer between calls (tensor_resize), so a
 * warm step allocates nothing. The reductions accumulate in double.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "numeric/nn.h"
#include "numeric/nn_int.h"

/* ============================== helpers ================================= */

/* Makes *t a contiguous tensor shaped like `like`: allocated on first use,
 * afterwards resized in place. */
static int ensure_like(tensor **t, const tensor *like) {
  if (*t) return tensor_resize(*t, like->ndim, like->shape);
  *t = tensor_new(like->ndim, like->shape);
  return *t ? 0 : DRV_ENOMEM;
}

/* exp of a non-positive argument only, so it never overflows. */
static inline float sigmoid(float x) {
  if (x >= 0.0f) return 1.0f / (1.0f + expf(-x));
  float z = expf(x);
  return z / (1.0f + z);
}

/* ============================== common ================================== */

static nn_loss *loss_new(const nn_loss_ops *ops) {
  nn_loss *l = calloc(1, sizeof *l);
  if (!l) {
    err_set(DRV_ENOMEM, "out of memory creating nn.%s", ops->type);
    return NULL;
  }
  l->ops = ops;
  l->refs = 1;
  return l;
}

nn_loss *nn_loss_ref(nn_loss *l) {
  if (l) l->refs++;
  return l;
}

void nn_loss_unref(nn_loss *l) {
  if (!l || --l->refs > 0) return;
  tensor_free(l->grad);
  tensor_free(l->scratch);
  free(l);
}

/* pred must be a non-empty contiguous [N, C] matrix. */
static int check_pred(const nn_loss *l, const tensor *pred) {
  char a[64];
  if (pred->ndim != 2 || pred->shape[0] < 1 || pred->shape[1] < 1)
    return err_set(DRV_ESHAPE, "nn.%s: prediction %s is not a non-empty [batch, outputs] "
                   "matrix", l->ops->type, SHAPE(pred, a));
  if (!tensor_is_contiguous(pred))
    return err_set(DRV_EINVAL, "nn.%s: prediction %s is not contiguous", l->ops->type,
                   SHAPE(pred, a));
  return 0;
}

/* Element-wise losses: target shaped like pred, or [N] when pred is [N, 1]. */
static int check_same(const nn_loss *l, const tensor *pred, const tensor *target) {
  char a[64], b[64];
  int rc = check_pred(l, pred);
  if (rc < 0) return rc;
  bool column = pred->shape[1] == 1 && target->ndim == 1 && target->shape[0] == pred->shape[0];
  if (!column && !tensor_same_shape(pred, target))
    return err_set(DRV_ESHAPE, "nn.%s: prediction %s and target %s do not match",
                   l->ops->type, SHAPE(pred, a), SHAPE(target, b));
  if (!tensor_is_contiguous(target))
    return err_set(DRV_EINVAL, "nn.%s: target %s is not contiguous", l->ops->type,
                   SHAPE(target, b));
  return 0;
}

/* ---- CrossEntropy ------------------------------------------------------------ */

/* pred [N, C] logits; target [N] (or [N, 1]) of integral class ids in 0..C-1. */
static int ce_check(const nn_loss *l, const tensor *pred, const tensor *target) {
  char a[64], b[64];
  int rc = check_pred(l, pred);
  if (rc < 0) return rc;
  int64_t n = pred->shape[0];
  bool ok = (target->ndim == 1 && target->shape[0] == n) ||
            (target->ndim == 2 && target->shape[0] == n && target->shape[1] == 1);
  if (!ok)
    return err_set(DRV_ESHAPE, "nn.%s: prediction %s and target %s do not match "
                   "(expected [%lld] class ids)", l->ops->type, SHAPE(pred, a), SHAPE(target, b),
                   (long long)n);
  if (!tensor_is_contiguous(target))
    return err_set(DRV_EINVAL, "nn.%s: target %s is not contiguous",
                   l->ops->type, SHAPE(target, b));
  const float *t = tensor_data(target);
  int64_t classes = pred->shape[1];
  for (int64_t i = 0; i < n; i++)
    if (!(t[i] >= 0.0f && t[i] < (float)classes) || t[i] != floorf(t[i]))
      return err_set(DRV_ERANGE, "nn.%s: target row %lld has class %g, expected "
                     "an integer in 0..%lld", l->ops->type, (long long)i, (double)t[i],
                     (long long)(classes - 1));
  return 0;
}

static float row_max(const float *row, int64_t c) {
  float mx = row[0];
  for (int64_t j = 1; j < c; j++) mx = row[j] > mx ? row[j] : mx;
  return mx;
}

/* Per row: log(sum_j exp(x_j)) - x_label, with the sum taken of
 * exp(x_j - max) so that it never overflows, and max added back in double
 * so that large logits keep their precision. */
static int ce_forward(nn_loss *l, const tensor *pred, const tensor *target, float *loss) {
  int rc = ce_check(l, pred, target);
  if (rc < 0) return rc;
  int64_t n = pred->shape[0], c = pred->shape[1];
  const float *p = tensor_data(pred), *t = tensor_data(target);
  double total = 0.0;
  for (int64_t i = 0; i < n; i++) {
    const float *row = p + i * c;
    float mx = row_max(row, c), s = 0.0f;
    for (int64_t j = 0; j < c; j++) s += expf(row[j] - mx);
    total += ((double)mx - (double)row[(int64_t)t[i]]) + log((double)s);
  }
  *loss = (float)(total / (double)n);
  return 0;
}

/* d/dlogits = (softmax - onehot) / N. */
static int ce_backward(nn_loss *l, const tensor *pred, const tensor *target,
                       const tensor **dpred) {
  int rc = ce_check(l, pred, target);
  if (rc < 0 || (rc = ensure_like(&l->grad, pred)) < 0) return rc;
  int64_t n = pred->shape[0], c = pred->shape[1];
  const float *p = tensor_data(pred), *t = tensor_data(target);
  float inv_n = 1.0f / (float)n;
  for (int64_t i = 0; i < n; i++) {
    const float *row = p + i * c;
    float *g = tensor_data(l->grad) + i * c;
    float mx = row_max(row, c), s = 0.0f;
    for (int64_t j = 0; j < c; j++) s += g[j] = expf(row[j] - mx);
    float scale = inv_n / s;
    for (int64_t j = 0; j < c; j++) g[j] *= scale;
    g[(int64_t)t[i]] -= inv_n;
  }
  *dpred = l->grad;
  return 0;
}

static const nn_loss_ops ce_ops = {"CrossEntropy", ce_forward, ce_backward};

/* ---- MSE ---------------------------------------------------------------------- */

/* Mean over all N*K elements (PyTorch's reduction='mean'). */
static int mse_forward(nn_loss *l, const tensor *pred, const tensor *target, float *loss) {
  int rc = check_same(l, pred, target);
  if (rc < 0) return rc;
  int64_t n = tensor_numel(pred);
  const float *p = tensor_data(pred), *t = tensor_data(target);
  double total = 0.0;
  for (int64_t i = 0; i < n; i++) {
    double d = (double)p[i] - (double)t[i];
    total += d * d;
  }
  *loss = (float)(total / (double)n);
  return 0;
}

/* g = k (p - t); restrict on parameters lets GCC vectorize it. */
static void mse_grad(const float *restrict p, const float *restrict t, float *restrict g,
                     float k, int64_t n) {
  EACH(i, n, g[i] = k * (p[i] - t[i]));
}

static int mse_backward(nn_loss *l, const tensor *pred, const tensor *target,
                        const tensor **dpred) {
  int rc = check_same(l, pred, target);
  if (rc < 0 || (rc = ensure_like(&l->grad, pred)) < 0) return rc;
  int64_t n = tensor_numel(pred);
  mse_grad(tensor_data(pred), tensor_data(target), tensor_data(l->grad), 2.0f / (float)n, n);
  *dpred = l->grad;
  return 0;
}

static const nn_loss_ops mse_ops = {"MSE", mse_forward, mse_backward};

/* ---- BCEWithLogits ------------------------------------------------------------ */

static int bce_check(const nn_loss *l, const tensor *pred, const tensor *target) {
  int rc = check_same(l, pred, target);
  if (rc < 0) return rc;
  const float *t = tensor_data(target);
  int64_t n = tensor_numel(pred), k = pred->shape[1];
  for (int64_t i = 0; i < n; i++)
    if (!(t[i] >= 0.0f && t[i] <= 1.0f))
      return err_set(DRV_ERANGE, "nn.BCEWithLogits: target [%lld, %lld] is %g, expected a "
                     "value in [0, 1]", (long long)(i / k), (long long)(i % k), (double)t[i]);
  return 0;
}

/* Mean over all elements of max(x, 0) - x t + log(1 + exp(-|x|)), the form
 * that neither overflows nor loses precision for large |x|. */
static int bce_forward(nn_loss *l, const tensor *pred, const tensor *target, float *loss) {
  int rc = bce_check(l, pred, target);
  if (rc < 0) return rc;
  int64_t n = tensor_numel(pred);
  const float *p = tensor_data(pred), *t = tensor_data(target);
  double total = 0.0;
  for (int64_t i = 0; i < n; i++) {
    float x = p[i];
    total += (double)((x > 0.0f ? x : 0.0f) - x * t[i] + log1pf(expf(-fabsf(x))));
  }
  *loss = (float)(total / (double)n);
  return 0;
}

/* d/dx = (sigmoid(x) - t) / (N*K). */
static int bce_backward(nn_loss *l, const tensor *pred, const tensor *target,
                        const tensor **dpred) {
  int rc = bce_check(l, pred, target);
  if (rc < 0 || (rc = ensure_like(&l->grad, pred)) < 0) return rc;
  int64_t n = tensor_numel(pred);
  const float *p = tensor_data(pred), *t = tensor_data(target);
  float *g = tensor_data(l->grad), inv = 1.0f / (float)n;
  for (int64_t i = 0; i < n; i++) g[i] = (sigmoid(p[i]) - t[i]) * inv;
  *dpred = l->grad;
  return 0;
}

static const nn_loss_ops bce_ops = {"BCEWithLogits", bce_forward, bce_backward};

/* ---- L1 and Huber --------------------------------------------------------------- */

/* Mean over all elements of |d|, d = pred - target. */
static int l1_forward(nn_loss *l, const tensor *pred, const tensor *target, float *loss) {
  int rc = check_same(l, pred, target);
  if (rc < 0) return rc;
  int64_t n = tensor_numel(pred);
  const float *p = tensor_data(pred), *t = tensor_data(target);
  double total = 0.0;
  for (int64_t i = 0; i < n; i++) total += fabs((double)p[i] - (double)t[i]);
  *loss = (float)(total / (double)n);
  return 0;
}

/* sign(d) / n, 0 where d == 0 (PyTorch's sign). */
static int l1_backward(nn_loss *l, const tensor *pred, const tensor *target,
                       const tensor **dpred) {
  int rc = check_same(l, pred, target);
  if (rc < 0 || (rc = ensure_like(&l->grad, pred)) < 0) return rc;
  int64_t n = tensor_numel(pred);
  const float *p = tensor_data(pred), *t = tensor_data(target);
  float *g = tensor_data(l->grad), k = 1.0f / (float)n;
  for (int64_t i = 0; i < n; i++) g[i] = p[i] > t[i] ? k : p[i] < t[i] ? -k : 0.0f;
  *dpred = l->grad;
  return 0;
}

static const nn_loss_ops l1_ops = {"L1", l1_forward, l1_backward};

static int huber_forward(nn_loss *l, const tensor *pred, const tensor *target, float *loss) {
  int rc = check_same(l, pred, target);
  if (rc < 0) return rc;
  int64_t n = tensor_numel(pred);
  const float *p = tensor_data(pred), *t = tensor_data(target);
  double total = 0.0, delta = l->delta;
  for (int64_t i = 0; i < n; i++) {
    double d = fabs((double)p[i] - (double)t[i]);
    total += d < delta ? 0.5 * d * d : delta * (d - 0.5 * delta);
  }
  *loss = (float)(total / (double)n);
  return 0;
}

/* d / n inside the delta band, delta sign(d) / n outside. */
static int huber_backward(nn_loss *l, const tensor *pred, const tensor *target,
                          const tensor **dpred) {
  int rc = check_same(l, pred, target);
  if (rc < 0 || (rc = ensure_like(&l->grad, pred)) < 0) return rc;
  int64_t n = tensor_numel(pred);
  const float *p = tensor_data(pred), *t = tensor_data(target);
  float *g = tensor_data(l->grad), k = 1.0f / (float)n, dl = l->delta;
  for (int64_t i = 0; i < n; i++) {
    float d = p[i] - t[i];
    g[i] = k * (d > dl ? dl : d < -dl ? -dl : d);
  }
  *dpred = l->grad;
  return 0;
}

static const nn_loss_ops huber_ops = {"Huber", huber_forward, huber_backward};

/* ---- NLL ------------------------------------------------------------------------ */

/* pred [N, C] log-probabilities; the mean of -pred[i, target_i]. Targets
 * are checked as CrossEntropy's. */
static int nll_forward(nn_loss *l, const tensor *pred, const tensor *target, float *loss) {
  int rc = ce_check(l, pred, target);
  if (rc < 0) return rc;
  int64_t n = pred->shape[0], c = pred->shape[1];
  const float *p = tensor_data(pred), *t = tensor_data(target);
  double total = 0.0;
  for (int64_t i = 0; i < n; i++) total -= p[i * c + (int64_t)t[i]];
  *loss = (float)(total / (double)n);
  return 0;
}

static int nll_backward(nn_loss *l, const tensor *pred, const tensor *target,
                        const tensor **dpred) {
  int rc = ce_check(l, pred, target);
  if (rc < 0 || (rc = ensure_like(&l->grad, pred)) < 0) return rc;
  int64_t n = pred->shape[0], c = pred->shape[1];
  const float *t = tensor_data(target);
  float *g = tensor_data(l->grad);
  memset(g, 0, (size_t)(n * c) * sizeof *g);
  for (int64_t i = 0; i < n; i++) g[i * c + (int64_t)t[i]] = -1.0f / (float)n;
  *dpred = l->grad;
  return 0;
}

static const nn_loss_ops nll_ops = {"NLL", nll_forward, nll_backward};

nn_loss *nn_l1(void) { return loss_new(&l1_ops); }
nn_loss *nn_nll(void) { return loss_new(&nll_ops); }

nn_loss *nn_huber(float delta) {
  if (!(delta > 0.0f) || !isfinite(delta)) {
    err_set(DRV_EINVAL, "nn.Huber: delta %g must be positive and finite", (double)delta);
    return NULL;
  }
  nn_loss *l = loss_new(&huber_ops);
  if (l) l->delta = delta;
  return l;
}

nn_loss *nn_cross_entropy(void) { return loss_new(&ce_ops); }
nn_loss *nn_mse(void) { return loss_new(&mse_ops); }
nn_loss *nn_bce_with_logits(void) { return loss_new(&bce_ops); }

int nn_loss_forward(nn_loss *l, const tensor *pred, const tensor *target, float *loss) {
  if (!l || !pred || !target || !loss) return err_set(DRV_EINVAL, "nn_loss_forward: NULL argument");
  return l->ops->forward(l, pred, target, loss);
}

int nn_loss_backward(nn_loss *l, const tensor *pred, const tensor *target,
                     const tensor **dpred) {
  if (!l || !pred || !target || !dpred)
    return err_set(DRV_EINVAL, "nn_loss_backward: NULL argument");
  return l->ops->backward(l, pred, target, dpred);
}

/* CrossEntropy and NLL: rows whose argmax is the class id. BCEWithLogits: rows whose
 * every output agrees, (logit > 0) == (target > 0.5), so the count never
 * exceeds the batch (per element for K == 1). Negative DRV_E* on bad input. */
int64_t nn_loss_correct(const nn_loss *l, const tensor *pred, const tensor *target) {
  if (!l || !pred || !target) return err_set(DRV_EINVAL, "nn_loss_correct: NULL argument");
  int rc;
  int64_t count = 0;
  if (l->ops == &ce_ops || l->ops == &nll_ops) {
    if ((rc = ce_check(l, pred, target)) < 0) return rc;
    int64_t n = pred->shape[0], c = pred->shape[1];
    const float *p = tensor_data(pred), *t = tensor_data(target);
    for (int64_t i = 0; i < n; i++) {
      const float *row = p + i * c;
      int64_t best = 0;
      for (int64_t j = 1; j < c; j++)
        if (row[j] > row[best]) best = j;
      count += best == (int64_t)t[i];
    }
    return count;
  }
  if (l->ops == &bce_ops) {
    if ((rc = bce_check(l, pred, target)) < 0) return rc;
    int64_t n = pred->shape[0], k = pred->shape[1];
    const float *p = tensor_data(pred), *t = tensor_data(target);
    for (int64_t i = 0; i < n; i++) {
      bool all = true;
      for (int64_t j = 0; j < k; j++)
        all = all && ((p[i * k + j] > 0.0f) == (t[i * k + j] > 0.5f));
      count += all;
    }
    return count;
  }
  return -1;
}
