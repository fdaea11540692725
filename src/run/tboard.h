/* tboard.h - a real TensorBoard serving a run's event files: a child
 * process drover starts, watches and ends (TensorFlowOnSpark's
 * tensorboard=True, Slider's and tf-yarn's TensorBoard component).
 *
 * The program: $DROVER_TENSORBOARD when set (it must be executable);
 * else the virtual environment `make tensorboard` makes, found beside the
 * running binary (BIN/build/tensorboard/bin/tensorboard for ./drover in a
 * source tree, BIN/tensorboard/bin/tensorboard for build/drover); else
 * `tensorboard` on PATH. Without one, starting is refused with the ways
 * to get it.
 *
 * The child runs `tensorboard --logdir DIR` (or --logdir_spec NAME:DIR,...
 * for several runs side by side) --host BIND --port PORT, with stdin on
 * /dev/null and its output in a log file (or the caller's own), in a
 * session (and so a process group) of its own: a Ctrl-C at the terminal
 * reaches drover alone, which ends it. It is never left behind:
 *  - tboard_stop sends SIGTERM (TensorBoard removes its info file and
 *    exits at once), SIGKILLs its group after TBOARD_STOP_SECONDS, and
 *    reaps it; TensorBoard's own child (its data server) is in that group;
 *  - when drover dies without stopping it (SIGKILL, a crash), the kernel
 *    SIGKILLs it: the child sets PR_SET_PDEATHSIG before it execs, and
 *    checks that its parent is still the one that forked it (the parent
 *    may have died in between). The signal follows the thread that forked,
 *    so start it from the loop's thread (the one that lives as long as the
 *    process); the data server exits when its stdin, a pipe from
 *    TensorBoard, closes. Chosen over a watchdog polling its parent: no
 *    extra process, no delay, and it holds whatever ends drover.
 * Linux only (prctl), as the rest of drover.
 *
 * Not thread-safe; the caller reaps nothing else by pid -1 (libuv's
 * SIGCHLD handling waits for its own pids only).
 */
#ifndef DROVER_TBOARD_H
#define DROVER_TBOARD_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "base/rundir.h"

#define TBOARD_PORT 6006       /* TensorBoard's own default */
#define TBOARD_PORT_TRIES 10   /* 6006..6015 free ones looked for, as TensorBoard does */
#define TBOARD_STOP_SECONDS 5.0

/* tensorboard = true or { port = N, bind = "host" }. */
typedef struct tboard_opts {
  int port;       /* 1..65535; 0: the first free of 6006..6015, else one the
                     kernel picks */
  char bind[256]; /* the address to listen on; "": 127.0.0.1. "0.0.0.0" or
                     "::" serve every interface (the URL names this host) */
} tboard_opts;

typedef struct tboard tboard;

/* The TensorBoard program into path[n] (see the top). 0, or
 * DRV_EUNSUPPORTED with the message saying how to install it. */
int tboard_program(char *path, size_t n);

/* Checks what starting needs, without starting: the program, the port's
 * range, and that the port can be listened on at `bind`. 0, or DRV_EINVAL
 * / DRV_EUNSUPPORTED naming the option ("tensorboard: cannot listen on 10.0.0.9
 * port 6006: Cannot assign requested address"). */
int tboard_check(const tboard_opts *o);

/* Starts TensorBoard over `logdir` (a directory; with spec true, a
 * logdir_spec "name:/abs/dir,..."), `title` its browser window's title,
 * its output appended to `log` (NULL: drover's own stdout and stderr).
 * On success *out is the caller's, to end with tboard_stop. */
int tboard_start(const tboard_opts *o, const char *logdir, bool spec, const char *title,
                 const char *log, tboard **out);

/* "http://127.0.0.1:6006/" (owned by t); its process; where it logs
 * ("" when it writes to drover's own output). */
const char *tboard_url(const tboard *t);
pid_t tboard_pid(const tboard *t);
const char *tboard_log(const tboard *t);

/* Whether it has exited (reaped here, without waiting), and if so how,
 * into why[n] ("exited with status 1", "killed by signal 9"). Once true,
 * stays true. */
bool tboard_exited(tboard *t, char *why, size_t n);

/* Ends it as the top says, reaps it and frees t. NULL is fine. Returns
 * false when it had already exited by itself (a crash) before the call. */
bool tboard_stop(tboard *t);

/* Whether a logdir_spec can carry `name` and `dir` (no ',' in either, no
 * ':' in the name, an absolute dir). */
bool tboard_spec_ok(const char *name, const char *dir);

/* ---- a run's TensorBoard ---------------------------------------------------
 * Over the run directory's events/ (each writer's subdirectory is a run of
 * its own in TensorBoard), its output in logs/tensorboard.log. While it
 * serves, the run directory's `tensorboard` file holds "URL PID" (`drover
 * ls` shows the URL while that pid lives); events.log says
 * "tensorboard: URL (pid N)" when it starts and how it ended; the start
 * and an early exit are said on stderr too. */

/* Starts it (tboard_start) and records it as above. 0 or the error. */
int tboard_run_start(rundir *rd, const tboard_opts *o, tboard **t);
/* Between other work: a TensorBoard that exited by itself is said (with
 * its log's last lines) and freed, *t NULL after. NULL *t is fine. */
void tboard_run_poll(rundir *rd, tboard **t);
/* Stops it (tboard_stop), removes the `tensorboard` file and says so in
 * events.log; *t NULL after. NULL *t is fine. */
void tboard_run_stop(rundir *rd, tboard **t);

#endif
