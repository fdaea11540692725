/* ckpt.c - writing, listing, checking, restoring and pruning training
 * checkpoints (see ckpt.h). Floats in metadata are C99 hex ("%a"), which
 * strtod reads back bit for bit.
 */
#include "train/ckpt.h"
#include "numeric/nn_tabfile.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/err.h"
#include "base/manifest.h"
#include "base/rundir.h"
#include "base/safetensors.h"
#include "base/util.h"

#define MAX_META 64 /* key/value pairs of state.safetensors */
/* An optimizer described with its schedule (warmup then cosine, ...) runs
 * to a few hundred characters; resume compares the whole description. */
#define DESC_MAX 1024
#define MAX_DROPOUT 16

/* ============================== directories ============================== */

static void remove_step(const char *path) { ckfs_remove(path); }

static bool has_manifest(const char *step_dir) { return ckfs_committed(step_dir); }

/* Every step directory (committed or not when `all`), oldest first. */
static int list_steps(const char *dir, ckpt_entry **out, bool all) {
  return ckfs_list(dir, out, all);
}

int ckpt_list(const char *dir, ckpt_entry **out) { return list_steps(dir, out, false); }

/* ============================== writing ================================== */

/* Growing key/value metadata with owned values. */
typedef struct meta {
  const char *kv[2 * MAX_META + 1];
  char vals[MAX_META][DESC_MAX];
  int n;
} meta;

