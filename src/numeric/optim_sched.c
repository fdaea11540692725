/* optim_sched.c - learning-rate schedules (see optim_sched.h for the
 * formulas, which are PyTorch's lr_scheduler ones counted in updates). */
#include "numeric/optim_sched.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"

static const char *const kind_names[] = {"constant", "step", "multistep", "cosine", "plateau"};

bool optim_sched_active(const optim_sched *s) {
  return s->kind != OSCHED_CONST || s->warmup > 0;
}

static const char *const metric_names[] = {"eval_loss", "eval_accuracy", "eval_auc",
                                           "eval_logloss"};

const char *optim_metric_name(optim_metric m) {
  return (unsigned)m < sizeof metric_names / sizeof *metric_names ? metric_names[m] : "eval_loss";
}

bool optim_metric_maximize(optim_metric m) {
  return m == OMETRIC_EVAL_ACCURACY || m == OMETRIC_EVAL_AUC;
}

int optim_metric_from_name(const char *name) {
  for (size_t i = 0; i < sizeof metric_names / sizeof *metric_names; i++)
    if (strcmp(name, metric_names[i]) == 0) return (int)i;
  return -1;
}

#define REQUIRE(cond, ...)                                  \
  do {                                                      \
    if (!(cond)) return err_set(DRV_EINVAL, __VA_ARGS__); \
  } while (0)

static int check_main(const optim_sched *s) {
  const char *k = kind_names[s->kind];
  switch (s->kind) {
  case OSCHED_CONST: return 0;
  case OSCHED_STEP:
    REQUIRE(s->step_size > 0, "optim.schedule.step: step_size must be > 0 (got %lld)",
            (long long)s->step_size);
    break;
  case OSCHED_MULTISTEP:
    REQUIRE(s->nmilestones >= 1 && s->nmilestones <= OSCHED_MAX_MILESTONES,
            "optim.schedule.multistep: 1 to %d milestones (got %d)", OSCHED_MAX_MILESTONES,
            s->nmilestones);
    for (int i = 0; i < s->nmilestones; i++)
      REQUIRE(s->milestones[i] > (i ? s->milestones[i - 1] : 0),
              "optim.schedule.multistep: milestones must be positive and increasing "
              "(milestone %d is %lld)", i + 1, (long long)s->milestones[i]);
    break;
  case OSCHED_COSINE:
    REQUIRE(s->t_max > 0, "optim.schedule.cosine: T_max must be > 0 (got %lld)",
            (long long)s->t_max);
    REQUIRE(s->eta_min >= 0, "optim.schedule.cosine: eta_min must be >= 0 (got %g)",
            (double)s->eta_min);
    return 0;
  case OSCHED_PLATEAU:
    REQUIRE(s->factor > 0 && s->factor < 1, "optim.schedule.plateau: factor must be in (0, 1) (got %g)",
            (double)s->factor);
    REQUIRE(s->patience >= 0, "optim.schedule.plateau: patience must be >= 0 (got %lld)",
            (long long)s->patience);
    REQUIRE(s->threshold >= 0, "optim.schedule.plateau: threshold must be >= 0 (got %g)",
            (double)s->threshold);
    REQUIRE(s->min_lr >= 0, "optim.schedule.plateau: min_lr must be >= 0 (got %g)",
            (double)s->min_lr);
    return 0;
  }
  REQUIRE(s->gamma > 0, "optim.schedule.%s: gamma must be > 0 (got %g)", k, (double)s->gamma);
  return 0;
}

int optim_sched_check(const optim_sched *s) {
  REQUIRE((int)s->kind >= 0 && (int)s->kind <= OSCHED_PLATEAU, "optim: unknown schedule kind %d",
          (int)s->kind);
  REQUIRE(s->warmup >= 0, "optim.schedule.warmup: steps must be >= 0 (got %lld)",
          (long long)s->warmup);
  if (s->warmup > 0)
    REQUIRE(s->start_factor > 0 && s->start_factor <= 1,
            "optim.schedule.warmup: start_factor must be in (0, 1] (got %g)",
            (double)s->start_factor);
  return check_main(s);
}

static double powi(double g, int64_t n) { return pow(g, (double)n); }

