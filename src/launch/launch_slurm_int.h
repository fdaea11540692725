/* launch_slurm_int.h - what the Slurm launcher's two files share: running
 * the Slurm commands (launch_slurm_job.c) and the job drover submits for
 * itself outside an allocation. Not a public API. */
#ifndef DROVER_LAUNCH_SLURM_INT_H
#define DROVER_LAUNCH_SLURM_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "launch/launch.h"

#define LAUNCH_SLURM__HELPER_MS 10000 /* one squeue, scancel or sbatch */

/* Runs argv (searched in PATH) with stdin from /dev/null, for at most
 * LAUNCH_SLURM__HELPER_MS (then SIGKILL). Its stdout goes to out and its
 * stderr to err (each NUL-terminated, truncated to n - 1; either may be
 * NULL, and is then discarded). Returns its exit status (0..255), or a
 * negative code with the error set. The child is reaped here. */
int launch_slurm__run(char *const argv[], char *out, size_t out_n, char *err, size_t err_n);

/* The allocation the nodes run in. `own` when drover submitted it
 * (launch_slurm_job.c): then destroy cancels it, and a watchdog process
 * (pid `watchdog`, reading the pipe `watch_fd` we hold) cancels it should
 * we die without doing so. */
typedef struct slurm_job {
  char id[32];        /* the job id, digits only */
  bool own;
  pid_t watchdog;     /* 0 when none */
  int watch_fd;       /* write end of the watchdog's stdin, -1 when none */
  uint64_t mem_per_cpu; /* MiB, the job's --mem-per-cpu (0: not given) */
} slurm_job;

/* Submits a job sized for cfg (every node of every role, each with the
 * largest cpus/memory/gpus asked), waits for it to run (reporting each new
 * pending reason through cfg->note, at most cfg->slurm.pending_timeout
 * seconds, interruptible), and fills *job. On failure the job, if any, is
 * cancelled and a negative code returned with Slurm's reason. While it
 * waits, `loop` (may be NULL) keeps turning between squeue calls. */
int launch_slurm__job_submit(uv_loop_t *loop, const launch_config *cfg, slurm_job *job);

/* Cancels a job we submitted (and so every step) and waits, bounded, until
 * squeue no longer lists it; then retires the watchdog. A no-op for an
 * allocation we did not make. */
void launch_slurm__job_cancel(slurm_job *job);

/* Appends a line to the file at path (a node's log); best effort. */
void launch_slurm__log_line(const char *path, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
