/* launch.h - launchers: start a node process for a (role, index), stop it,
 * learn that it exited. One small interface; backends in launch_*.c
 * (local, Slurm and ssh).
 *
 * A node is the same drover binary run as
 *   drover node --coord HOST:PORT --role ROLE --index I --run-dir DIR
 *               --bind HOST [--cpus N] --heartbeat-ms MS --timeout-ms MS
 * with the run's secret reachable through $DROVER_SECRET_FILE (never on the
 * command line), and its stdout and stderr appended to DIR/logs/ROLE-I.log.
 */
#ifndef DROVER_LAUNCH_H
#define DROVER_LAUNCH_H

#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "proto/wire.h"

/* What a node of one role asks for, from drover.cluster's
 * `worker = { instances = 4, cpus = 2, memory = "4G", gpus = 0 }`.
 * Zero means "not given": each launcher documents what it does then. */
typedef struct launch_resources {
  int cpus;        /* per node: BLAS and thread-pool threads, Slurm's --cpus-per-task */
  uint64_t memory; /* bytes per node: Slurm's --mem */
  int gpus;        /* per node: Slurm's --gres=gpu:N, Spark's resource.gpu.amount */
  const char *label; /* "yarn": the node label its containers ask for (NULL: none) */
} launch_resources;

typedef struct launch_task {
  int role, index;           /* wire_role, index within the role */
  const char *coord;         /* "127.0.0.1:40001" */
  const char *run_dir;       /* absolute path */
  const char *secret_file;   /* absolute path of the node's 0600 key file (keyring.h) */
  const char *bind_host;     /* address nodes listen on ("127.0.0.1") */
  int cpus;                  /* 0 = leave thread counts alone */
  uint64_t memory;           /* bytes asked for (0: not given) */
  int gpus;                  /* GPUs asked for (0: none) */
  uint32_t heartbeat_ms;     /* passed as --heartbeat-ms */
  uint32_t timeout_ms;       /* passed as --timeout-ms */
  const char *transport;     /* the cluster's, "auto", "unix" or "tcp": DROVER_TRANSPORT in
                                the environment of launchers that set it (local, slurm), so
                                that the node's link to the coordinator, dialled before
                                REGISTERED tells it, follows it too; NULL: left alone */
} launch_task;

typedef struct launcher launcher;

/* Called from the loop when a started task's process ends (exit_status
 * from exit(), or term_signal when killed). `task_ud` is start's. */
typedef void (*launch_exit_cb)(launcher *l, void *task_ud, int64_t exit_status,
                               int term_signal);

typedef struct launch_ops {
  const char *name; /* "local" */
  /* Starts the task; *pid gets its process id (local) or 0. */
  int (*start)(launcher *l, const launch_task *t, void *task_ud, pid_t *pid);
  /* Sends `sig` to the task started with task_ud (no-op if it ended). */
  int (*signal)(launcher *l, void *task_ud, int sig);
  /* Number of started tasks whose exit has not been reported yet. */
  int (*running)(launcher *l);
  /* Frees the launcher; tasks still running are sent SIGKILL first and
   * their handles closed (exit callbacks are not called after this). */
  void (*destroy)(launcher *l);
  /* What the dashboard's header shows for the launcher ("yarn
   * application_1_0001 http://rm/proxy/..."), or NULL: its name. May be a
   * NULL member (local, ssh, slurm). The string is the launcher's. */
  const char *(*where)(launcher *l);
  /* The machine the launcher placed node (role, index) on, as it names
   * it ("b" for ssh hosts), or NULL when it does not choose (Slurm and
   * the others place nodes themselves). May be a NULL member. The string
   * is the launcher's. */
  const char *(*machine)(launcher *l, int role, int index);
  /* c:scale, before it starts nodes (role, index[0..n-1]) of `cpus`
   * each beside the running ones: 0 when they fit where this launcher
   * places nodes, else a negative code with the reason, naming the bound
   * (the Slurm allocation's CPUs, the ssh hosts' free slots). A NULL
   * member: the launcher cannot add or remove nodes while it runs, and
   * c:scale refuses. Never blocks for long (one helper command). */
  int (*room)(launcher *l, int role, const int *index, int n, int cpus);
} launch_ops;

struct launcher {
  const launch_ops *ops;
  uv_loop_t *loop;
  launch_exit_cb on_exit;
  void *ud; /* the owner's (the coordinator) */
};

