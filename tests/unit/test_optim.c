/* test_optim.c - optimizers against independently computed updates.
 *
 * Every variant runs three updates of three parameters and is compared with
 * (a) a straightforward double-precision implementation written out below
 * from PyTorch's documented algorithms, and (b) the values PyTorch itself
 * produces, pasted as constants.
 */
#include <stdint.h>
#include <string.h>

#include "harness.h"
#include "numeric/nn.h"
#include "numeric/optim.h"

#define NP 3
#define NSTEPS 3

static const double p_init[NP] = {0.5, -1.25, 2.0};
static const double grads[NSTEPS][NP] = {
    {0.1, -0.2, 0.3}, {-0.4, 0.05, 0.25}, {0.3, 0.6, -0.15}};

/* ---- the double-precision reference -------------------------------------
 * One function per optimizer, each a literal transcription of the PyTorch
 * documentation's pseudo-code (torch.optim.*), one parameter at a time. */

typedef struct ref_state {
  double a[NP], b[NP]; /* momentum / first moment / accumulator, second slot */
} ref_state;

static void ref_sgd(const optim_cfg *c, double *p, const double *g0, ref_state *s, int t) {
  double mu = c->momentum, tau = c->dampening, wd = c->weight_decay, lr = c->lr;
  for (int i = 0; i < NP; i++) {
    double g = g0[i];
    if (wd != 0) g = g + wd * p[i];
    if (mu != 0) {
      if (t > 1)
        s->a[i] = mu * s->a[i] + (1 - tau) * g;
      else
        s->a[i] = g;
      if (c->nesterov)
        g = g + mu * s->a[i];
      else
        g = s->a[i];
    }
    p[i] = p[i] - lr * g;
  }
}

static void ref_adam(const optim_cfg *c, double *p, const double *g0, ref_state *s, int t) {
  double b1 = c->beta1, b2 = c->beta2, lr = c->lr, wd = c->weight_decay, eps = c->eps;
  for (int i = 0; i < NP; i++) {
    double g = g0[i];
    if (c->kind == OPTIM_ADAMW)
      p[i] = p[i] - lr * wd * p[i];
    else if (wd != 0)
      g = g + wd * p[i];
    s->a[i] = b1 * s->a[i] + (1 - b1) * g;
    s->b[i] = b2 * s->b[i] + (1 - b2) * g * g;
    double mhat = s->a[i] / (1 - pow(b1, t));
    double vhat = s->b[i] / (1 - pow(b2, t));
    p[i] = p[i] - lr * mhat / (sqrt(vhat) + eps);
  }
}

static void ref_adagrad(const optim_cfg *c, double *p, const double *g0, ref_state *s,
                        int t) {
  double lr = c->lr, wd = c->weight_decay, eps = c->eps;
  double clr = lr / (1 + (t - 1) * (double)c->lr_decay);
  for (int i = 0; i < NP; i++) {
    if (t == 1) s->a[i] = c->initial_accumulator;
    double g = g0[i];
    if (wd != 0) g = g + wd * p[i];
    s->a[i] = s->a[i] + g * g;
    p[i] = p[i] - clr * g / (sqrt(s->a[i]) + eps);
  }
}

static void ref_rmsprop(const optim_cfg *c, double *p, const double *g0, ref_state *s,
                        int t) {
  (void)t;
  double lr = c->lr, wd = c->weight_decay, eps = c->eps, alpha = c->alpha,
         mu = c->momentum;
  for (int i = 0; i < NP; i++) {
    double g = g0[i];
    if (wd != 0) g = g + wd * p[i];
    s->a[i] = alpha * s->a[i] + (1 - alpha) * g * g;
    if (mu > 0) {
      s->b[i] = mu * s->b[i] + g / (sqrt(s->a[i]) + eps);
      p[i] = p[i] - lr * s->b[i];
    } else {
      p[i] = p[i] - lr * g / (sqrt(s->a[i]) + eps);
    }
  }
}

static void ref_step(const optim_cfg *c, double *p, const double *g, ref_state *s, int t) {
  switch (c->kind) {
  case OPTIM_SGD: ref_sgd(c, p, g, s, t); break;
  case OPTIM_ADAM:
  case OPTIM_ADAMW: ref_adam(c, p, g, s, t); break;
  case OPTIM_ADAGRAD: ref_adagrad(c, p, g, s, t); break;
  case OPTIM_RMSPROP: ref_rmsprop(c, p, g, s, t); break;
  case OPTIM_FTRL: break; /* its reference is tests/unit/ftrl_ref.py's (below) */
  }
}

