/* rundir.h - the run directory: everything a run produces, and the one
 * definition of the names in it (every file of src/ names them by these).
 *
 *   runs/<name>-<yyyymmdd-hhmmss>[-N]/          RUNDIR_BASE, rundir_create
 *     events.log      one stamped line per event (rundir_event) from the
 *                     process running the run (the coordinator's, or the
 *                     in-process fit's); the last is "process exit: N"
 *                     (rundir_record_exit)
 *     metrics.jsonl   a JSON object per train step and per evaluation, in
 *                     process and on a cluster (run/metrics.h: the schema)
 *     run.lua         the script as it was, and its path, arguments and
 *     run.json        working directory: what `drover run --resume` runs
 *                     (as the fit or the cluster starts; kept on a resume)
 *     process         "in-process PID", while an in-process run runs
 *     checkpoints/step-<N>/   with checkpoint = {...} or exp:checkpoint():
 *                     committed by its manifest.json (MANIFEST_NAME),
 *                     written last; in process model.safetensors and
 *                     state.safetensors (ckpt.h), on a cluster
 *                     ps-<k>.safetensors from each ps
 *     checkpoint-dir  the URL of the checkpoints when they are elsewhere
 *                     (checkpoint = { dir = "hdfs://..." }): the run's own
 *                     directory there, <dir>/<this directory's name>
 *     events/<who>/events.out.tfevents.*   TensorBoard summaries: who is
 *                     train in process, coordinator and chief on a cluster
 *     tensorboard     "URL PID" of the TensorBoard serving events/, while
 *                     it runs (tensorboard = true; run/tboard.h)
 *     logs/           made with the directory (an in-process run's holds
 *                     only tensorboard.log); on a cluster:
 *       <role>-<i>.log      each node's stdout and stderr (the launcher's)
 *       coordinator.log     the coordinator's own log records
 *       script.log          a detached script's output (`run --detach`)
 *       ssh-<host>.log      shipping drover and files to an ssh host
 *       slurm-job.log       the Slurm job holding the allocation
 *       tensorboard.log     TensorBoard's output (tensorboard = true; in
 *                           process too)
 *   and on a cluster only:
 *     coordinator     "HOST:PORT PID" of the coordinator, while it runs
 *     secret          the run's secret, 0600 (the coordinator's alone)
 *     control.key     the keys of `drover attach --control` and of a
 *     view.key        read-only attach, 0600
 *     keys/<role>-<i>.key   each node's key file, 0600, at its first start
 *                     (a resumed run makes all of these afresh)
 *     nodes.tsv       a node per line: what it asked for, what it got
 *                     (rewritten as nodes register and restart)
 *     slurm-job.sh, slurm-heartbeat   the Slurm launcher's job and its
 *                     watchdog's heartbeat
 *     spark-app.py    the Spark launcher's application
 *     yarn            the YARN launcher's application, tracking URL,
 *                     ResourceManager, ApplicationMaster and attempt
 *   and always:
 *     lock            flock()ed by the one process that runs the run, with
 *                     its pid (rundir_lock); left in place when it ends
 *
 * Outside it: a detached run's output goes to runs/detached-<stamp>-<pid>.log,
 * moved to logs/script.log once its cluster has started.
 */
#ifndef DROVER_RUNDIR_H
#define DROVER_RUNDIR_H

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* The runs of a working directory, unless told otherwise. */
#define RUNDIR_BASE "runs"

/* Names inside a run directory. */
#define RUNDIR_EVENTS_LOG "events.log"
#define RUNDIR_METRICS "metrics.jsonl"
#define RUNDIR_RUN_LUA "run.lua"
#define RUNDIR_RUN_JSON "run.json"
#define RUNDIR_PROCESS "process"
#define RUNDIR_COORDINATOR "coordinator"
#define RUNDIR_SECRET "secret"
#define RUNDIR_CONTROL_KEY "control.key"
#define RUNDIR_VIEW_KEY "view.key"
#define RUNDIR_KEYS "keys"
#define RUNDIR_NODES "nodes.tsv"
#define RUNDIR_LOGS "logs"
#define RUNDIR_COORD_LOG RUNDIR_LOGS "/coordinator.log"
#define RUNDIR_SCRIPT_LOG RUNDIR_LOGS "/script.log"
#define RUNDIR_SLURM_LOG RUNDIR_LOGS "/slurm-job.log"
#define RUNDIR_TB "events" /* TensorBoard: events/<who>/ */
#define RUNDIR_TB_TRAIN RUNDIR_TB "/train"
#define RUNDIR_TENSORBOARD "tensorboard" /* "URL PID" while TensorBoard serves */
#define RUNDIR_TB_LOG RUNDIR_LOGS "/tensorboard.log"
#define RUNDIR_CKPT_TOKEN "ckpt-token" /* a node that reads it sees the run directory */
#define RUNDIR_CHECKPOINTS "checkpoints"
#define RUNDIR_CKPT_DIR "checkpoint-dir" /* checkpoints elsewhere (HDFS): their URL */
#define RUNDIR_SLURM_JOB "slurm-job.sh"
#define RUNDIR_SLURM_HEARTBEAT "slurm-heartbeat"
#define RUNDIR_SPARK_APP "spark-app.py"
#define RUNDIR_YARN "yarn"
#define RUNDIR_LOCK "lock" /* rundir_lock */

/* The numbered names, each formatted as snprintf does (into buf, the
 * length it needs back) under `dir` ("DIR/NAME"), or alone with dir NULL. */
