/* progress.c - progress output for training: bar, lines, eval lines. */
#include "train/progress.h"

#include <math.h>
#include <string.h>
#include <time.h>

#include "train/bineval.h"

#define TTY_INTERVAL 0.25  /* seconds between redraws of the bar */
#define LINE_INTERVAL 5.0  /* seconds between plain progress lines */
#define BAR_WIDTH 20

double progress_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* "12,345" */
static void fmt_thousands(char *buf, size_t n, double v) {
  char digits[32];
  snprintf(digits, sizeof digits, "%.0f", v < 0 ? 0 : v);
  size_t len = strlen(digits), o = 0;
  for (size_t i = 0; i < len && o + 1 < n; i++) {
    if (i > 0 && (len - i) % 3 == 0 && o + 2 < n) buf[o++] = ',';
    buf[o++] = digits[i];
  }
  buf[o] = '\0';
}

/* TTY form "0:05", "1:02:03"; plain form "5s", "2m05s", "1h02m". */
static void fmt_eta(char *buf, size_t n, double secs, bool tty) {
  long long s = isfinite(secs) && secs > 0 ? (long long)(secs + 0.5) : 0;
  long long h = s / 3600, m = (s / 60) % 60, r = s % 60;
  if (tty) {
    if (h)
      snprintf(buf, n, "%lld:%02lld:%02lld", h, m, r);
    else
      snprintf(buf, n, "%lld:%02lld", m, r);
  } else if (h) {
    snprintf(buf, n, "%lldh%02lldm", h, m);
  } else if (m) {
    snprintf(buf, n, "%lldm%02llds", m, r);
  } else {
    snprintf(buf, n, "%llds", r);
  }
}

/* Sync training counts its global steps against their target, and the
 * epoch those reached: train steps run outnumber them (every trainer
 * computes each step; backups' gradients are dropped). */
static int64_t shown_step(const train_progress *p) {
  return p->global_steps > 0 ? p->global_step : p->step;
}
static int64_t shown_total(const train_progress *p) {
  return p->global_steps > 0 ? p->global_steps : p->total_steps;
}
static int64_t shown_epoch(const train_progress *p) {
  return p->global_steps > 0 ? p->global_epoch : p->epoch;
}

/* "step 60/600", or "step 60" when the total is not known (a feed that
 * runs until its feeders end): no "/0". */
static void print_step(FILE *f, const train_progress *p) {
  fprintf(f, "step %lld", (long long)shown_step(p));
  if (shown_total(p) > 0) fprintf(f, "/%lld", (long long)shown_total(p));
}

static void print_bar(FILE *f, const train_progress *p) {
  char bar[BAR_WIDTH + 1], rate[32], eta[32];
  bool known = shown_total(p) > 0;
  int filled = known ? (int)(BAR_WIDTH * shown_step(p) / shown_total(p)) : 0;
  for (int i = 0; i < BAR_WIDTH; i++)
    bar[i] = i < filled ? '=' : (i == filled ? '>' : ' ');
  bar[BAR_WIDTH] = '\0';
  fmt_thousands(rate, sizeof rate, p->examples_per_sec);
  fmt_eta(eta, sizeof eta, p->eta, true);
  fputc('\r', f);
  print_step(f, p);
  if (known) fprintf(f, " [%s]", bar);
  fprintf(f, " epoch %lld/%lld loss %.4f", (long long)shown_epoch(p), (long long)p->epochs, p->loss);
  if (!isnan(p->accuracy)) fprintf(f, " acc %.3f", p->accuracy);
  fprintf(f, " %s ex/s", rate);
  if (known) fprintf(f, " ETA %s", eta);
  fputs("\033[K", f);
}

static void print_line(FILE *f, const train_progress *p) {
  char eta[32];
  fmt_eta(eta, sizeof eta, p->eta, false);
  print_step(f, p);
  fprintf(f, " epoch %lld/%lld loss %.4f", (long long)shown_epoch(p), (long long)p->epochs, p->loss);
  if (!isnan(p->accuracy)) fprintf(f, " acc %.3f", p->accuracy);
  fprintf(f, " %.0f ex/s", p->examples_per_sec);
  if (shown_total(p) > 0) fprintf(f, " eta %s", eta);
  fputc('\n', f);
}

void progress_init(progress *pr, FILE *out, bool tty) {
  pr->out = out;
  pr->tty = tty;
  pr->printed_step = -1;
  pr->bar_shown = false;
  /* A bar appears at the first step; plain lines only after LINE_INTERVAL. */
  pr->last_print = tty ? -INFINITY : progress_now();
}

/* While a dashboard owns the terminal, progress output would scribble on
 * it: it is held back (the dashboard shows the same figures). */
static bool muted;

void progress_mute(bool on) { muted = on; }

void progress_step(progress *pr, const train_progress *p, bool force) {
  if (!pr->out || p->step == 0 || muted) return;
  double t = progress_now();
  double every = pr->tty ? TTY_INTERVAL : LINE_INTERVAL;
  if (!force && t - pr->last_print < every) return;
  if (force && !pr->tty && pr->printed_step == p->step) return;
  if (pr->tty) {
    print_bar(pr->out, p);
    pr->bar_shown = true;
  } else {
    print_line(pr->out, p);
  }
  fflush(pr->out);
  pr->last_print = t;
  pr->printed_step = p->step;
}

void progress_eval(progress *pr, const train_progress *p) {
  FILE *out = pr->out;
  if (!out || muted) return;
  if (pr->bar_shown) fputs("\r\033[K", out);
  fprintf(out, "eval step %lld: loss %.4f", (long long)p->step, p->eval_loss);
  if (!isnan(p->eval_accuracy)) fprintf(out, " accuracy %.4f", p->eval_accuracy);
  if (p->metrics & BINEVAL_AUC) fprintf(out, " auc %.4f", p->eval_auc);
  if (p->metrics & BINEVAL_LOGLOSS) fprintf(out, " logloss %.4f", p->eval_logloss);
  fputc('\n', out);
  fflush(out);
  if (pr->bar_shown) {
    pr->bar_shown = false;
    pr->last_print = -INFINITY; /* redraw the bar below the eval line at once */
  }
}

void progress_end(progress *pr) {
  if (pr->out && pr->bar_shown && !muted) {
    fputc('\n', pr->out);
    fflush(pr->out);
    pr->bar_shown = false;
  }
}
