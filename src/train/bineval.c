/* bineval.c - AUC by ranks and log loss over a whole evaluation set. */
#include "train/bineval.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"

static const char *const names[] = {"auc", "logloss"};

int bineval_metric(const char *name) {
  for (unsigned i = 0; i < sizeof names / sizeof *names; i++)
    if (name && strcmp(name, names[i]) == 0) return (int)(1u << i);
  return -1;
}

const char *bineval_name(unsigned bit) {
  for (unsigned i = 0; i < sizeof names / sizeof *names; i++)
    if (bit == 1u << i) return names[i];
  return NULL;
}

/* Which column layout the loss gives: 1 logit, 2 class scores, 0 none. */
static int64_t binary_columns(const nn_loss *l) {
  if (!l || !l->ops || !l->ops->type) return 0;
  if (strcmp(l->ops->type, "BCEWithLogits") == 0) return 1;
  if (strcmp(l->ops->type, "CrossEntropy") == 0 || strcmp(l->ops->type, "NLL") == 0) return 2;
  return 0;
}

int bineval_check(const nn_loss *l, int64_t classes) {
  int64_t want = binary_columns(l);
  if (want && (classes < 0 || classes == want)) return 0;
  return err_set(DRV_EINVAL, "metrics auc and logloss need a binary classifier: loss "
                 "BCEWithLogits with one output, or CrossEntropy/NLL with two classes (got %s%s)",
                 l && l->ops && l->ops->type ? l->ops->type : "no loss",
                 want ? " with another number of outputs" : "");
}

static int grow(bineval *b, int64_t more) {
  if (b->n + more <= b->cap) return 0;
  int64_t cap = b->cap ? b->cap : 1024;
  while (cap < b->n + more) cap *= 2;
  bineval_row *r = realloc(b->rows, (size_t)cap * sizeof *r);
  if (!r) return err_set(DRV_ENOMEM, "metrics: out of memory for %lld scores", (long long)cap);
  b->rows = r, b->cap = cap;
  return 0;
}

/* Row b->n (counted over the whole evaluation, from 0). */
static int add_row(bineval *b, double score, double label) {
  if (label != 0.0 && label != 1.0)
    return err_set(DRV_ERANGE, "metrics auc and logloss need 0/1 labels (row %lld is %g)",
                   (long long)b->n, label);
  b->rows[b->n++] = (bineval_row){score, label};
  return 0;
}

int bineval_add_scores(bineval *b, const double *score, const double *label, int64_t n) {
  int rc = grow(b, n);
  for (int64_t i = 0; i < n && rc == 0; i++) rc = add_row(b, score[i], label[i]);
  return rc;
}

int bineval_add(bineval *b, const nn_loss *l, const tensor *out, const tensor *y) {
  int64_t n = out->shape[0], k = out->ndim == 2 ? out->shape[1] : 1;
  int rc = bineval_check(l, k);
  if (rc < 0) return rc;
  if (out->ndim > 2 || tensor_numel(y) != n || !tensor_is_contiguous(out) ||
      !tensor_is_contiguous(y))
    return err_set(DRV_ESHAPE, "metrics: %lld labels for %lld rows of output",
                   (long long)tensor_numel(y), (long long)n);
  if ((rc = grow(b, n)) < 0) return rc;
  const float *o = tensor_data(out), *t = tensor_data(y);
  for (int64_t i = 0; i < n && rc == 0; i++) {
    double s = k == 1 ? (double)o[i] : (double)o[i * 2 + 1] - (double)o[i * 2];
    rc = add_row(b, s, (double)t[i]);
  }
  return rc;
}

static int by_score(const void *a, const void *b) {
  double x = ((const bineval_row *)a)->score, y = ((const bineval_row *)b)->score;
  return (x > y) - (x < y);
}

double bineval_auc(bineval *b) {
  int64_t pos = 0;
  for (int64_t i = 0; i < b->n; i++) {
    if (isnan(b->rows[i].score)) return NAN;
    pos += b->rows[i].label == 1.0;
  }
  int64_t neg = b->n - pos;
  if (pos == 0 || neg == 0) return NAN;
  qsort(b->rows, (size_t)b->n, sizeof *b->rows, by_score);
  /* Ranks from 1; a run of equal scores [i, j) shares the mean rank
   * (i + 1 + j) / 2. Doubles hold the sums exactly past 2^53 / n rows. */
  double rank_sum = 0;
  for (int64_t i = 0, j; i < b->n; i = j) {
    int64_t p = 0;
    for (j = i; j < b->n && b->rows[j].score == b->rows[i].score; j++) p += b->rows[j].label == 1.0;
    rank_sum += (double)p * ((double)(i + 1) + (double)j) / 2.0;
  }
  double p = (double)pos, q = (double)neg;
  return (rank_sum - p * (p + 1) / 2.0) / (p * q);
}

double bineval_logloss(const bineval *b) {
  if (b->n == 0) return NAN;
  double sum = 0;
  for (int64_t i = 0; i < b->n; i++) {
    double p = 1.0 / (1.0 + exp(-b->rows[i].score));
    if (p < DBL_EPSILON) p = DBL_EPSILON;
    if (p > 1.0 - DBL_EPSILON) p = 1.0 - DBL_EPSILON;
    sum -= b->rows[i].label == 1.0 ? log(p) : log1p(-p);
  }
  return sum / (double)b->n;
}

void bineval_free(bineval *b) {
  free(b->rows);
  *b = (bineval){0};
}