/* ---- variants and PyTorch's results ---------------------------------------
 * The torch values were produced with /usr/bin/python3 (torch 1.13, float64
 * tensors) by, for each variant,
 *   p = torch.tensor([0.5, -1.25, 2.0], dtype=torch.float64, requires_grad=True)
 *   o = torch.optim.<Kind>([p], <args>)
 *   for g in grads: p.grad = torch.tensor(g, dtype=torch.float64); o.step()
 * printing p after each step ("%.17g"). */

typedef struct variant {
  const char *name; /* also the torch arguments */
  optim_kind kind;
  float lr, momentum, dampening, weight_decay;
  bool nesterov;
  float alpha, lr_decay, initial_accumulator;
  double torch[NSTEPS][NP];
} variant;

static const variant variants[] = {
    {"SGD(lr=0.1)", OPTIM_SGD, 0.1f, 0, 0, 0, false, 0, 0, 0,
     {{0.48999999999999999, -1.23, 1.97},
      {0.53000000000000003, -1.2349999999999999, 1.9450000000000001},
      {0.5, -1.2949999999999999, 1.96}}},
    {"SGD(lr=0.1, momentum=0.9)", OPTIM_SGD, 0.1f, 0.9f, 0, 0, false, 0, 0, 0,
     {{0.48999999999999999, -1.23, 1.97},
      {0.52100000000000002, -1.2170000000000001, 1.9179999999999999},
      {0.51890000000000003, -1.2653000000000001, 1.8861999999999999}}},
    {"SGD(lr=0.1, momentum=0.9, dampening=0.5)", OPTIM_SGD, 0.1f, 0.9f, 0.5f, 0, false, 0,
     0, 0,
     {{0.48999999999999999, -1.23, 1.97},
      {0.501, -1.2144999999999999, 1.9304999999999999},
      {0.49590000000000001, -1.2305499999999998, 1.90245}}},
    {"SGD(lr=0.1, momentum=0.9, nesterov=True)", OPTIM_SGD, 0.1f, 0.9f, 0, 0, true, 0, 0, 0,
     {{0.48099999999999998, -1.212, 1.9430000000000001},
      {0.54889999999999994, -1.2053, 1.8712},
      {0.51700999999999997, -1.30877, 1.85758}}},
    {"SGD(lr=0.1, momentum=0.5, weight_decay=0.1)", OPTIM_SGD, 0.1f, 0.5f, 0, 0.1f, false,
     0, 0, 0,
     {{0.48499999999999999, -1.2175, 1.95},
      {0.51264999999999994, -1.194075, 1.8804999999999998},
      {0.49134849999999997, -1.2304217500000001, 1.8419449999999997}}},
    {"Adam(lr=0.1)", OPTIM_ADAM, 0.1f, 0, 0, 0, false, 0, 0, 0,
     {{0.40000000999999902, -1.1500000049999999, 1.9000000033333333},
      {0.45595035748512841, -1.1030531911004471, 1.8008827194642782},
      {0.45331853171282516, -1.1516919876721561, 1.7522886543163998}}},
    {"Adam(lr=0.1, weight_decay=0.1)", OPTIM_ADAM, 0.1f, 0, 0, 0.1f, false, 0, 0, 0,
     {{0.40000000666666624, -1.1500000030769231, 1.9000000020000001},
      {0.44293415136100139, -1.0696959086066509, 1.8005351966329057},
      {0.42551704638425802, -1.0881193483958738, 1.720845043815413}}},
    {"AdamW(lr=0.1, weight_decay=0.1)", OPTIM_ADAMW, 0.1f, 0, 0, 0.1f, false, 0, 0, 0,
     {{0.39500000999999901, -1.1375000049999997, 1.8800000033333333},
      {0.44700035738512839, -1.0791781910504468, 1.762082719430945},
      {0.43989852803897384, -1.1170252057116512, 1.6958678270887571}}},
    {"Adagrad(lr=0.1, lr_decay=0.5, initial_accumulator_value=0.2)", OPTIM_ADAGRAD, 0.1f,
     0, 0, 0, false, 0, 0.5f, 0.2f,
     {{0.47817821098116264, -1.2091751709619469, 1.9442913985572292},
      {0.52201794092205067, -1.2159441453947966, 1.9162196678597401},
      {0.499901647502077, -1.254593542973867, 1.928467116571656}}},
    {"RMSprop(lr=0.01, alpha=0.9)", OPTIM_RMSPROP, 0.01f, 0, 0, 0, false, 0.9f, 0, 0,
     {{0.46837723339831305, -1.2183772283983154, 1.9683772267316493},
      {0.49914646180068012, -1.2264354567398681, 1.9475076316955673},
      {0.47986571585784493, -1.2566381154359867, 1.9596882691348001}}},
    {"RMSprop(lr=0.01, alpha=0.9, momentum=0.8, weight_decay=0.1)", OPTIM_RMSPROP, 0.01f,
     0.8f, 0, 0.1f, false, 0.9f, 0, 0,
     {{0.46837723006498144, -1.2183772264752391, 1.9683772253983161},
      {0.4724102133303153, -1.1859032383121995, 1.9213956192249342},
      {0.45372123691237154, -1.1867537868698097, 1.8816598341109374}}},
};
#define NVARIANTS ((int)(sizeof variants / sizeof variants[0]))