double optim_sched_lr(const optim_sched *s, double lr, int64_t k, const optim_plateau *pl) {
  double f = 1;
  if (s->warmup > 0) {
    if (k < s->warmup) f = s->start_factor + (1 - s->start_factor) * (double)k / (double)s->warmup;
    k = k < s->warmup ? 0 : k - s->warmup;
  }
  switch (s->kind) {
  case OSCHED_CONST: break;
  case OSCHED_STEP: lr *= powi(s->gamma, k / s->step_size); break;
  case OSCHED_MULTISTEP: {
    int64_t passed = 0;
    for (int i = 0; i < s->nmilestones; i++) passed += s->milestones[i] <= k;
    lr *= powi(s->gamma, passed);
    break;
  }
  case OSCHED_COSINE: {
    double c = k >= s->t_max ? -1 : cos(3.14159265358979323846 * (double)k / (double)s->t_max);
    lr = s->eta_min + (lr - s->eta_min) * (1 + c) / 2;
    break;
  }
  case OSCHED_PLATEAU:
    if (pl && pl->scale > 0) lr *= pl->scale;
    break;
  }
  return lr * f;
}

int optim_plateau_observe(const optim_sched *s, optim_plateau *pl, double lr, double value) {
  if (s->kind != OSCHED_PLATEAU || isnan(value)) return 0;
  double t = s->threshold;
  bool better = !pl->seen || (s->maximize ? value > pl->best * (1 + (pl->best >= 0 ? t : -t))
                                          : value < pl->best * (1 - (pl->best >= 0 ? t : -t)));
  if (better) {
    pl->best = value, pl->seen = true, pl->bad = 0;
    return 0;
  }
  if (++pl->bad <= s->patience) return 0;
  pl->bad = 0;
  double scale = pl->scale > 0 ? pl->scale : 1;
  double now = lr * scale, next = fmax(now * s->factor, s->min_lr);
  if (lr <= 0 || next >= now) return 0;
  pl->scale = next / lr;
  return 1;
}

/* ---- describe ------------------------------------------------------------ */

typedef struct out {
  char *buf;
  size_t n, len;
} out;

__attribute__((format(printf, 2, 3))) static void put(out *o, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(o->buf + (o->len < o->n ? o->len : o->n), o->len < o->n ? o->n - o->len : 0,
                    fmt, ap);
  va_end(ap);
  if (k > 0) o->len += (size_t)k;
}

/* A float in the fewest digits that read back to it (so that a saved
 * experiment's schedule comes back bit for bit). Returns buf. */
static const char *fl(char *buf, float v) {
  for (int p = 6; p <= 9; p++) {
    snprintf(buf, 32, "%.*g", p, (double)v);
    if (strtof(buf, NULL) == v) break;
  }
  return buf;
}

static void describe_main(out *o, const optim_sched *s) {
  char a[32], b[32], c[32];
  put(o, "optim.schedule.%s { ", kind_names[s->kind]);
  switch (s->kind) {
  case OSCHED_CONST: break;
  case OSCHED_STEP: put(o, "step_size = %lld, gamma = %s", (long long)s->step_size, fl(a, s->gamma)); break;
  case OSCHED_MULTISTEP:
    put(o, "milestones = { ");
    for (int i = 0; i < s->nmilestones; i++) put(o, "%s%lld", i ? ", " : "", (long long)s->milestones[i]);
    put(o, " }, gamma = %s", fl(a, s->gamma));
    break;
  case OSCHED_COSINE: put(o, "T_max = %lld, eta_min = %s", (long long)s->t_max, fl(a, s->eta_min)); break;
  case OSCHED_PLATEAU:
    put(o, "metric = \"%s\", mode = \"%s\", factor = %s, patience = %lld, threshold = %s, min_lr = %s",
        optim_metric_name(s->metric), s->maximize ? "max" : "min", fl(a, s->factor),
        (long long)s->patience, fl(b, s->threshold), fl(c, s->min_lr));
    break;
  }
  put(o, " }");
}

int optim_sched_describe(const optim_sched *s, char *buf, size_t n) {
  char scratch[1];
  out o = {n ? buf : scratch, n ? n : 1, 0};
  o.buf[0] = '\0';
  if (s->warmup > 0) {
    char f[32];
    put(&o, "optim.schedule.warmup { steps = %lld, start_factor = %s", (long long)s->warmup,
        fl(f, s->start_factor));
    if (s->kind != OSCHED_CONST) {
      put(&o, ", after = ");
      describe_main(&o, s);
    }
    put(&o, " }");
  } else {
    describe_main(&o, s);
  }
  return (int)o.len;
}

void optim_plateau_format(const optim_plateau *p, char *buf, size_t n) {
  snprintf(buf, n, "%a %a %lld %d", p->scale, p->best, (long long)p->bad, p->seen ? 1 : 0);
}

bool optim_plateau_parse(const char *s, optim_plateau *p) {
  double scale, best;
  long long bad;
  int seen;
  if (!s || sscanf(s, "%la %la %lld %d", &scale, &best, &bad, &seen) != 4) return false;
  *p = (optim_plateau){scale, best, bad, seen != 0};
  return true;
}
