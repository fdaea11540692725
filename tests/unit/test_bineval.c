/* test_bineval.c - AUC and log loss over an evaluation set, on cases
 * worked by hand: scikit-learn's documented roc_auc_score example, tied
 * scores sharing their mean rank, the clamp of a saturated probability,
 * one class (no AUC), the two layouts a binary model has, and refusals.
 * tests/cli/test_eval_metrics.sh checks them against a Python reference on
 * thousands of rows. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "base/err.h"
#include "harness.h"
#include "numeric/nn.h"
#include "train/bineval.h"

static double auc_of(const double *s, const double *y, int n) {
  bineval b = {0};
  CHECK_OK(bineval_add_scores(&b, s, y, n));
  double a = bineval_auc(&b);
  bineval_free(&b);
  return a;
}

TEST(bineval_auc_ranks_and_ties) {
  /* roc_auc_score([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8]) == 0.75 */
  CHECK(auc_of((double[]){0.1, 0.4, 0.35, 0.8}, (double[]){0, 0, 1, 1}, 4) == 0.75);
  /* pairs (pos, neg): (.5,.5) a tie counts half, (.5,.2) (.9,.5) (.9,.2) */
  CHECK(auc_of((double[]){0.5, 0.5, 0.2, 0.9}, (double[]){1, 0, 0, 1}, 4) == 0.875);
  CHECK(auc_of((double[]){3, 3, 3, 3, 3}, (double[]){1, 0, 1, 0, 0}, 5) == 0.5);
  CHECK(auc_of((double[]){1, 2, 3}, (double[]){1, 0, 0}, 3) == 0.0);
  /* undefined: one class, or a NaN score */
  CHECK(isnan(auc_of((double[]){1, 2}, (double[]){1, 1}, 2)));
  CHECK(isnan(auc_of((double[]){1, NAN, 0}, (double[]){1, 0, 0}, 3)));
}

TEST(bineval_logloss_clamps_as_scikit_learn) {
  bineval b = {0};
  CHECK_OK(bineval_add_scores(&b, (double[]){0}, (double[]){1}, 1));
  CHECK_NEAR(bineval_logloss(&b), log(2.0), 1e-15);
  bineval_free(&b);
  /* sigmoid(100) is 1 in a double: clamped to 1 - eps, so -log(eps) */
  CHECK_OK(bineval_add_scores(&b, (double[]){100, -100}, (double[]){0, 1}, 2));
  CHECK_NEAR(bineval_logloss(&b), -log(DBL_EPSILON), 1e-12);
  bineval_free(&b);
  CHECK(isnan(bineval_logloss(&b)));
  CHECK_ERR(bineval_add_scores(&b, (double[]){1, 2}, (double[]){1, 0.5}, 2), DRV_ERANGE,
            "0/1 labels (row 1 is 0.5)");
  bineval_free(&b);
}

TEST(bineval_reads_both_binary_layouts) {
  nn_loss *bce = nn_bce_with_logits(), *ce = nn_cross_entropy(), *mse = nn_mse();
  bineval b = {0};
  tensor *one = tensor_from(2, (int64_t[]){3, 1}, (float[]){2, -1, 0.5f});
  tensor *y = tensor_from(1, (int64_t[]){3}, (float[]){1, 0, 0});
  CHECK_OK(bineval_add(&b, bce, one, y));
  CHECK(bineval_auc(&b) == 1.0);
  bineval_free(&b);
  /* two classes: the score is out[1] - out[0] */
  tensor *two = tensor_from(2, (int64_t[]){3, 2}, (float[]){0, 1, 3, 0, 1, 1});
  CHECK_OK(bineval_add(&b, ce, two, y));
  CHECK(b.rows[0].score == 1 && b.rows[1].score == -3 && b.rows[2].score == 0);
  CHECK(bineval_auc(&b) == 1.0);
  CHECK_NEAR(bineval_logloss(&b),
             (log1p(exp(-1.0)) + log1p(exp(-3.0)) + log(2.0)) / 3, 1e-12);
  bineval_free(&b);
  CHECK_ERR(bineval_add(&b, ce, one, y), DRV_EINVAL, "CrossEntropy with another number");
  CHECK_ERR(bineval_add(&b, mse, one, y), DRV_EINVAL, "need a binary classifier");
  CHECK_ERR(bineval_check(mse, -1), DRV_EINVAL, "got MSE");
  CHECK_OK(bineval_check(bce, -1));
  bineval_free(&b);
  tensor_free(one), tensor_free(two), tensor_free(y);
  nn_loss_unref(bce), nn_loss_unref(ce), nn_loss_unref(mse);
}

TEST(bineval_metric_names) {
  CHECK_INT_EQ(bineval_metric("auc"), BINEVAL_AUC);
  CHECK_INT_EQ(bineval_metric("logloss"), BINEVAL_LOGLOSS);
  CHECK_INT_EQ(bineval_metric("AUC"), -1);
  CHECK(strcmp(bineval_name(BINEVAL_LOGLOSS), "logloss") == 0);
  CHECK(bineval_name(BINEVAL_ALL) == NULL);
}