static void variant_cfg(const variant *v, optim_cfg *c) {
  optim_cfg_default(c, v->kind);
  c->lr = v->lr;
  c->momentum = v->momentum;
  c->dampening = v->dampening;
  c->weight_decay = v->weight_decay;
  c->nesterov = v->nesterov;
  if (v->kind == OPTIM_RMSPROP) c->alpha = v->alpha;
  if (v->kind == OPTIM_ADAGRAD) {
    c->lr_decay = v->lr_decay;
    c->initial_accumulator = v->initial_accumulator;
  }
}

static void check_rel(const char *what, const char *variant, int step, int i, double got,
                      double want) {
  double tol = 1e-6 * (fabs(want) > 1 ? fabs(want) : 1);
  if (!(fabs(got - want) <= tol))
    harness_fail(__FILE__, __LINE__, "%s: %s step %d p[%d] = %.9g, expected %.9g", variant,
                 what, step, i, got, want);
}

/* Runs every variant of `kind` through optim_update and both references. */
static void run_variants(optim_kind kind) {
  int ran = 0;
  for (int k = 0; k < NVARIANTS; k++) {
    const variant *v = &variants[k];
    if (v->kind != kind) continue;
    optim_cfg c;
    variant_cfg(v, &c);
    CHECK_OK(optim_cfg_check(&c));
    float p[NP], g[NP], s0[NP], s1[NP];
    float *slots[OPTIM_MAX_SLOTS] = {s0, s1};
    double rp[NP];
    ref_state rs;
    memset(&rs, 0, sizeof rs);
    for (int i = 0; i < NP; i++) p[i] = (float)(rp[i] = p_init[i]);
    optim_slots_init(&c, slots, NP);
    for (int t = 1; t <= NSTEPS; t++) {
      for (int i = 0; i < NP; i++) g[i] = (float)grads[t - 1][i];
      float gcopy[NP];
      memcpy(gcopy, g, sizeof g);
      optim_update(&c, p, g, slots, NP, t);
      CHECK(memcmp(gcopy, g, sizeof g) == 0); /* g is not modified */
      ref_step(&c, rp, grads[t - 1], &rs, t);
      for (int i = 0; i < NP; i++) {
        check_rel("reference", v->name, t, i, p[i], rp[i]);
        check_rel("torch", v->name, t, i, p[i], v->torch[t - 1][i]);
      }
    }
    ran++;
  }
  CHECK(ran > 0);
}

TEST(optim_sgd_matches_reference_and_torch) { run_variants(OPTIM_SGD); }
TEST(optim_adam_matches_reference_and_torch) { run_variants(OPTIM_ADAM); }
TEST(optim_adamw_matches_reference_and_torch) { run_variants(OPTIM_ADAMW); }
TEST(optim_adagrad_matches_reference_and_torch) { run_variants(OPTIM_ADAGRAD); }
TEST(optim_rmsprop_matches_reference_and_torch) { run_variants(OPTIM_RMSPROP); }

/* The kernels are vectorised loops: a length that is not a multiple of any
 * vector width must update every element (head, body and tail alike). */
