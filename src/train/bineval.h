/* bineval.h - a binary classifier's evaluation metrics over a whole
 * dataset: AUC and log loss.
 *
 * AUC is a property of the ranking of every evaluated example, not of a
 * batch: the evaluation adds each batch's scores and labels here and the
 * AUC is computed once at the end (a mean of batch AUCs would be another
 * number). The score of a row is its logit: the output itself for
 * BCEWithLogits with one output column, out[1] - out[0] for CrossEntropy
 * or NLL with two classes (class 1's probability is sigmoid of that, for
 * logits and log-probabilities alike). Ranking logits rather than
 * probabilities keeps rows apart that a float probability would tie at 0
 * or 1; the AUC is otherwise the same.
 *
 *   AUC      Mann-Whitney: (sum of the positives' ranks - P(P+1)/2) / (P N),
 *            rows ranked by score ascending, tied scores given the mean of
 *            their ranks (scikit-learn's roc_auc_score). NAN when the set
 *            holds one class only, or a score is NaN.
 *   log loss mean of -[y log p + (1-y) log(1-p)], p = sigmoid(score)
 *            clamped to [eps, 1 - eps], eps = DBL_EPSILON (scikit-learn's
 *            log_loss on float64 probabilities).
 * Labels are 0 or 1 (another value is refused).
 */
#ifndef DROVER_BINEVAL_H
#define DROVER_BINEVAL_H

#include <stdint.h>

#include "numeric/nn.h"
#include "numeric/tensor.h"

/* The metrics an evaluation computes beyond loss and accuracy (bits). */
enum { BINEVAL_AUC = 1u << 0, BINEVAL_LOGLOSS = 1u << 1 };
#define BINEVAL_ALL (BINEVAL_AUC | BINEVAL_LOGLOSS)
/* The names, as a message lists them. */
#define BINEVAL_NAMES "\"auc\", \"logloss\""

/* The bit of a metric's name ("auc", "logloss"); -1 when unknown. */
int bineval_metric(const char *name);
/* Its name; NULL for anything but one known bit. */
const char *bineval_name(unsigned bit);

typedef struct bineval_row {
  double score;
  double label; /* 0 or 1 */
} bineval_row;

/* The scores and labels seen so far. Zero-initialised is empty. */
typedef struct bineval {
  bineval_row *rows; /* owned */
  int64_t n, cap;
} bineval;

/* 0 when loss l, on outputs of `classes` columns (-1: not known yet, the
 * loss alone is checked), is a binary classifier these metrics apply to;
 * else a negative code and a message naming what they need. */
int bineval_check(const nn_loss *l, int64_t classes);
/* Adds a batch: the model's output `out` ([N, 1] or [N, 2], per
 * bineval_check) and its targets y (N values: 0/1 labels or class
 * indices). */
int bineval_add(bineval *b, const nn_loss *l, const tensor *out, const tensor *y);
/* Adds n rows of raw scores (logits) and 0/1 labels. */
int bineval_add_scores(bineval *b, const double *score, const double *label, int64_t n);
/* The AUC of what was added (sorts b->rows in place); NAN as above. */
double bineval_auc(bineval *b);
/* The mean log loss of what was added; NAN when empty. */
double bineval_logloss(const bineval *b);
void bineval_free(bineval *b);

#endif