static void meta_add(meta *m, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void meta_add(meta *m, const char *key, const char *fmt, ...) {
  if (m->n >= MAX_META) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(m->vals[m->n], sizeof m->vals[m->n], fmt, ap);
  va_end(ap);
  m->kv[2 * m->n] = key;
  m->kv[2 * m->n + 1] = m->vals[m->n];
  m->kv[2 * ++m->n] = NULL;
}

static void meta_rng(meta *m, const char *key, const rng_t *r) {
  meta_add(m, key, "%016" PRIx64 "%016" PRIx64 "%016" PRIx64 "%016" PRIx64, r->s[0], r->s[1],
           r->s[2], r->s[3]);
}

/* The Dropout modules of m, depth first, into out (at most max). */
static int dropouts(nn_module *m, nn_module **out, int n, int max) {
  if (strcmp(m->ops->type, "Dropout") == 0 && n < max) out[n++] = m;
  for (int i = 0; i < m->nchildren; i++) n = dropouts(m->children[i], out, n, max);
  return n;
}

static const char *const dropout_keys[MAX_DROPOUT] = {
    "rng.dropout.0", "rng.dropout.1", "rng.dropout.2",  "rng.dropout.3",
    "rng.dropout.4", "rng.dropout.5", "rng.dropout.6",  "rng.dropout.7",
    "rng.dropout.8", "rng.dropout.9", "rng.dropout.10", "rng.dropout.11",
    "rng.dropout.12", "rng.dropout.13", "rng.dropout.14", "rng.dropout.15"};

static void state_meta(const ckpt_state *s, meta *m) {
  const train_position *p = &s->pos;
  char desc[DESC_MAX];
  optim_describe(optim_config(s->opt), desc, sizeof desc);
  meta_add(m, "format", "drover-state-1");
  meta_add(m, "optimizer", "%s", desc);
  meta_add(m, "optim_steps", "%" PRId64, optim_steps(s->opt));
  meta_add(m, "fit", "%" PRId64, s->fit);
  meta_add(m, "seed", "%" PRIu64, s->seed);
  meta_add(m, "step", "%" PRId64, p->step);
  meta_add(m, "epoch", "%" PRId64, p->epoch);
  meta_add(m, "data_pos", "%" PRId64, p->data_pos);
  meta_add(m, "epoch_loss", "%a", p->epoch_loss);
  meta_add(m, "epoch_seen", "%" PRId64, p->epoch_seen);
  meta_add(m, "epoch_correct", "%" PRId64, p->epoch_correct);
  meta_add(m, "epoch_has_acc", "%d", p->epoch_has_acc ? 1 : 0);
  meta_add(m, "eval_loss", "%a", p->eval_loss);
  meta_add(m, "eval_accuracy", "%a", p->eval_accuracy);
  meta_add(m, "eval_auc", "%a", p->eval_auc);
  meta_add(m, "eval_logloss", "%a", p->eval_logloss);
  if (optim_config(s->opt)->sched.kind == OSCHED_PLATEAU) {
    char pl[128];
    optim_plateau_format(optim_plateau_state(s->opt), pl, sizeof pl);
    meta_add(m, "optim_plateau", "%s", pl);
  }
  if (p->stop.seen) {
    char st[128];
    train_stopper_format(&p->stop, st, sizeof st);
    meta_add(m, "train_stop", "%s", st);
  }
  if (s->rng) meta_rng(m, "rng", s->rng);
  nn_module *d[MAX_DROPOUT];
  int nd = dropouts(s->model, d, 0, MAX_DROPOUT);
  for (int i = 0; i < nd; i++) meta_rng(m, dropout_keys[i], &d[i]->rng);
}

/* The optimizer's slots as tensors named optim.<param>.<slot>, and its
 * tables' rows (nn_tabfile.h). */
static int write_state(const char *path, const ckpt_state *s) {
  nn_param_list pl = {0};
  nn_tabfile tf = {0};
  int rc = nn_torch_params(s->model, &pl);
  if (rc == 0) rc = nn_tabfile_entries(s->model, true, &tf);
  int ns = optim_nslots(optim_config(s->opt));
  size_t n = (size_t)(rc < 0 ? 0 : pl.n) * (size_t)ns;
  safetensors_entry *e = calloc(n + tf.n + 1, sizeof *e);
  char (*names)[160] = calloc(n + 1, sizeof *names);
  if (rc == 0 && (!e || !names)) rc = err_set(DRV_ENOMEM, "cannot write '%s': out of memory", path);
  for (int i = 0; rc == 0 && i < pl.n; i++)
    for (int k = 0; k < ns; k++) {
      size_t j = (size_t)i * (size_t)ns + (size_t)k;
      const tensor *v = pl.items[i].value;
      snprintf(names[j], sizeof names[j], "optim.%s.%d", pl.items[i].name, k);
      e[j] = (safetensors_entry){names[j], v->ndim, v->shape, optim_slot(s->opt, i, k), NULL};
      if (!e[j].data) rc = err_set(DRV_EINVAL, "cannot write '%s': the optimizer does not "
                                   "match the model's parameters", path);
    }
  meta *m = calloc(1, sizeof *m); /* 64 values of up to DESC_MAX: not the stack */
  if (rc == 0 && !m) rc = err_set(DRV_ENOMEM, "cannot write '%s': out of memory", path);
  if (rc == 0) {
    state_meta(s, m);
    if (tf.n) memcpy(e + n, tf.e, tf.n * sizeof *e);
    rc = safetensors_write(path, e, n + tf.n, m->kv);
  }
  free(m);
  free(names);
  free(e);
  nn_tabfile_free(&tf);
  nn_param_list_free(&pl);
  return rc;
}

/* A fresh (empty) step directory at path. */
static int make_step_dir(const char *dir, const char *path) {
  int rc = rundir_mkdirs(dir);
  if (rc < 0) return rc;
  remove_step(path); /* an uncommitted attempt of the same step */
  if (mkdir(path, 0755) != 0)
    return err_set(DRV_EIO, "cannot create '%s': %s", path, strerror(errno));
  return 0;
}

/* The model, the state and, last, the manifest that commits them, into
 * the existing directory `to`. */
static int write_files(const char *to, const ckpt_state *s, const char *const *meta) {
  char file[4200];
  int rc = nn_save(s->model, (snprintf(file, sizeof file, "%s/" CKPT_MODEL, to), file));
  if (rc == 0) rc = write_state((snprintf(file, sizeof file, "%s/" CKPT_STATE, to), file), s);
  static const char *const files[] = {CKPT_MODEL, CKPT_STATE, NULL};
  if (rc == 0) rc = manifest_commit(to, files, meta);
  return rc;
}

/* To HDFS: written to a local temporary directory, then uploaded with
 * its manifest last (ckfs_publish). */
static int write_remote(const char *step_dir, const ckpt_state *s, const char *const *metrics) {
  char tmp[4096];
  int rc = ckfs_tmpdir(tmp, sizeof tmp);
  if (rc < 0) return rc;
  static const char *const files[] = {CKPT_MODEL, CKPT_STATE, NULL};
  remove_step(step_dir); /* an uncommitted attempt of the same step */
  rc = write_files(tmp, s, metrics);
  if (rc == 0) rc = ckfs_publish(tmp, step_dir, files);
  ckfs_drop_copy(tmp);
  return rc;
}

int ckpt_write(const char *dir, const ckpt_state *s, const char *const *metrics, char *path,
               size_t n) {
  if (!dir || !s || !s->model || !s->opt) return err_set(DRV_EINVAL, "ckpt_write: NULL argument");
  char step_dir[4096];
  rundir_step(step_dir, sizeof step_dir, dir, s->pos.step);
  if (path) snprintf(path, n, "%s", step_dir);
  if (has_manifest(step_dir)) return 0;
  bool remote = ckfs_is_remote(dir);
  int rc = remote ? write_remote(step_dir, s, metrics) : make_step_dir(dir, step_dir);
  if (rc == 0 && !remote) rc = write_files(step_dir, s, metrics);
  if (rc < 0) {
    char why[2048];
    snprintf(why, sizeof why, "%s", err_msg()); /* the removal may set another */
    remove_step(step_dir);
    return err_set(rc, "%s", why);
  }
  if (!remote) util_sync_dir(dir); /* the step directory's own entry */
  return 0;
}

/* exp:save and load take a local directory: an HDFS URL would otherwise
 * be made as a local path named "hdfs:". */
static int refuse_remote(const char *dir) {
  return ckfs_is_remote(dir) ? err_set(DRV_EINVAL, "'%s': save and load take a local directory "
                                       "(copy it with `drover hdfs put`/`get`; checkpoints go to "
                                       "HDFS with checkpoint = { dir = ... })", dir) : 0;
}

int ckpt_save(const char *dir, const ckpt_state *s, const char *const *meta) {
  if (!dir || !s || !s->model || !s->opt) return err_set(DRV_EINVAL, "ckpt_save: NULL argument");
  if (refuse_remote(dir) < 0) return DRV_EINVAL;
  int rc = rundir_mkdirs(dir);
  if (rc < 0) return rc;
  char man[4200];
  snprintf(man, sizeof man, "%s/" MANIFEST_NAME, dir);
  /* An earlier save here stops being one before its files change. */
  if (unlink(man) != 0 && errno != ENOENT)
    return err_set(DRV_EIO, "cannot replace '%s': %s", man, strerror(errno));
  util_sync_dir(dir);
  return write_files(dir, s, meta);
}

int ckpt_open(const char *dir, manifest *m) {
  struct stat st;
  memset(m, 0, sizeof *m);
  if (refuse_remote(dir) < 0) return DRV_EINVAL;
  if (stat(dir, &st) != 0) return err_set(DRV_EIO, "'%s': %s", dir, strerror(errno));
  if (!S_ISDIR(st.st_mode)) return err_set(DRV_EIO, "'%s' is not a directory", dir);
  int rc = manifest_read(dir, m);
  if (rc < 0 && errno == ENOENT)
    return err_set(DRV_EIO, "'%s' has no %s: not a saved model state (a save or a checkpoint "
                   "that was not finished is not one)", dir, MANIFEST_NAME);
  if (rc == 0) rc = manifest_verify(dir, m);
  return rc;
}

/* ============================== restoring ================================ */

static int meta_i64(const safetensors_file *f, const char *key, int64_t *out) {
  const char *v = safetensors_meta(f, key);
  char *end;
  if (!v) return -1;
  errno = 0;
  long long x = strtoll(v, &end, 10);
  if (*end || errno) return -1;
  *out = (int64_t)x;
  return 0;
}

static int meta_f64(const safetensors_file *f, const char *key, double *out) {
  const char *v = safetensors_meta(f, key);
  char *end;
  if (!v) return -1;
  *out = strtod(v, &end);
  return *end ? -1 : 0;
}

static int meta_rng_get(const safetensors_file *f, const char *key, rng_t *r) {
  const char *v = safetensors_meta(f, key);
  if (!v || strlen(v) != 64) return -1;
  for (int i = 0; i < 4; i++) {
    char part[17];
    memcpy(part, v + 16 * i, 16);
    part[16] = '\0';
    char *end;
    r->s[i] = strtoull(part, &end, 16);
    if (*end) return -1;
  }
  return 0;
}

/* The position and counters from the metadata. */
static int read_position(const safetensors_file *f, ckpt_state *s, int64_t *opt_steps) {
  train_position *p = &s->pos;
  int64_t has_acc, seed;
  int bad = meta_i64(f, "step", &p->step) | meta_i64(f, "epoch", &p->epoch) |
            meta_i64(f, "data_pos", &p->data_pos) | meta_f64(f, "epoch_loss", &p->epoch_loss) |
            meta_i64(f, "epoch_seen", &p->epoch_seen) |
            meta_i64(f, "epoch_correct", &p->epoch_correct) |
            meta_i64(f, "epoch_has_acc", &has_acc) | meta_f64(f, "eval_loss", &p->eval_loss) |
            meta_f64(f, "eval_accuracy", &p->eval_accuracy) |
            meta_i64(f, "optim_steps", opt_steps) | meta_i64(f, "fit", &s->fit) |
            meta_i64(f, "seed", &seed);
  p->epoch_has_acc = has_acc != 0;
  if (meta_f64(f, "eval_auc", &p->eval_auc) < 0) p->eval_auc = NAN; /* older files */
  if (meta_f64(f, "eval_logloss", &p->eval_logloss) < 0) p->eval_logloss = NAN;
  s->seed = (uint64_t)seed;
  /* absent before any eval improved, and in older files: afresh */
  if (!train_stopper_parse(safetensors_meta(f, "train_stop"), &p->stop))
    p->stop = (train_stopper){0};
  return bad ? -1 : 0;
}

/* Checks the slots of `f` against the model and optimizer (the tables'
 * entries are nn_tabfile's to check). */
static int check_slots(const char *path, const safetensors_file *f, const nn_param_list *pl,
                       int ns, nn_module *model) {
  for (int i = 0; i < pl->n; i++)
    for (int k = 0; k < ns; k++) {
      char name[160];
      snprintf(name, sizeof name, "optim.%s.%d", pl->items[i].name, k);
      const safetensors_tensor *t = safetensors_find(f, name);
      if (!t || t->numel != tensor_numel(pl->items[i].value))
        return err_set(DRV_EINVAL, "cannot restore '%s': optimizer slot '%s' is %s", path,
                       name, t ? "of another size" : "missing");
    }
  size_t dense = 0;
  for (size_t j = 0; j < f->n; j++) dense += !nn_tabfile_owns(model, true, f->tensors[j].name);
  if ((size_t)pl->n * (size_t)ns != dense)
    return err_set(DRV_EINVAL, "cannot restore '%s': it has %zu optimizer slots, the optimizer "
                   "%d", path, dense, pl->n * ns);
  return nn_tabfile_check(model, true, f, path);
}

static void put_slots(const safetensors_file *f, const nn_param_list *pl, optim_t *o, int ns) {
  for (int i = 0; i < pl->n; i++)
    for (int k = 0; k < ns; k++) {
      char name[160];
      snprintf(name, sizeof name, "optim.%s.%d", pl->items[i].name, k);
      const safetensors_tensor *t = safetensors_find(f, name);
      if (t->numel) memcpy(optim_slot(o, i, k), t->data, (size_t)t->numel * sizeof(float));
    }
}

/* Everything of the state file that can be checked before a change. */
static int check_state(const char *path, const safetensors_file *f, ckpt_state *s,
                       const nn_param_list *pl, int64_t *opt_steps) {
  char desc[DESC_MAX];
  optim_describe(optim_config(s->opt), desc, sizeof desc);
  const char *fmt = safetensors_meta(f, "format"), *od = safetensors_meta(f, "optimizer");
  if (!fmt || strcmp(fmt, "drover-state-1") != 0 || read_position(f, s, opt_steps) < 0)
    return err_set(DRV_EPARSE, "cannot restore '%s': not a drover training state", path);
  if (!od || strcmp(od, desc) != 0)
    return err_set(DRV_EINVAL, "cannot restore '%s': it was written by %s, this optimizer is %s",
                   path, od ? od : "?", desc);
  return check_slots(path, f, pl, optim_nslots(optim_config(s->opt)), s->model);
}

/* A plateau schedule's state, when the file has it (older ones start the
 * schedule afresh). */
static void put_plateau(const safetensors_file *f, optim_t *o) {
  optim_plateau pl;
  if (optim_plateau_parse(safetensors_meta(f, "optim_plateau"), &pl)) optim_set_plateau(o, &pl);
}

static void put_rngs(const safetensors_file *f, ckpt_state *s) {
  if (s->rng) meta_rng_get(f, "rng", s->rng);
  nn_module *d[MAX_DROPOUT];
  int nd = dropouts(s->model, d, 0, MAX_DROPOUT);
  for (int i = 0; i < nd; i++) meta_rng_get(f, dropout_keys[i], &d[i]->rng);
}

static int restore_local(const char *path, ckpt_state *s) {
  if (!path || !s || !s->model || !s->opt) return err_set(DRV_EINVAL, "ckpt_restore: NULL argument");
  char file[4200];
  safetensors_file f;
  nn_param_list pl = {0};
  int64_t opt_steps = 0;
  ckpt_state was = *s;
  int rc = safetensors_read((snprintf(file, sizeof file, "%s/" CKPT_STATE, path), file), &f);
  if (rc == 0) rc = nn_torch_params(s->model, &pl);
  if (rc == 0) rc = check_state(file, &f, s, &pl, &opt_steps);
  if (rc == 0) rc = nn_load_params(s->model, (snprintf(file, sizeof file, "%s/" CKPT_MODEL, path), file));
  if (rc == 0)
    rc = nn_tabfile_load(s->model, true, &f, (snprintf(file, sizeof file, "%s/" CKPT_STATE, path), file));
  if (rc == 0) {
    put_slots(&f, &pl, s->opt, optim_nslots(optim_config(s->opt)));
    optim_set_steps(s->opt, opt_steps);
    put_plateau(&f, s->opt);
    put_rngs(&f, s);
  } else {
    s->pos = was.pos, s->fit = was.fit, s->seed = was.seed;
  }
  nn_param_list_free(&pl);
  safetensors_free(&f);
  return rc;
}

int ckpt_restore(const char *path, ckpt_state *s) {
  if (!path || !s || !s->model || !s->opt) return err_set(DRV_EINVAL, "ckpt_restore: NULL argument");
  char local[4096];
  int copied;
  int rc = ckfs_fetch(path, local, sizeof local, &copied);
  if (rc == 0) rc = restore_local(local, s);
  if (copied) ckfs_drop_copy(local);
  return rc;
}

/* ============================== choosing ================================= */

int ckpt_newest(const char *dir, ckpt_entry *found, void (*bad)(void *ud, const char *msg),
                void *ud) {
  ckpt_entry *all;
  int n = ckpt_list(dir, &all);
  if (n < 0) return n;
  int got = 0;
  for (int i = n - 1; i >= 0 && !got; i--) {
    manifest m;
    int rc = ckfs_manifest_read(all[i].path, &m);
    if (rc == 0) rc = ckfs_manifest_verify(all[i].path, &m);
    manifest_free(&m);
    if (rc == 0) {
      *found = all[i];
      got = 1;
    } else if (bad) {
      char msg[2400];
      const char *name = strrchr(all[i].path, '/') ? strrchr(all[i].path, '/') + 1 : all[i].path;
      snprintf(msg, sizeof msg, "checkpoint %.40s is damaged, using an older one: %.2300s", name,
               err_msg());
      bad(ud, msg);
    }
  }
  free(all);
  return got;
}

/* The value of `metric` in a checkpoint's manifest, NAN without one. */
static double manifest_value(const char *path, const char *metric) {
  manifest m;
  double v = NAN;
  if (ckfs_manifest_read(path, &m) == 0 && manifest_meta(&m, metric)) {
    char *end;
    v = strtod(manifest_meta(&m, metric), &end);
    if (*end) v = NAN;
  }
  manifest_free(&m);
  return v;
}

/* Index of the best checkpoint by metric, or -1. */
static int best_of(const ckpt_entry *c, int n, const char *metric, bool max) {
  int best = -1;
  double bv = 0;
  for (int i = 0; metric && i < n; i++) {
    if (!has_manifest(c[i].path)) continue;
    double v = manifest_value(c[i].path, metric);
    if (isnan(v)) continue;
    if (best < 0 || (max ? v > bv : v < bv)) best = i, bv = v;
  }
  return best;
}

int ckpt_prune(const char *dir, int keep, const char *metric, bool max) {
  ckpt_entry *all;
  int n = list_steps(dir, &all, true);
  if (n <= 0) return n;
  int best = best_of(all, n, metric, max), removed = 0, kept = 0;
  for (int i = n - 1; i >= 0; i--) {
    bool committed = has_manifest(all[i].path);
    bool keep_it = committed && (keep <= 0 || kept < keep);
    if (keep_it) kept++;
    if (keep_it || i == best) continue;
    remove_step(all[i].path);
    removed++;
  }
  free(all);
  if (removed && !ckfs_is_remote(dir)) util_sync_dir(dir);
  return removed;
}