/* FTRL-Proximal against tests/unit/ftrl_ref.py, written from the paper's
 * Algorithm 1 (printed "%.17g"): three configurations, the grads above, the
 * weights after each step; l1 = 0.1 makes the first coordinate exactly 0. */
TEST(optim_ftrl_matches_the_papers_algorithm) {
  static const struct {
    float lr, beta, l1, l2, n0;
    double want[NSTEPS][NP];
  } cases[] = {
      {0.1f, 1.0f, 0, 0, 0,
       {{0.036363636363636369, -0.19166666666666668, 0.4384615384615384},
        {0.06468601889078017, -0.19581206989757585, 0.42048255568263976},
        {0.044817179081021188, -0.23252214082418915, 0.43105837362323907}}},
      {0.5f, 1.0f, 0.1f, 0.2f, 0,
       {{0, -0.076923076923076913, 0.28571428571428564},
        {0.099185976553591432, -0.096063220792865278, 0.20185051311326119},
        {0.0060126004524248848, -0.26903082066067602, 0.25124688896347586}}},
      {0.05f, 0.5f, 0, 1.0f, 0.1f,
       {{0.0030820825133939999, -0.067544665651672234, 0.22753479669393603},
        {0.021780394962216655, -0.070240107499116966, 0.21565824195794714},
        {0.0087369167013470889, -0.094070959089800663, 0.22263885357110832}}},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    optim_cfg c;
    optim_cfg_default(&c, OPTIM_FTRL);
    c.lr = cases[k].lr, c.beta = cases[k].beta, c.l1 = cases[k].l1, c.l2 = cases[k].l2;
    c.initial_accumulator = cases[k].n0;
    CHECK_OK(optim_cfg_check(&c));
    CHECK_INT_EQ(optim_nslots(&c), 2);
    float p[NP] = {0.5f, -1.25f, 2.0f}, z[NP], n[NP], g[NP];
    float *slots[2] = {z, n};
    optim_slots_init(&c, slots, NP);
    for (int t = 1; t <= NSTEPS; t++) {
      for (int i = 0; i < NP; i++) g[i] = (float)grads[t - 1][i];
      optim_update(&c, p, g, slots, NP, t);
      for (int i = 0; i < NP; i++)
        if (fabs(p[i] - cases[k].want[t - 1][i]) > 1e-6)
          harness_fail(__FILE__, __LINE__, "case %zu step %d p[%d] = %.9g, the paper's %.9g", k,
                       t, i, (double)p[i], cases[k].want[t - 1][i]);
    }
  }
  optim_cfg c;
  optim_cfg_default(&c, OPTIM_FTRL);
  c.weight_decay = 0.1f;
  CHECK_ERR(optim_cfg_check(&c), DRV_EINVAL, "optim.FTRL: weight_decay is not used");
}

TEST(optim_update_covers_odd_lengths) {
  enum { N = 37 };
  for (int kind = OPTIM_SGD; kind <= OPTIM_RMSPROP; kind++) {
    optim_cfg c;
    optim_cfg_default(&c, (optim_kind)kind);
    c.momentum = kind == OPTIM_ADAM || kind == OPTIM_ADAMW ? 0 : 0.5f;
    float p[N], g[N], s0[N], s1[N];
    float *slots[2] = {s0, s1};
    optim_slots_init(&c, slots, N);
    for (int i = 0; i < N; i++) {
      p[i] = 1.0f;
      g[i] = 0.5f;
    }
    optim_update(&c, p, g, slots, N, 1);
    for (int i = 0; i < N; i++) {
      CHECK(p[i] < 1.0f);
      CHECK_NEAR(p[i], p[0], 1e-7);
    }
  }
}

/* ---- configuration ------------------------------------------------------ */

TEST(optim_nslots_per_kind) {
  optim_cfg c;
  optim_cfg_default(&c, OPTIM_SGD);
  CHECK_INT_EQ(optim_nslots(&c), 0);
  c.momentum = 0.9f;
  CHECK_INT_EQ(optim_nslots(&c), 1);
  optim_cfg_default(&c, OPTIM_ADAM);
  CHECK_INT_EQ(optim_nslots(&c), 2);
  optim_cfg_default(&c, OPTIM_ADAMW);
  CHECK_INT_EQ(optim_nslots(&c), 2);
  optim_cfg_default(&c, OPTIM_ADAGRAD);
  CHECK_INT_EQ(optim_nslots(&c), 1);
  optim_cfg_default(&c, OPTIM_RMSPROP);
  CHECK_INT_EQ(optim_nslots(&c), 1);
  c.momentum = 0.5f;
  CHECK_INT_EQ(optim_nslots(&c), 2);
}

