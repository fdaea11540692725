/* progress.h - training progress output: a one-line bar redrawn in place
 * on a terminal, plain lines every few seconds otherwise, and eval lines.
 * Shared by in-process training (train.c) and cluster training (coord). */
#ifndef DROVER_PROGRESS_H
#define DROVER_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "train/train.h"

typedef struct progress {
  FILE *out;            /* NULL: print nothing */
  bool tty;             /* bar with '\r' (about 4 Hz) vs lines (every 5 s) */
  double last_print;    /* monotonic seconds of the last output */
  int64_t printed_step; /* step of the last output, -1 none */
  bool bar_shown;       /* a bar is on the current line */
} progress;

void progress_init(progress *pr, FILE *out, bool tty);
/* Prints p's state if it is time to (or always with `force`, unless a
 * plain line for this very step was printed already). */
void progress_step(progress *pr, const train_progress *p, bool force);
/* "eval step 200: loss 0.1306 accuracy 0.9694" on its own line; the bar,
 * if shown, is redrawn below it at the next progress_step. */
void progress_eval(progress *pr, const train_progress *p);
/* Ends the bar's line, if one is shown. */
void progress_end(progress *pr);
/* Holds every progress output back (on) or lets it through again (off):
 * for a dashboard that owns the terminal. Process-wide. */
void progress_mute(bool on);
/* Monotonic clock in seconds. */
double progress_now(void);

#endif