/* "logs/<role>-<i>.log" */
int rundir_node_log(char *buf, size_t n, const char *dir, const char *role, int index);
/* "keys/<role>-<i>.key" */
int rundir_node_key(char *buf, size_t n, const char *dir, const char *role, int index);
/* "logs/ssh-<host>.log" */
int rundir_host_log(char *buf, size_t n, const char *dir, const char *host);
/* "step-<N>", a checkpoint of checkpoints/ */
int rundir_step(char *buf, size_t n, const char *dir, int64_t step);
/* The N of a "step-<N>" (a plain decimal), else -1. */
int64_t rundir_step_of(const char *name);
/* "ps-<k>.safetensors", ps k's file of a cluster checkpoint */
int rundir_ps_shards(char *buf, size_t n, const char *dir, int ps);

typedef struct rundir {
  char path[1024]; /* absolute */
  FILE *events;    /* events.log, line-buffered */
  void (*hook)(void *ud, const char *text); /* rundir_set_hook */
  void *hook_ud;
  int locked; /* rundir_create/rundir_open took the lock: rundir_close drops it */
} rundir;

/* Creates base/<name>-<stamp> (base and logs/ too), locks it (rundir_lock)
 * and opens events.log. A name with '/' or starting with '.' is refused; a
 * taken directory gets a -2, -3... suffix. Errors name the path and the
 * reason ("cannot create 'runs': Permission denied"). */
int rundir_create(const char *base, const char *name, rundir *rd);
/* Opens an existing run directory `path` (a resumed run) as rundir_create
 * leaves a new one: locked first, before anything in it is touched (so a
 * second process resuming it is refused, naming the first), then
 * events.log open for appending. */
int rundir_open(const char *path, rundir *rd);

/* One process runs a run directory at a time: an exclusive flock() on
 * dir/lock, which holds the holder's pid. Within a process the lock is
 * counted (the coordinator of a resumed run takes it again under
 * `drover run --resume`'s own hold): 0, or DRV_EAGAIN when another process
 * holds it ("run directory 'D' is in use by another drover process (pid
 * N)"), DRV_EIO. Its descriptor is close-on-exec (the nodes a coordinator
 * spawns do not inherit it) and the kernel drops it when the process dies,
 * however it dies. dir as given is the key: pass one spelling (absolute). */
int rundir_lock(const char *dir);
/* Undoes one rundir_lock of this process; the last releases it. */
void rundir_unlock(const char *dir);
/* Whether another process holds dir's lock: its pid (-1 when its file does
 * not say it yet), or 0 when none does (or this process does). */
long rundir_lock_holder(const char *dir);
/* Where run directory `run`'s checkpoints are: the URL its
 * RUNDIR_CKPT_DIR file records (checkpoint = { dir = "hdfs://..." }), else
 * <run>/checkpoints; into buf. */
const char *rundir_ckdir(const char *run, char *buf, size_t n);
/* Checkpoints of rd go to <base>/<rd's name> (a URL): into buf, and
 * recorded in RUNDIR_CKPT_DIR. 0 or the write's error. */
int rundir_set_ckdir(const rundir *rd, const char *base, char *buf, size_t n);
/* mkdir -p. The error names the path, and the component that failed when
 * it is another (a regular file in the way, a read-only parent). */
int rundir_mkdirs(const char *path);
/* Appends "2026-11-21T10:53:06.123Z <text>" to events.log and flushes. */
void rundir_event(rundir *rd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends one record, `rec` and a newline, to f (a file of the run
 * directory named `name`, opened for appending) with one write: a reader
 * sees the line whole or not at all (a short write is cut back). A
 * failure counts as a lost record; the first one is said on stderr and in
 * events.log (so on the dashboard). 0, or -1 when the record is lost. */
int rundir_append(rundir *rd, FILE *f, const char *name, const char *rec, size_t len);
/* A record (a line, a whole file) that could not be written: counted,
 * and the first said as rundir_append says it. `why` names the file; rd
 * may be NULL (then stderr only). */
void rundir_lost(rundir *rd, const char *why);
/* Records this process failed to write to any run directory. */
int64_t rundir_records_lost(void);
/* After each event is written, fn(ud, text) gets its text (one line, no
 * time stamp; valid during the call): the coordinator's dashboard keeps
 * its own copy. NULL removes the hook. Set it after rundir_create. */
void rundir_set_hook(rundir *rd, void (*fn)(void *ud, const char *text), void *ud);
/* Writes (replacing) a file in the run directory with the given mode. */
int rundir_write(const rundir *rd, const char *name, const char *content, mode_t mode);
/* "<dir>/<name>" into buf; returns buf. */
const char *rundir_file(const rundir *rd, const char *name, char *buf, size_t n);
/* The last `lines` lines of a file into buf (for error messages naming a
 * node's last log lines); "" when unreadable. Returns buf. */
const char *rundir_tail(const char *path, int lines, char *buf, size_t n);
/* A node's log as the dashboard shows it: the last `lines` lines of path
 * into buf (the newest that fit), or one line in parentheses saying why
 * there are none ("(this node has no log file)" for "" or NULL, "(cannot
 * read PATH: REASON)", "(the log is empty)"). Returns buf. */
const char *rundir_log_tail(const char *path, int lines, char *buf, size_t n);
/* Closes events.log and releases the lock rundir_create/rundir_open took. */
void rundir_close(rundir *rd);
/* At the end of the process: appends "process exit: STATUS" ("process
 * exit: 130 (signal 2)" for a run interrupted by SIGINT) to the events.log
 * of every run directory this process created or opened, so `drover ls`
 * can tell done, failed and interrupted from crashed (no such line). Call
 * it once, after every rundir is closed. */
void rundir_record_exit(int status, int signo);

#endif
