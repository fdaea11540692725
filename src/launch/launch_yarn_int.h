/* launch_yarn_int.h - what the YARN launcher's files share: the launcher
 * (launch_yarn.c: tasks, events, the launcher's ops), its requests to the
 * ResourceManager and the ApplicationMaster (launch_yarn_rm.c) and the
 * upload of the binary and the script's files (launch_yarn_stage.c).
 * Not a public API; everything here runs on the loop's thread.
 */
#ifndef DROVER_LAUNCH_YARN_INT_H
#define DROVER_LAUNCH_YARN_INT_H

#include <jansson.h>
#include <limits.h>

#include "launch/launch.h"
#include "launch/launch_int.h"

#define YARN_KEY_MAX 32
#define YARN_REQ_MS 5000
/* The node's key file in its container's working directory. */
#define YARN_KEY_FILE "drover-node.key"

/* A node drover asked the AM for, until its exit is reported. */
typedef struct ytask {
  char key[YARN_KEY_MAX]; /* "worker-1" */
  void *ud;
  char log[PATH_MAX];
  char secret[PATH_MAX]; /* the coordinator's key file of the node, uploaded at /start */
  int role;
  char *cmd;    /* the container's command (owned) */
  char *body;   /* its /start request (owned), NULL until its key is staged: sent
                 * again, unchanged, when queued (the AM takes a repeated one) */
  int queued;   /* 1: asked while no AM answered; sent when one does */
  struct ytask *next;
} ytask;

typedef struct yarn_launcher {
  launcher pub; /* first member */
  uv_timer_t poll;
  ytask *tasks;
  char rm[256];       /* "http://host:port" */
  char app[96];       /* application_..._0001 */
  char am[256];       /* "http://host:port" of the AM, "" until it runs */
  char token[65];
  char user[64];      /* the RM's user.name: the application's user */
  double orphan_timeout; /* seconds: the AM's wait for a word from us */
  char *tracking;     /* the RM's tracking URL (owned) */
  char where[512];    /* "yarn APP TRACKING_URL": the dashboard's header */
  char run_dir[PATH_MAX];
  launch_resources res[ROLE_COUNT];
  char label[ROLE_COUNT][64];
  long max_mb, max_vcores;
  char *files;        /* local resources, "NAME\tURL\tSIZE\tTIMESTAMP\n" each (owned) */
  int nfiles;         /* lines in files */
  int am_down;        /* the last request to the AM got no answer at all */
  int attempts;       /* AM attempts seen (1 once the first runs) */
  int gone;           /* the application ended under us: no more starts */
  launch_note_cb note;
  void *note_ud;
  int finished;
} yarn_launcher;

void launch_yarn__note(yarn_launcher *y, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- the RM and the AM (launch_yarn_rm.c) ---- */

/* A request to the RM (path after http://host:port) whose answer is JSON:
 * 0 with *out (the caller decrefs; NULL for an empty answer or when out
 * is NULL), or an error with the RM's words when the status is not want. */
int launch_yarn__rm_json(yarn_launcher *y, const char *method, const char *path, const char *body,
                         long want, json_t **out);
/* A request to the AM: 0 with *resp (the caller frees; resp may be NULL),
 * or an error naming the AM's answer. y->am_down says whether the AM
 * answered at all. body_file, when not NULL, is streamed as the body with
 * the extra header line `header` ("X-Drover-Name: ..."). */
int launch_yarn__am_req(yarn_launcher *y, const char *method, const char *path, const char *body,
                        const char *body_file, const char *header, long timeout_ms, char **resp);
/* new-application: y->app and YARN's maximum allocation. */
int launch_yarn__new_app(yarn_launcher *y);
/* A role's container memory in MiB: its `memory` rounded up, else 1024. */
long launch_yarn__role_mb(const launch_resources *r);
/* Fails, naming the role and YARN's numbers, when a role asks for more
 * than any container may have. */
int launch_yarn__check_resources(yarn_launcher *y, const launch_config *cfg);
/* c:scale: 0 when n more containers of `role` fit on the RUNNING nodes of
 * its label now (the RM's nodes, each's free memory and vcores), else
 * DRV_ERANGE saying how many fit. */
int launch_yarn__room(yarn_launcher *y, int role, int n);
/* Submits the AM's container (queue, name, attempts) with the classpath
 * cp (yarn.am_classpath or $DROVER_YARN_AM_CLASSPATH) or, cp NULL, the
 * installed AM jar `jar` and YARN's default application classpath, which
 * each NodeManager expands from its own Hadoop. */
int launch_yarn__submit(yarn_launcher *y, const launch_yarn_opts *o, const char *cp,
                        const char *jar);
/* Polls until the AM registered (0, y->am and y->tracking set), the
 * application ended (YARN's diagnostics) or timeout_s passed. */
int launch_yarn__wait_am(yarn_launcher *y, double timeout_s);
/* One look at the application: 1 when a new AM attempt registered (y->am
 * changed), 0 when nothing changed yet, -1 when the application ended
 * (y->gone set, noted with YARN's diagnostics). Never waits. */
int launch_yarn__follow(yarn_launcher *y);
/* Kills the application through the RM (when the AM cannot finish it). */
void launch_yarn__rm_kill(yarn_launcher *y);
/* RUN_DIR/yarn: the application, its tracking URL, the RM, the AM. */
int launch_yarn__write_info(yarn_launcher *y);

/* ---- local resources (launch_yarn_stage.c) ---- */

/* Fails, naming the file, when one of cfg's files is missing or cannot be
 * a local resource (its name: "drover", another file's, a control
 * character): checked before anything is submitted. */
int launch_yarn__check_files(const launch_config *cfg);
/* Uploads this drover (as "drover") and each of cfg's files (named as
 * the ssh launcher names them) through the AM to the application's
 * staging directory on the cluster's default file system, filling
 * y->files. An error names the file. */
int launch_yarn__stage(yarn_launcher *y, const launch_config *cfg);
/* Uploads one start's key file of node `key` (the coordinator's
 * secret_file) to STAGING/files/keys/KEY; *line (malloc'd, the caller
 * frees): its resource line, YARN_KEY_FILE in the container. */
int launch_yarn__stage_key(yarn_launcher *y, const char *secret_file, const char *key,
                           char **line);

#endif