/* drover.cluster{ slurm = { ... } }: how "slurm" submits a job of its own
 * when drover runs outside an allocation. NULL strings: Slurm's default. */
typedef struct launch_slurm_opts {
  const char *partition, *time, *account, *qos, *constraint;
  const char *const *sbatch; /* extra sbatch options, passed verbatim */
  int nsbatch;
  double pending_timeout;    /* seconds a submitted job may pend (0: 300) */
} launch_slurm_opts;

/* drover.cluster{ spark = { ... } }: where "spark" submits its
 * applications. Strings are borrowed for launch_open. */
typedef struct launch_spark_opts {
  const char *master;    /* spark://host:port, yarn, k8s://... (required) */
  const char *submit;    /* the spark-submit command (NULL: "spark-submit" in PATH) */
  const char *master_ui; /* the standalone master's web UI (http://host:8080) whose
                          * JSON the driver quotes while a node waits; NULL: none */
  const char *const *conf_keys, *const *conf_values; /* --conf K=V each */
  int nconf;
} launch_spark_opts;

/* drover.cluster{ yarn = { ... } }: the application "yarn" submits. */
typedef struct launch_yarn_opts {
  const char *rm;           /* host:port of the RM's REST API (NULL: $DROVER_YARN_RM) */
  const char *queue;        /* NULL: "default" */
  const char *name;         /* the application's name (NULL: "drover") */
  int max_attempts;         /* the AM's attempts (0: 1); a new attempt adopts the nodes */
  const char *am_classpath; /* where drover's AM and Hadoop's jars are on the cluster's
                             * machines (NULL: $DROVER_YARN_AM_CLASSPATH, else the
                             * installed jar and YARN's default classpath) */
  double submit_timeout;    /* seconds for the AM to come up (0: 120) */
  const char *staging;      /* the directory on the cluster's default file system the
                             * binary and files are uploaded under (NULL:
                             * $DROVER_YARN_STAGING, else ~/.droverStaging there) */
  double orphan_timeout;    /* seconds the AM waits for a word from drover before it
                             * ends the application as FAILED (0: 30) */
  const char *user;         /* the user the application runs as, the RM's user.name
                             * (NULL: the local user's name) */
} launch_yarn_opts;

/* Called by a launcher with news the user should see while a start waits
 * ("job 12 pending: Resources"); the coordinator logs it to events.log
 * and shows it. */
typedef void (*launch_note_cb)(void *ud, const char *msg);

/* What a launcher needs beyond the loop (all borrowed for the call). */
typedef struct launch_config {
  const char *const *hosts; /* "ssh": "name[:slots]" each */
  int nhosts;
  const char *ssh_config;   /* "ssh": -F FILE ("" or NULL: $DROVER_SSH_CONFIG, else none) */
  const char *run_dir;      /* the run's directory (absolute) */
  int count[ROLE_COUNT];    /* the whole cluster: nodes per role ... */
  int extra[ROLE_COUNT];    /* ... and how many more c:scale may add (`max` - count): a
                             * Slurm job drover submits holds them too */
  launch_resources res[ROLE_COUNT]; /* ... and what each node of a role asks for */
  launch_slurm_opts slurm;  /* "slurm", outside an allocation */
  launch_spark_opts spark;  /* "spark" */
  launch_yarn_opts yarn;    /* "yarn" */
  const char *const *files; /* "ssh", "spark", "yarn": the script's files, shipped with
                             * the binary */
  int nfiles;
  launch_note_cb note;      /* may be NULL */
  void *note_ud;
} launch_config;

/* Every launcher is made alike: from the loop its tasks' processes run on,
 * the configuration (borrowed for the call: what the launcher keeps, it
 * copies), and the callback for its tasks' exits with the owner's ud. On
 * success *out is the launcher (freed by its ops->destroy) and 0 is
 * returned; else a negative code with the reason, and *out is NULL. */
typedef int (*launch_new_fn)(uv_loop_t *loop, const launch_config *cfg, launch_exit_cb on_exit,
                             void *ud, launcher **out);

/* The local launcher: node processes on this machine (uv_spawn of this
 * very binary, found through /proc/self/exe). cfg is not used (may be
 * NULL). */
int launch_local_new(uv_loop_t *loop, const launch_config *cfg, launch_exit_cb on_exit, void *ud,
                     launcher **out);

/* The external launcher (launch_external.c): starts nothing; the nodes are
 * someone else's (a simulator, a test's peers) and register by themselves.
 * Their exits are their connections closing. cfg is not used. */
