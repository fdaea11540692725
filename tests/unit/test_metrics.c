/* test_metrics.c - metrics.jsonl: the members of a train step's and an
 * evaluation's line as each writer fills them, null for what JSON cannot
 * hold, a file that cannot be opened counted as lost, the readers' rule
 * for which members are series and their tags, and both readers (the
 * dashboard on a finished run, export-metrics) taking the same series from
 * one file. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/rundir.h"
#include "harness.h"
#include "proto/runview.h"
#include "run/metrics.h"
#include "train/bineval.h"
#include "ui/dash_records.h"
#include "ui/export_metrics.h"

/* The file's lines, parsed; *n of them. The caller json_decref's each. */
static json_t **read_lines(const rundir *rd, int *n) {
  char path[1200], buf[4096];
  FILE *f = fopen(rundir_file(rd, RUNDIR_METRICS, path, sizeof path), "r");
  if (!f) harness_fail(__FILE__, __LINE__, "cannot open %s", path);
  static json_t *lines[16];
  *n = 0;
  while (*n < 16 && fgets(buf, sizeof buf, f)) {
    size_t len = strlen(buf);
    if (len == 0 || buf[len - 1] != '\n') harness_fail(__FILE__, __LINE__, "a line not whole");
    json_error_t e;
    lines[*n] = json_loads(buf, 0, &e);
    if (!json_is_object(lines[*n])) harness_fail(__FILE__, __LINE__, "not JSON: %s", buf);
    (*n)++;
  }
  fclose(f);
  return lines;
}

/* The line's member names, comma-separated in order, into buf. */
static const char *keys_of(json_t *o, char *buf, size_t n) {
  const char *k;
  json_t *v;
  buf[0] = '\0';
  json_object_foreach(o, k, v) {
    if (buf[0]) strncat(buf, ",", n - strlen(buf) - 1);
    strncat(buf, k, n - strlen(buf) - 1);
  }
  return buf;
}

static double num(json_t *o, const char *key) { return json_number_value(json_object_get(o, key)); }

TEST(metrics_lines_of_both_writers) {
  rundir rd;
  CHECK_OK(rundir_create("runs", "m", &rd));
  metrics m;
  metrics_open(&m, &rd);
  /* A cluster's step: the node and the batch, the rate from a schedule. */
  metrics_step_line(&m, &(metrics_step){.time = 1.23456, .step = 7, .epoch = 2, .node = "worker:1",
                                        .loss = 0.5, .accuracy = 0.75, .examples = 32,
                                        .lr = 0.01, .grad_norm = NAN});
  /* In process: no node or batch; a regression's accuracy; the norm. */
  metrics_step_line(&m, &(metrics_step){.time = 0.0004, .step = 1, .epoch = 1, .loss = 2.5,
                                        .accuracy = NAN, .examples = -1, .lr = NAN,
                                        .grad_norm = 3.0});
  metrics_eval_line(&m, 2.0, 7, &(train_eval){0.25, NAN, 0.5, 0.1}, 0);
  /* eval.metrics asked: an AUC of one class's set is null, not absent. */
  metrics_eval_line(&m, 2.5, 7, &(train_eval){0.25, 0.5, NAN, 0.125}, BINEVAL_ALL);
  metrics_step_line(&m, &(metrics_step){.time = 3, .step = 8, .epoch = 2, .loss = INFINITY,
                                        .accuracy = NAN, .examples = -1, .lr = NAN,
                                        .grad_norm = NAN});
  metrics_close(&m);
  int n;
  json_t **l = read_lines(&rd, &n);
  CHECK_INT_EQ(n, 5);
  char k[256];
  CHECK(strcmp(keys_of(l[0], k, sizeof k), "time,step,epoch,node,loss,accuracy,examples,lr") == 0);
  CHECK(num(l[0], "time") == 1.235); /* to the millisecond */
  CHECK_INT_EQ(json_integer_value(json_object_get(l[0], "step")), 7);
  CHECK(strcmp(json_string_value(json_object_get(l[0], "node")), "worker:1") == 0);
  CHECK_INT_EQ(json_integer_value(json_object_get(l[0], "examples")), 32);
  CHECK(num(l[0], "loss") == 0.5 && num(l[0], "accuracy") == 0.75 && num(l[0], "lr") == 0.01);
  CHECK(strcmp(keys_of(l[1], k, sizeof k), "time,step,epoch,loss,accuracy,grad_norm") == 0);
  CHECK(json_is_null(json_object_get(l[1], "accuracy")) && num(l[1], "grad_norm") == 3.0);
  CHECK(num(l[1], "time") == 0.0);
  CHECK(strcmp(keys_of(l[2], k, sizeof k), "time,step,eval_loss,eval_accuracy") == 0);
  CHECK(num(l[2], "eval_loss") == 0.25 && json_is_null(json_object_get(l[2], "eval_accuracy")));
  CHECK(strcmp(keys_of(l[3], k, sizeof k),
               "time,step,eval_loss,eval_accuracy,eval_auc,eval_logloss") == 0);
  CHECK(json_is_null(json_object_get(l[3], "eval_auc")) && num(l[3], "eval_logloss") == 0.125);
  CHECK(json_is_null(json_object_get(l[4], "loss"))); /* a diverged loss: null, no bare inf */
  for (int i = 0; i < n; i++) json_decref(l[i]);
  rundir_close(&rd);
}