TEST(optim_slots_init_values) {
  float a[5], b[5];
  float *slots[2] = {a, b};
  optim_cfg c;
  optim_cfg_default(&c, OPTIM_ADAGRAD);
  c.initial_accumulator = 0.25f;
  memset(a, 0xff, sizeof a); /* NaN garbage */
  optim_slots_init(&c, slots, 5);
  for (int i = 0; i < 5; i++) CHECK(a[i] == 0.25f);
  optim_cfg_default(&c, OPTIM_ADAM);
  memset(a, 0xff, sizeof a);
  memset(b, 0xff, sizeof b);
  optim_slots_init(&c, slots, 5);
  for (int i = 0; i < 5; i++) CHECK(a[i] == 0.0f && b[i] == 0.0f);
}

TEST(optim_defaults_are_pytorchs) {
  optim_cfg c;
  optim_cfg_default(&c, OPTIM_SGD);
  CHECK(c.lr == 0.01f && c.momentum == 0 && c.dampening == 0 && c.weight_decay == 0 &&
        !c.nesterov);
  optim_cfg_default(&c, OPTIM_ADAM);
  CHECK(c.lr == 1e-3f && c.beta1 == 0.9f && c.beta2 == 0.999f && c.eps == 1e-8f &&
        c.weight_decay == 0);
  optim_cfg_default(&c, OPTIM_ADAMW);
  CHECK(c.lr == 1e-3f && c.weight_decay == 0.01f && c.eps == 1e-8f);
  optim_cfg_default(&c, OPTIM_ADAGRAD);
  CHECK(c.lr == 0.01f && c.eps == 1e-10f && c.lr_decay == 0 && c.initial_accumulator == 0);
  optim_cfg_default(&c, OPTIM_RMSPROP);
  CHECK(c.lr == 0.01f && c.alpha == 0.99f && c.eps == 1e-8f && c.momentum == 0);
  for (int k = OPTIM_SGD; k <= OPTIM_RMSPROP; k++) {
    optim_cfg_default(&c, (optim_kind)k);
    CHECK_OK(optim_cfg_check(&c));
  }
}

TEST(optim_cfg_check_names_the_field) {
  optim_cfg c;
  optim_cfg_default(&c, OPTIM_SGD);
  c.nesterov = true;
  CHECK_ERR(optim_cfg_check(&c), DRV_EINVAL,
            "optim.SGD: nesterov requires momentum > 0 and dampening = 0");
  c.momentum = 0.9f;
  CHECK_OK(optim_cfg_check(&c));
  c.dampening = 0.1f;
  CHECK_ERR(optim_cfg_check(&c), DRV_EINVAL, "nesterov requires");
  optim_cfg_default(&c, OPTIM_SGD);
  c.lr = -0.1f;
  CHECK_ERR(optim_cfg_check(&c), DRV_EINVAL, "optim.SGD: lr must be");
  c.lr = NAN;
  CHECK_ERR(optim_cfg_check(&c), DRV_EINVAL, "lr");
  optim_cfg_default(&c, OPTIM_SGD);
  c.momentum = -1;
  CHECK_ERR(optim_cfg_check(&c), DRV_EINVAL, "optim.SGD: momentum");
  optim_cfg_default(&c, OPTIM_ADAM);
  c.beta1 = 1.0f;
  CHECK_ERR(optim_cfg_check(&c), DRV_EINVAL, "optim.Adam: beta1 must be in [0, 1)");
  optim_cfg_default(&c, OPTIM_ADAMW);
  c.beta2 = -0.5f;
  CHECK_ERR(optim_cfg_check(&c), DRV_EINVAL, "optim.AdamW: beta2");
  c.beta2 = 0.999f;
  c.weight_decay = -0.01f;
  CHECK_ERR(optim_cfg_check(&c), DRV_EINVAL, "optim.AdamW: weight_decay");
  optim_cfg_default(&c, OPTIM_ADAGRAD);
  c.lr_decay = -1;
  CHECK_ERR(optim_cfg_check(&c), DRV_EINVAL, "optim.Adagrad: lr_decay");
  optim_cfg_default(&c, OPTIM_ADAGRAD);
  c.initial_accumulator = -1;
  CHECK_ERR(optim_cfg_check(&c), DRV_EINVAL, "optim.Adagrad: initial_accumulator");
  optim_cfg_default(&c, OPTIM_RMSPROP);
  c.alpha = 1.5f;
  CHECK_ERR(optim_cfg_check(&c), DRV_EINVAL, "optim.RMSprop: alpha");
  optim_cfg_default(&c, OPTIM_RMSPROP);
  c.eps = -1e-8f;
  CHECK_ERR(optim_cfg_check(&c), DRV_EINVAL, "optim.RMSprop: eps");
  c.kind = (optim_kind)42;
  CHECK_ERR(optim_cfg_check(&c), DRV_EINVAL, "unknown optimizer kind 42");
}

