/* export.h - `drover export`: the model of one of a run's checkpoints as a
 * single safetensors file (PyTorch names, the spec in __metadata__), for
 * drover.nn.load and safetensors.torch.load_file.
 *
 * In-process runs have one model file per checkpoint, so exporting is a
 * checked copy; the file is written beside its destination, fsynced and
 * renamed over it, so a failure leaves no half file.
 */
#ifndef DROVER_EXPORT_H
#define DROVER_EXPORT_H

#include <stdint.h>
#include <stdio.h>

typedef struct export_opts {
  const char *run;  /* a run directory, a run's name or its unique prefix under `runs` */
  const char *runs; /* where names are looked up ("runs") */
  int64_t step;     /* the checkpoint's step; -1: the newest intact one */
  const char *out;  /* the file to write */
} export_opts;

/* Resolves the run, picks its checkpoint (a damaged newer one is named on
 * `warn`, may be NULL, and passed over; with a step, a damaged one is an
 * error), checks it against its manifest and writes its model to o->out.
 * *step gets the step exported. Errors say what is missing: no such run,
 * a run without checkpoints, a step it does not have (with the steps it
 * has), a damaged checkpoint by name. */
int export_model(const export_opts *o, FILE *warn, int64_t *step);

#endif