TEST(metrics_unopenable_file_is_a_lost_record) {
  rundir rd;
  CHECK_OK(rundir_create("runs", "m", &rd));
  char path[1200];
  CHECK(mkdir(rundir_file(&rd, RUNDIR_METRICS, path, sizeof path), 0755) == 0); /* in the way */
  int64_t lost = rundir_records_lost();
  metrics m;
  metrics_open(&m, &rd);
  CHECK(m.f == NULL);
  CHECK_INT_EQ(rundir_records_lost(), lost + 1);
  metrics_step_line(&m, &(metrics_step){.step = 1, .loss = 1, .examples = -1, .lr = NAN});
  metrics_eval_line(&m, 1, 1, &(train_eval){1, 1, 1, 1}, BINEVAL_ALL);
  metrics_flush(&m);
  metrics_close(&m);
  CHECK_INT_EQ(rundir_records_lost(), lost + 1); /* dropped, not counted again */
  rundir_close(&rd);
}

TEST(metrics_series_rule_and_tags) {
  json_t *n = json_real(0.5), *i = json_integer(3), *null = json_null(), *s = json_string("x");
  json_t *t = json_true();
  double x = 0;
  const char *places[] = {"time", "step", "epoch", "node", "examples"};
  for (size_t k = 0; k < sizeof places / sizeof *places; k++)
    CHECK(!metrics_series(places[k], n, &x) && !metrics_series(places[k], i, &x));
  CHECK(metrics_series("loss", n, &x) && x == 0.5);
  CHECK(metrics_series("accuracy", i, &x) && x == 3);
  CHECK(metrics_series("eval_accuracy", null, &x) && isnan(x));
  CHECK(metrics_series("my_metric", n, &x) && x == 0.5); /* a new member is a series */
  CHECK(!metrics_series("loss", s, &x) && !metrics_series("loss", t, &x));
  CHECK(strcmp(metrics_tag("loss"), "train/loss") == 0);
  CHECK(strcmp(metrics_tag("accuracy"), "train/accuracy") == 0);
  CHECK(strcmp(metrics_tag("lr"), "train/learning_rate") == 0);
  CHECK(strcmp(metrics_tag("grad_norm"), "train/grad_norm") == 0);
  CHECK(strcmp(metrics_tag("eval_loss"), "eval/loss") == 0);
  CHECK(strcmp(metrics_tag("eval_accuracy"), "eval/accuracy") == 0);
  CHECK(strcmp(metrics_tag("eval_auc"), "eval/auc") == 0);
  CHECK(strcmp(metrics_tag("eval_logloss"), "eval/logloss") == 0);
  CHECK(strcmp(metrics_tag("my_metric"), "my_metric") == 0);
  json_decref(n), json_decref(i), json_decref(s);
}

/* Series points on the dashboard's rebuilt view, over every series. */
static int points(const runview *m) {
  int n = 0;
  for (int i = 0; i < m->nmetrics; i++) n += m->metrics[i].n;
  return n;
}

TEST(metrics_readers_take_the_same_series) {
  rundir rd;
  CHECK_OK(rundir_create("runs", "m", &rd));
  rundir_event(&rd, "fit: 2 steps on 1 workers, 1 variables over 1 ps");
  metrics m;
  metrics_open(&m, &rd);
  metrics_step_line(&m, &(metrics_step){.time = 0.1, .step = 1, .epoch = 1, .node = "worker:0",
                                        .loss = 1, .accuracy = 0.5, .examples = 8, .lr = 0.1,
                                        .grad_norm = NAN});
  metrics_step_line(&m, &(metrics_step){.time = 0.2, .step = 2, .epoch = 1, .loss = 0.9,
                                        .accuracy = NAN, .examples = -1, .lr = NAN,
                                        .grad_norm = 2});
  metrics_eval_line(&m, 0.3, 2, &(train_eval){0.8, 0.6, NAN, NAN}, 0);
  metrics_close(&m);
  /* A line of an older version: a member this one does not write. */
  FILE *f = fopen(rundir_file(&rd, RUNDIR_METRICS, (char[1200]){0}, 1200), "a");
  CHECK(f != NULL);
  fputs("{\"time\":0.000412345,\"step\":3,\"loss\":0.7,\"my_metric\":4}\n", f);
  fclose(f);
  char *csv = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&csv, &len);
  long values = export_metrics(rd.path, EXPORT_CSV, out);
  fclose(out);
  /* loss, accuracy, lr; loss, accuracy (null), grad_norm; eval_loss,
   * eval_accuracy; loss, my_metric */
  CHECK_INT_EQ(values, 10);
  CHECK_STR_CONTAINS(csv, ",accuracy,2,nan,\n");
  CHECK_STR_CONTAINS(csv, ",my_metric,3,4,\n");
  CHECK_STR_CONTAINS(csv, ",lr,1,0.1,worker:0\n");
  free(csv);
  runview v;
  runview_init(&v);
  CHECK_OK(dash_records_load(rd.path, "done", "", &v));
  CHECK_INT_EQ(points(&v), values - 1); /* the null accuracy is no point */
  const char *tags[] = {"train/loss", "train/accuracy", "train/learning_rate", "train/grad_norm",
                        "eval/loss", "eval/accuracy", "my_metric"};
  for (size_t i = 0; i < sizeof tags / sizeof *tags; i++) CHECK(runview_find_series(&v, tags[i]));
  CHECK_INT_EQ(runview_find_series(&v, "train/loss")->n, 3);
  runview_free(&v);
  rundir_close(&rd);
}