TEST(optim_kind_names_round_trip) {
  const char *names[] = {"SGD", "Adam", "AdamW", "Adagrad", "RMSprop"};
  for (int k = 0; k < 5; k++) {
    CHECK(strcmp(optim_kind_name((optim_kind)k), names[k]) == 0);
    CHECK_INT_EQ(optim_kind_from_name(names[k]), k);
  }
  CHECK_INT_EQ(optim_kind_from_name("sgd"), -1); /* case-sensitive */
  CHECK_INT_EQ(optim_kind_from_name("Adamax"), -1);
  CHECK_INT_EQ(optim_kind_from_name(""), -1);
}

TEST(optim_describe_lists_non_defaults) {
  char buf[256];
  optim_cfg c;
  optim_cfg_default(&c, OPTIM_SGD);
  c.lr = 0.1f;
  c.momentum = 0.9f;
  c.nesterov = true;
  CHECK_INT_EQ(optim_describe(&c, buf, sizeof buf), (long long)strlen(buf));
  CHECK(strcmp(buf, "optim.SGD { lr = 0.1, momentum = 0.9, nesterov = true }") == 0);
  optim_cfg_default(&c, OPTIM_ADAM);
  optim_describe(&c, buf, sizeof buf);
  CHECK(strcmp(buf, "optim.Adam { lr = 0.001 }") == 0);
  optim_cfg_default(&c, OPTIM_ADAMW);
  c.weight_decay = 0.05f;
  c.beta2 = 0.98f;
  optim_describe(&c, buf, sizeof buf);
  CHECK(strcmp(buf, "optim.AdamW { lr = 0.001, beta2 = 0.98, weight_decay = 0.05 }") == 0);
  optim_cfg_default(&c, OPTIM_ADAGRAD);
  c.lr_decay = 0.5f;
  c.initial_accumulator = 0.1f;
  optim_describe(&c, buf, sizeof buf);
  CHECK(strcmp(buf, "optim.Adagrad { lr = 0.01, lr_decay = 0.5, initial_accumulator = 0.1 }") ==
        0);
  optim_cfg_default(&c, OPTIM_RMSPROP);
  c.momentum = 0.9f;
  optim_describe(&c, buf, sizeof buf);
  CHECK(strcmp(buf, "optim.RMSprop { lr = 0.01, momentum = 0.9 }") == 0);
  /* truncation: like snprintf, the full length comes back, the text is cut */
  char small[12];
  int len = optim_describe(&c, small, sizeof small);
  CHECK_INT_EQ(len, (long long)strlen(buf));
  CHECK(strcmp(small, "optim.RMSpr") == 0);
}

/* ---- binding to a real model --------------------------------------------- */

static nn_module *small_model(void) {
  rng_t r;
  rng_seed(&r, 7);
  nn_module *m = nn_sequential();
  nn_module *l1 = nn_linear(4, 3, &r), *act = nn_relu(), *l2 = nn_linear(3, 2, &r);
  CHECK(m && l1 && act && l2);
  CHECK_OK(nn_sequential_add(m, l1));
  CHECK_OK(nn_sequential_add(m, act));
  CHECK_OK(nn_sequential_add(m, l2));
  nn_unref(l1);
  nn_unref(act);
  nn_unref(l2);
  return m;
}

