/* doctor.h - `drover doctor`: checks what a run needs on this machine and
 * says what is wrong in plain words, one line per check:
 *
 *   ok    BLAS: OpenBLAS 0.3.21, 2 threads on 2 CPUs
 *   warn  terminal: TERM is unset: the dashboard needs a terminal type
 *   FAIL  ssh gpu1: Permission denied (publickey)
 *   --    Slurm: no sbatch, srun or sinfo here (needed only for launcher = "slurm")
 *
 * The checks: BLAS threads against the CPUs this process may use; the
 * terminal (a terminal at all, TERM, colours, UTF-8); the runs directory
 * and TMPDIR being writable; a loopback TCP port; ssh to each host given
 * (BatchMode, so a host that would ask for a password fails); Slurm's
 * commands and partitions when they are installed.
 */
#ifndef DROVER_DOCTOR_H
#define DROVER_DOCTOR_H

#include <stdio.h>

typedef struct doctor_opts {
  const char *const *hosts; /* ssh hosts to try ("name" or "name:slots") */
  int nhosts;
  const char *runs;         /* the runs directory ("runs") */
  double ssh_timeout;       /* seconds per host (0: 5) */
} doctor_opts;

/* Runs every check, printing one line each to out. Returns the number of
 * failed checks (warnings do not count). */
int doctor_run(const doctor_opts *o, FILE *out);

#endif
