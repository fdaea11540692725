/* bench_cnn.c - training throughput of the small CNN of issue 16 (conv
 * 5x5x32, ReLU, max pool 2, conv 5x5x64, ReLU, max pool 2, linear
 * 1024 -> 10; batch 64, SGD with momentum, float32, one BLAS thread) on
 * synthetic MNIST-shaped data (28x28), and the bound "the GEMMs of one
 * training step alone" measured in the same run. Prints samples/s for both
 * and their ratio, in wall-clock and in CPU time of the process (on a
 * shared machine the one time-slicing does not move); tests/bench/run.sh
 * adds PyTorch's figures for the same model (tests/bench/torch_cnn.py).
 * Usage: bench_cnn [seconds-per-measurement] */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "data/data.h"
#include "base/err.h"
#include "numeric/nn.h"
#include "numeric/optim.h"
#include "train/train.h"

#define BATCH 64

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A measurement: samples per second of wall clock and of CPU time. */
typedef struct rate {
  double wall, cpu;
} rate;

static void die(const char *what) {
  fprintf(stderr, "bench_cnn: %s: %s\n", what, err_msg());
  exit(1);
}

static nn_module *cnn(rng_t *r) {
  nn_module *m = nn_sequential();
  nn_module *layers[] = {nn_unflatten(3, (int64_t[]){1, 28, 28}),
                         nn_conv2d_square(1, 32, 5, NULL, r), nn_relu(), nn_maxpool2d_square(2, 0, 0),
                         nn_conv2d_square(32, 64, 5, NULL, r), nn_relu(), nn_maxpool2d_square(2, 0, 0),
                         nn_flatten(), nn_linear(1024, 10, r)};
  for (size_t i = 0; i < sizeof layers / sizeof *layers; i++)
    if (!layers[i] || nn_sequential_add(m, layers[i]) < 0) die("model");
  return m;
}

/* Full training steps as train_fit runs them: next batch, forward, loss,
 * backward, SGD update (which also clears the gradients). */
static rate train_rate(double seconds) {
  rng_t r;
  rng_seed(&r, 1);
  nn_module *m = cnn(&r);
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
  double t0 = 0, c0 = 0;
  for (;;) {
    const tensor *x, *y;
    if (data_iter_next(&it, &x, &y) == 0) {
      data_iter_reset(&it);
      continue;
    }
    if (x->shape[0] != BATCH) continue;
    float l;
    if (train_step(m, loss, x, y, &l, NULL) < 0) die("step");
    if (optim_step_zero_grad(opt) < 0) die("optim");
    if (++steps == 10) t0 = now(), c0 = cpu_now(); /* warm-up done */
    if (steps > 10 && now() - t0 >= seconds) break;
  }
  double n = (double)(steps - 10) * BATCH;
  rate out = {n / (now() - t0), n / (cpu_now() - c0)};
  data_iter_free(&it);
  data_free(ds);
  optim_free(opt);
  nn_param_list_free(&params);
  nn_loss_unref(loss);
  nn_unref(m);
  return out;
}

/* One GEMM C [m, n] (+)= op(A) op(B) with k inner, as the step has it,
 * `reps` times (once per example for the convolutions). */
typedef struct gemm_case {
  int64_t m, n, k;
  bool ta, tb, acc;
  int reps;
  tensor *a, *b, *c;
} gemm_case;

/* The same step's GEMMs only, at the sizes Conv2d gives them (one example
 * at a time: L1 = 24*24, L2 = 8*8 positions): conv1 output and weight
 * gradient (no input gradient for the first layer), conv2 output, weight
 * and input gradients, and the linear layer's three. Their operands stay
 * in cache from one example to the next, as they do not quite in the
 * step, so this bounds the step from above. */
static rate gemm_rate(double seconds) {
  const int64_t l1 = 24 * 24, l2 = 8 * 8;
  gemm_case g[] = {
      {32, l1, 25, false, false, false, BATCH, 0, 0, 0},   /* conv1 y = W cols */
      {32, 25, l1, false, true, true, BATCH, 0, 0, 0},     /* conv1 dW += dy cols^T */
      {64, l2, 800, false, false, false, BATCH, 0, 0, 0},  /* conv2 y */
      {64, 800, l2, false, true, true, BATCH, 0, 0, 0},    /* conv2 dW */
      {800, l2, 64, true, false, false, BATCH, 0, 0, 0},   /* conv2 dcols = W^T dy */
      {BATCH, 10, 1024, false, true, false, 1, 0, 0, 0},   /* linear y = x W^T */
      {10, 1024, BATCH, true, false, true, 1, 0, 0, 0},    /* linear dW += dy^T x */
      {BATCH, 1024, 10, false, false, false, 1, 0, 0, 0},  /* linear dx = dy W */
  };
  int ng = (int)(sizeof g / sizeof *g);
  rng_t r;
  rng_seed(&r, 2);
  for (int i = 0; i < ng; i++) {
    g[i].a = g[i].ta ? tensor_new2(g[i].k, g[i].m) : tensor_new2(g[i].m, g[i].k);
    g[i].b = g[i].tb ? tensor_new2(g[i].n, g[i].k) : tensor_new2(g[i].k, g[i].n);
    g[i].c = tensor_new2(g[i].m, g[i].n);
    if (!g[i].a || !g[i].b || !g[i].c) die("gemm tensors");
    tensor_uniform(g[i].a, &r, -1, 1);
    tensor_uniform(g[i].b, &r, -1, 1);
  }
  long steps = 0;
  double t0 = 0, c0 = 0;
  for (;;) {
    for (int i = 0; i < ng; i++)
      for (int k = 0; k < g[i].reps; k++)
        if (tensor_gemm(1, g[i].a, g[i].ta, g[i].b, g[i].tb, g[i].acc ? 1 : 0, g[i].c) < 0)
          die("gemm");
    if (++steps == 10) t0 = now(), c0 = cpu_now();
    if (steps > 10 && now() - t0 >= seconds) break;
  }
  double n = (double)(steps - 10) * BATCH;
  rate out = {n / (now() - t0), n / (cpu_now() - c0)};
  for (int i = 0; i < ng; i++) tensor_free(g[i].a), tensor_free(g[i].b), tensor_free(g[i].c);
  return out;
}

int main(int argc, char **argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 5.0;
  tensor_set_threads(1);
  /* Alternate the two so that frequency drift hits both alike. */
  rate g1 = gemm_rate(seconds / 2), t1 = train_rate(seconds / 2);
  rate g2 = gemm_rate(seconds / 2), t2 = train_rate(seconds / 2);
  double g = g1.wall > g2.wall ? g1.wall : g2.wall, t = t1.wall > t2.wall ? t1.wall : t2.wall;
  double gc = g1.cpu > g2.cpu ? g1.cpu : g2.cpu, tc = t1.cpu > t2.cpu ? t1.cpu : t2.cpu;
  printf("drover_samples_per_sec %.0f\n", t);
  printf("gemm_bound_samples_per_sec %.0f\n", g);
  printf("fraction_of_gemm_bound %.3f\n", t / g);
  printf("drover_samples_per_cpu_sec %.0f\n", tc);
  printf("gemm_bound_samples_per_cpu_sec %.0f\n", gc);
  return 0;
}