/* Gradient of element i of parameter j: distinct per parameter, so that a
 * slot mixed up between parameters shows. */
static float grad_value(int j, int64_t i) { return 0.01f * (float)(i + 1) * (float)(j + 1); }

TEST(optim_step_updates_every_model_parameter) {
  nn_module *m = small_model();
  nn_param_list pl = {0};
  CHECK_OK(nn_collect_params(m, &pl));
  CHECK_INT_EQ(pl.n, 4);
  double *before[4];
  for (int j = 0; j < pl.n; j++) {
    int64_t n = tensor_numel(pl.items[j].value);
    before[j] = malloc((size_t)n * sizeof(double));
    float *pv = tensor_data(pl.items[j].value), *gv = tensor_data(pl.items[j].grad);
    for (int64_t i = 0; i < n; i++) {
      before[j][i] = pv[i];
      gv[i] = grad_value(j, i);
    }
  }
  optim_cfg c;
  optim_cfg_default(&c, OPTIM_SGD);
  c.lr = 0.1f;
  c.momentum = 0.5f;
  optim_t *o = optim_new(&c, &pl);
  CHECK(o);
  CHECK_INT_EQ(optim_steps(o), 0);
  CHECK(optim_config(o)->momentum == 0.5f);
  CHECK_OK(optim_step(o));
  CHECK_OK(optim_step(o));
  CHECK_INT_EQ(optim_steps(o), 2);
  /* Same gradient twice with momentum mu: b1 = g, b2 = mu*g + g, so
   * p2 = p0 - lr*g*(2 + mu). */
  for (int j = 0; j < pl.n; j++) {
    const float *pv = tensor_data(pl.items[j].value);
    for (int64_t i = 0; i < tensor_numel(pl.items[j].value); i++) {
      double want = before[j][i] - 0.1 * grad_value(j, i) * 2.5;
      CHECK_NEAR(pv[i], want, 1e-6);
    }
    free(before[j]);
  }
  optim_free(o);
  nn_param_list_free(&pl);
  nn_unref(m);
}

TEST(optim_step_from_real_gradients_lowers_the_loss) {
  nn_module *m = small_model();
  nn_loss *mse = nn_mse();
  nn_param_list pl = {0};
  CHECK_OK(nn_collect_params(m, &pl));
  optim_cfg c;
  optim_cfg_default(&c, OPTIM_ADAM);
  c.lr = 0.01f;
  optim_t *o = optim_new(&c, &pl);
  CHECK(o);
  tensor *x = tensor_new2(8, 4), *y = tensor_new2(8, 2);
  rng_t r;
  rng_seed(&r, 3);
  CHECK_OK(tensor_uniform(x, &r, -1, 1));
  CHECK_OK(tensor_uniform(y, &r, -1, 1));
  float first = 0, last = 0;
  for (int it = 0; it < 50; it++) {
    const tensor *out, *dout;
    float l;
    nn_zero_grad(m);
    CHECK_OK(nn_forward(m, x, &out));
    CHECK_OK(nn_loss_forward(mse, out, y, &l));
    CHECK_OK(nn_loss_backward(mse, out, y, &dout));
    CHECK_OK(nn_backward(m, x, dout, NULL));
    CHECK_OK(optim_step(o));
    if (it == 0) first = l;
    last = l;
  }
  CHECK(last < 0.8f * first);
  tensor_free(x);
  tensor_free(y);
  optim_free(o);
  nn_param_list_free(&pl);
  nn_loss_unref(mse);
  nn_unref(m);
}

TEST(optim_new_and_step_reject_misuse) {
  nn_module *m = small_model();
  nn_param_list pl = {0};
  CHECK_OK(nn_collect_params(m, &pl));
  optim_cfg c;
  optim_cfg_default(&c, OPTIM_SGD);
  c.lr = -1;
  CHECK(optim_new(&c, &pl) == NULL);
  CHECK_STR_CONTAINS(err_msg(), "optim.SGD: lr");
  c.lr = 0.1f;
  optim_t *o = optim_new(&c, &pl);
  CHECK(o);
  int n = pl.n;
  pl.n = n - 1; /* the borrowed list shrank under the optimizer */
  CHECK_ERR(optim_step(o), DRV_EINVAL, "parameter list changed (4 -> 3");
  pl.n = n;
  CHECK_OK(optim_step(o));
  optim_free(o);
  nn_param_list_free(&pl);
  nn_unref(m);
}

