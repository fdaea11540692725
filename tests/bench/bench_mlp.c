/* bench_mlp.c - training throughput of the MLP 784-256-256-10 (batch 128,
 * SGD with momentum, float32, one BLAS thread) on synthetic MNIST-shaped
 * data, and the bound "the GEMMs of one training step alone" measured in the
 * same run. Prints samples/s for both and their ratio; tests/bench/run.sh
 * adds PyTorch's figure for the same model.
 * Usage: bench_mlp [seconds-per-measurement] */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "data/data.h"
#include "base/err.h"
#include "numeric/nn.h"
#include "numeric/optim.h"
#include "train/train.h"

#define BATCH 128

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void die(const char *what) {
  fprintf(stderr, "bench_mlp: %s: %s\n", what, err_msg());
  exit(1);
}

/* Full training steps as train_fit runs them: next batch, forward, loss,
 * backward, SGD update (which also clears the gradients). */
static double train_rate(double seconds) {
  rng_t r;
  rng_seed(&r, 1);
  nn_module *m = nn_sequential();
  nn_sequential_add(m, nn_linear(784, 256, &r));
  nn_sequential_add(m, nn_relu());
  nn_sequential_add(m, nn_linear(256, 256, &r));
  nn_sequential_add(m, nn_relu());
  nn_sequential_add(m, nn_linear(256, 10, &r));
  nn_loss *loss = nn_cross_entropy();
  nn_param_list params = {0};
  if (nn_collect_params(m, &params) < 0) die("params");
  optim_cfg cfg;
  optim_cfg_default(&cfg, OPTIM_SGD);
  cfg.lr = 0.01f;
  cfg.momentum = 0.9f;
  optim_t *opt = optim_new(&cfg, &params);
  dataset *ds;
  data_synth_opts so = {.n = 60000, .features = 784, .classes = 10, .seed = 1};
  if (data_synthetic(&so, &ds) < 0) die("synthetic");
  data_iter it;
  if (data_iter_init(&it, ds, BATCH, true, 1) < 0) die("iter");

  long steps = 0;
  double t0 = 0;
  for (;;) {
    const tensor *x, *y;
    if (data_iter_next(&it, &x, &y) == 0) {
      data_iter_reset(&it);
      continue;
    }
    if (x->shape[0] != BATCH) continue;
    float l; /* grads start at zero; each update clears them (as train_fit) */
    if (train_step(m, loss, x, y, &l, NULL) < 0) die("step");
    if (optim_step_zero_grad(opt) < 0) die("optim");
    if (++steps == 20) t0 = now(); /* warm-up done */
    if (steps > 20 && now() - t0 >= seconds) break;
  }
  double rate = (double)(steps - 20) * BATCH / (now() - t0);
  data_iter_free(&it);
  data_free(ds);
  optim_free(opt);
  nn_param_list_free(&params);
  nn_loss_unref(loss);
  nn_unref(m);
  return rate;
}

/* The same step's GEMMs only: 3 forward, 3 weight gradients, 2 input
 * gradients (the first layer needs none). */
static double gemm_rate(double seconds) {
  const int64_t dims[4] = {784, 256, 256, 10};
  tensor *act[4], *w[3], *dw[3], *dact[4];
  rng_t r;
  rng_seed(&r, 2);
  for (int i = 0; i < 4; i++) {
    act[i] = tensor_new2(BATCH, dims[i]);
    dact[i] = tensor_new2(BATCH, dims[i]);
    tensor_uniform(act[i], &r, 0, 1);
    tensor_uniform(dact[i], &r, -1, 1);
  }
  for (int i = 0; i < 3; i++) {
    w[i] = tensor_new2(dims[i + 1], dims[i]);
    dw[i] = tensor_new2(dims[i + 1], dims[i]);
    tensor_uniform(w[i], &r, -0.05f, 0.05f);
  }
  long steps = 0;
  double t0 = 0;
  for (;;) {
    for (int i = 0; i < 3; i++) tensor_gemm(1, act[i], false, w[i], true, 0, act[i + 1]);
    for (int i = 2; i >= 0; i--) {
      tensor_gemm(1, dact[i + 1], true, act[i], false, 1, dw[i]);
      if (i > 0) tensor_gemm(1, dact[i + 1], false, w[i], false, 0, dact[i]);
    }
    if (++steps == 20) t0 = now();
    if (steps > 20 && now() - t0 >= seconds) break;
  }
  double rate = (double)(steps - 20) * BATCH / (now() - t0);
  for (int i = 0; i < 4; i++) tensor_free(act[i]), tensor_free(dact[i]);
  for (int i = 0; i < 3; i++) tensor_free(w[i]), tensor_free(dw[i]);
  return rate;
}

int main(int argc, char **argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 5.0;
  tensor_set_threads(1);
  /* Alternate the two so that frequency drift hits both alike. */
  double g1 = gemm_rate(seconds / 2), t1 = train_rate(seconds / 2);
  double g2 = gemm_rate(seconds / 2), t2 = train_rate(seconds / 2);
  double g = g1 > g2 ? g1 : g2, t = t1 > t2 ? t1 : t2;
  printf("drover_samples_per_sec %.0f\n", t);
  printf("gemm_bound_samples_per_sec %.0f\n", g);
  printf("fraction_of_gemm_bound %.3f\n", t / g);
  return 0;
}