int launch_external_new(uv_loop_t *loop, const launch_config *cfg, launch_exit_cb on_exit,
                        void *ud, launcher **out);

/* The ssh launcher (launch_ssh.c): each node started on a host by the
 * system ssh client, which is its local handle. Uses cfg's hosts ("name"
 * or "name:slots", 1 slot by default), ssh_config (-F FILE; when NULL or
 * empty, $DROVER_SSH_CONFIG, and when that is unset too the user's own
 * config applies), run_dir, files, note. Before returning it checks every
 * host for this drover and ships the binary and files where needed
 * (blocking, bounded; launch_ship.c). Fails with DRV_EINVAL on a malformed
 * host, no hosts, or a host that ssh cannot reach (named, with ssh's
 * words). */
int launch_ssh_new(uv_loop_t *loop, const launch_config *cfg, launch_exit_cb on_exit, void *ud,
                   launcher **out);

/* The Slurm launcher (launch_slurm.c, launch_slurm_job.c): each node a job
 * step, started with srun, of the allocation we run in ($SLURM_JOB_ID) or,
 * outside one, of a job submitted here with sbatch (sized from cfg's
 * counts and resources, with cfg->slurm's options) and waited for: this
 * call blocks until that job runs, reporting its pending reasons through
 * cfg->note, and fails (the job cancelled, Slurm's reason in the message)
 * on a rejected or unschedulable job, after cfg->slurm.pending_timeout, or
 * on Ctrl-C. destroy also cancels a job it submitted. A task's pid is that
 * of its srun. */
int launch_slurm_new(uv_loop_t *loop, const launch_config *cfg, launch_exit_cb on_exit, void *ud,
                     launcher **out);

/* The Spark launcher (launch_spark.c): each node the one task of a Spark
 * application of its own, submitted with spark-submit in client mode (its
 * local process, the driver, is the node's handle) to cfg->spark.master,
 * with this binary, the secret and cfg's files shipped through --files.
 * A role's gpus become its executors' and tasks' resource.gpu.amount; the
 * node sees the addresses Spark assigned in CUDA_VISIBLE_DEVICES.
 * Fails with DRV_EINVAL on a missing master or a conf key drover sets
 * itself; DRV_EIO when the application
 * file cannot be written into the run directory. */
int launch_spark_new(uv_loop_t *loop, const launch_config *cfg, launch_exit_cb on_exit,
                     void *ud, launcher **out);

/* The YARN launcher (launch_yarn.c): one YARN application per run, whose
 * ApplicationMaster (drover's small Java AM, yarn/.../DroverAM.java)
 * starts one container per node, driven over HTTP; the RM through its REST
 * API. This call submits the application and blocks until the AM is up
 * (bounded by cfg->yarn.submit_timeout), failing with YARN's diagnostics;
 * a role asking for more than YARN's maximum allocation fails it before
 * submitting. It then uploads this binary and cfg's files through the AM
 * to the application's staging directory (cfg->yarn.staging) on the
 * cluster's default file system: every container gets them as YARN local
 * resources. destroy finishes the application (or kills it). Tasks have
 * no local pid. The application's id, tracking URL and AM (with its
 * attempt, rewritten when a new attempt takes over) are written to
 * RUN_DIR/yarn and told through cfg->note. */
int launch_yarn_new(uv_loop_t *loop, const launch_config *cfg, launch_exit_cb on_exit, void *ud,
                    launcher **out);

/* 0 when `name` is a launcher launch_open knows, else DRV_EUNSUPPORTED
 * ("launcher 'x' is not available ("local", "slurm", "ssh" or "spark")"). */
int launch_check_name(const char *name);
/* The launcher called `name` ("local", "slurm", "ssh", "spark"): 0 with *out, or a
 * negative code with the reason (an unknown name lists the known ones). */
int launch_open(const char *name, const launch_config *cfg, uv_loop_t *loop,
                launch_exit_cb on_exit, void *ud, launcher **out);
/* The name under which launcher `name` puts a file of cfg->files in a
 * node's working directory: "spark" by its last component (--files
 * flattens); "ssh", "yarn" and "external" (whose nodes' operator places
 * the files as ssh would) a relative path as given, an absolute one by its
 * last component. 0, or an error naming the path. */
int launch_ship_name(const char *name, const char *path, char *out, size_t n);

/* The absolute path of the running drover binary (static buffer). */
const char *launch_self_exe(void);

#endif