/* ---- schedules and clipping (optim_sched.c, optim_step) ------------------ */

TEST(optim_sched_formulas_and_plateau) {
  optim_sched s = {.kind = OSCHED_MULTISTEP, .gamma = 0.5f, .nmilestones = 2,
                   .milestones = {3, 5}};
  CHECK_OK(optim_sched_check(&s));
  CHECK_NEAR(optim_sched_lr(&s, 1, 2, NULL), 1, 0);
  CHECK_NEAR(optim_sched_lr(&s, 1, 3, NULL), 0.5, 1e-7);
  CHECK_NEAR(optim_sched_lr(&s, 1, 9, NULL), 0.25, 1e-7);
  s.milestones[1] = 3;
  CHECK_ERR(optim_sched_check(&s), DRV_EINVAL, "increasing");
  optim_sched p = {.kind = OSCHED_PLATEAU, .factor = 0.5f, .patience = 1, .min_lr = 0.3f};
  optim_plateau st = {0};
  CHECK_INT_EQ(optim_plateau_observe(&p, &st, 1, 2.0), 0);  /* best */
  CHECK_INT_EQ(optim_plateau_observe(&p, &st, 1, 2.0), 0);  /* bad 1 */
  CHECK_INT_EQ(optim_plateau_observe(&p, &st, 1, 2.5), 1);  /* bad 2 > patience */
  CHECK_NEAR(optim_sched_lr(&p, 1, 0, &st), 0.5, 1e-9);
  CHECK_INT_EQ(optim_plateau_observe(&p, &st, 1, 1.0), 0);  /* improves */
  optim_plateau_observe(&p, &st, 1, 1.0);
  CHECK_INT_EQ(optim_plateau_observe(&p, &st, 1, 1.0), 1);
  CHECK_NEAR(optim_sched_lr(&p, 1, 0, &st), 0.3, 1e-7);    /* floored at min_lr */
  char buf[256];
  optim_sched w = {.kind = OSCHED_COSINE, .t_max = 10, .warmup = 4, .start_factor = 0.25f};
  optim_sched_describe(&w, buf, sizeof buf);
  CHECK_STR_CONTAINS(buf, "optim.schedule.warmup { steps = 4, start_factor = 0.25, after = "
                          "optim.schedule.cosine { T_max = 10, eta_min = 0 } }");
}

TEST(optim_step_clips_the_global_norm_and_follows_the_schedule) {
  nn_module *m = small_model();
  nn_param_list pl = {0};
  CHECK_OK(nn_collect_params(m, &pl));
  double sq = 0;
  for (int j = 0; j < pl.n; j++) {
    float *gv = tensor_data(pl.items[j].grad);
    for (int64_t i = 0; i < tensor_numel(pl.items[j].grad); i++) {
      gv[i] = grad_value(j, i);
      sq += (double)gv[i] * gv[i];
    }
  }
  optim_cfg c;
  optim_cfg_default(&c, OPTIM_SGD);
  c.lr = 0.1f;
  c.clip_norm = (float)(sqrt(sq) / 4);
  c.sched = (optim_sched){.kind = OSCHED_STEP, .step_size = 1, .gamma = 0.5f};
  optim_t *o = optim_new(&c, &pl);
  CHECK(o);
  CHECK(isnan(optim_grad_norm(o)));
  CHECK_NEAR(optim_lr(o), 0.1, 1e-7);
  CHECK_OK(optim_step(o));
  CHECK_NEAR(optim_grad_norm(o), sqrt(sq), 1e-4);
  CHECK_NEAR(optim_lr(o), 0.05, 1e-7);
  double after = 0;
  for (int j = 0; j < pl.n; j++) {
    const float *gv = tensor_data(pl.items[j].grad);
    for (int64_t i = 0; i < tensor_numel(pl.items[j].grad); i++) after += (double)gv[i] * gv[i];
  }
  CHECK_NEAR(sqrt(after), sqrt(sq) / 4, 1e-5); /* the gradients were scaled in place */
  c.clip_norm = -1;
  CHECK_ERR(optim_cfg_check(&c), DRV_EINVAL, "clip_norm");
  optim_free(o);
  nn_param_list_free(&pl);
  nn_unref(m);
}
