/* test_runview.c - the dashboard model: series decimation keeps the
 * first and newest points in order, lookups, first-seen order of tags,
 * the events ring, node resizing, version bumps; and the simulated run
 * behind `drover _dash-sim` (its scripted lost worker, falling loss). */
#include "proto/runview.h"
#include "ui/dash_sim.h"
#include "harness.h"

TEST(runview_series_grows_then_decimates_in_order) {
  runview m;
  runview_init(&m);
  for (int i = 0; i < RUNVIEW_SERIES_MAX; i++)
    CHECK_OK(runview_add_point(&m, "loss", (runview_point){i, i, 100 - i}));
  const runview_series *s = runview_find_series(&m, "loss");
  CHECK(s);
  CHECK_INT_EQ(s->n, RUNVIEW_SERIES_MAX);
  /* one more: every second point goes, the first and the newest stay */
  CHECK_OK(runview_add_point(&m, "loss", (runview_point){RUNVIEW_SERIES_MAX, 0, 0}));
  CHECK_INT_EQ(s->n, RUNVIEW_SERIES_MAX / 2 + 2);
  CHECK(runview_series_at(s, 0)->step == 0);
  CHECK(runview_series_at(s, 1)->step == 1);
  CHECK(runview_series_at(s, 2)->step == 3);
  CHECK(runview_series_at(s, s->n - 2)->step == RUNVIEW_SERIES_MAX - 1);
  CHECK(runview_series_at(s, s->n - 1)->step == RUNVIEW_SERIES_MAX);
  CHECK(runview_series_at(s, 2)->value == 97); /* points move whole */
  runview_free(&m);
}

TEST(runview_long_series_keeps_its_whole_history) {
  runview m;
  runview_init(&m);
  const int total = 5 * RUNVIEW_SERIES_MAX + 123;
  for (int i = 0; i < total; i++) CHECK_OK(runview_add_point(&m, "x", (runview_point){i, 0, i}));
  const runview_series *s = runview_find_series(&m, "x");
  CHECK(s->n <= RUNVIEW_SERIES_MAX && s->n > RUNVIEW_SERIES_MAX / 4);
  CHECK(runview_series_at(s, 0)->step == 0);
  CHECK(runview_series_at(s, s->n - 1)->step == total - 1);
  for (int i = 1; i < s->n; i++) CHECK(runview_series_at(s, i)->step > runview_series_at(s, i - 1)->step);
  runview_free(&m);
}

TEST(runview_tags_in_first_seen_order_and_throughput) {
  runview m;
  runview_init(&m);
  uint64_t v0 = m.version;
  CHECK_OK(runview_add_point(&m, "train/loss", (runview_point){0, 0, 1}));
  CHECK_OK(runview_add_point(&m, "eval/loss", (runview_point){0, 0, 2}));
  CHECK_OK(runview_add_point(&m, "train/loss", (runview_point){1, 1, 3}));
  CHECK_OK(runview_add_point(&m, "examples/s", (runview_point){1, 1, 500}));
  CHECK(m.version == v0 + 4);
  CHECK_INT_EQ(m.nmetrics, 2);
  CHECK(strcmp(m.metrics[0].tag, "train/loss") == 0);
  CHECK(strcmp(m.metrics[1].tag, "eval/loss") == 0);
  CHECK_INT_EQ(m.metrics[0].n, 2);
  CHECK(runview_find_series(&m, "examples/s") == &m.throughput);
  CHECK_INT_EQ(m.throughput.n, 1);
  CHECK(runview_find_series(&m, "nope") == NULL);
  runview_free(&m);
  runview_free(NULL);
}

TEST(runview_events_ring_drops_the_oldest) {
  runview m;
  runview_init(&m);
  for (int i = 0; i < RUNVIEW_EVENTS_MAX + 44; i++) {
    char t[32];
    snprintf(t, sizeof t, "event %d", i);
    CHECK_OK(runview_add_event(&m, i, t));
  }
  CHECK_INT_EQ(m.nevents, RUNVIEW_EVENTS_MAX);
  CHECK(strcmp(runview_event_at(&m, 0)->text, "event 44") == 0);
  CHECK(runview_event_at(&m, 0)->wall == 44);
  char last[32];
  snprintf(last, sizeof last, "event %d", RUNVIEW_EVENTS_MAX + 43);
  CHECK(strcmp(runview_event_at(&m, m.nevents - 1)->text, last) == 0);
  /* a long text is cut, not overflowed */
  char big[400];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  CHECK_OK(runview_add_event(&m, 0, big));
  CHECK_INT_EQ(strlen(runview_event_at(&m, m.nevents - 1)->text), sizeof m.events[0].text - 1);
  runview_free(&m);
}

TEST(runview_set_nnodes_keeps_and_zeroes) {
  runview m;
  runview_init(&m);
  CHECK_OK(runview_set_nnodes(&m, 3));
  snprintf(m.nodes[2].name, sizeof m.nodes[2].name, "worker:1");
  m.nodes[2].steps = 42;
  CHECK_OK(runview_set_nnodes(&m, 100));
  CHECK(strcmp(m.nodes[2].name, "worker:1") == 0 && m.nodes[2].steps == 42);
  CHECK(m.nodes[99].steps == 0 && m.nodes[99].name[0] == '\0');
  CHECK_OK(runview_set_nnodes(&m, 1));
  CHECK_INT_EQ(m.nnodes, 1);
  CHECK_ERR(runview_set_nnodes(&m, -1), DRV_EINVAL, "negative");
  runview_free(&m);
}

/* ============================== the simulation =========================== */

static bool has_event(const runview *m, const char *needle) {
  for (int i = 0; i < m->nevents; i++)
    if (strstr(runview_event_at(m, i)->text, needle)) return true;
  return false;
}

static double mean(const runview_series *s, int from, int n) {
  double t = 0;
  for (int i = from; i < from + n; i++) t += runview_series_at(s, i)->value;
  return t / n;
}

TEST(dash_sim_loses_worker_1_and_brings_it_back) {
  dash_sim *s;
  dash_sim_opts o = {.nodes = 8, .seed = 1};
  CHECK_OK(dash_sim_new(&o, &s));
  const runview *m = dash_sim_advance(s, 3);
  CHECK_INT_EQ(m->nnodes, 8);
  CHECK(strcmp(m->nodes[0].name, "ps:0") == 0); /* ps first */
  CHECK(strcmp(runview_find_node(m, "worker:1")->state, "busy") == 0);
  m = dash_sim_advance(s, 6.5);
  CHECK(strcmp(runview_find_node(m, "worker:1")->state, "lost") == 0);
  CHECK(has_event(m, "node lost worker:1"));
  m = dash_sim_advance(s, 12);
  CHECK(strcmp(runview_find_node(m, "worker:1")->state, "busy") == 0);
  CHECK_INT_EQ(runview_find_node(m, "worker:1")->restarts, 1);
  CHECK(has_event(m, "node restarting worker:1"));
  CHECK(has_event(m, "node back worker:1"));
  CHECK(m->step > 0 && m->retried >= 1);
  /* the source: kill from the dashboard, a read-only source has none */
  dash_source src = dash_sim_source(s);
  char out[128];
  CHECK_OK(src.kill_node(src.ud, "worker:2", out, sizeof out));
  CHECK(strcmp(runview_find_node(m, "worker:2")->state, "lost") == 0);
  CHECK(src.kill_node(src.ud, "worker:2", out, sizeof out) < 0);
  CHECK_STR_CONTAINS(out, "already lost");
  CHECK(src.kill_node(src.ud, "worker:99", out, sizeof out) < 0);
  dash_sim_free(s);
  o.read_only = true;
  CHECK_OK(dash_sim_new(&o, &s));
  src = dash_sim_source(s);
  CHECK(src.command == NULL && src.kill_node == NULL && src.get != NULL);
  dash_sim_free(s);
}

TEST(dash_sim_loss_falls_and_accuracy_rises) {
  dash_sim *s;
  dash_sim_opts o = {.nodes = 16, .seed = 7};
  CHECK_OK(dash_sim_new(&o, &s));
  const runview *m = dash_sim_advance(s, 400);
  const runview_series *loss = runview_find_series(m, "train/loss"),
                    *acc = runview_find_series(m, "train/accuracy"),
                    *ev = runview_find_series(m, "eval/loss");
  CHECK(loss && acc && ev);
  CHECK(loss->n > 200);
  CHECK(mean(loss, loss->n - 50, 50) < 0.5 * mean(loss, 0, 50));
  CHECK(mean(acc, acc->n - 50, 50) > mean(acc, 0, 50) + 0.3);
  CHECK(ev->n >= 20); /* every 15 s */
  CHECK(m->throughput.n > 500);
  dash_sim_free(s);
  dash_sim *none = NULL;
  CHECK_ERR(dash_sim_new(&(dash_sim_opts){.nodes = 0}, &none), DRV_EINVAL, "1 to 100000");
  CHECK(none == NULL);
}

TEST(runview_copy_is_deep) {
  dash_sim *s;
  dash_sim_opts o = {.nodes = 4, .seed = 3};
  CHECK_OK(dash_sim_new(&o, &s));
  const runview *m = dash_sim_advance(s, 100);
  runview c;
  runview_init(&c);
  CHECK_OK(runview_copy(&c, m));
  CHECK_INT_EQ(c.nnodes, m->nnodes);
  CHECK_INT_EQ(c.nmetrics, m->nmetrics);
  CHECK_INT_EQ(c.nevents, m->nevents);
  CHECK(c.nodes != m->nodes && strcmp(c.nodes[1].name, m->nodes[1].name) == 0);
  const runview_series *a = runview_find_series(m, "train/loss"), *b = runview_find_series(&c, "train/loss");
  CHECK(a && b && a != b && a->n == b->n);
  CHECK(runview_series_at(a, a->n - 1)->value == runview_series_at(b, b->n - 1)->value);
  int n = b->n;
  dash_sim_advance(s, 10); /* the original moves on, the copy does not */
  CHECK_INT_EQ(b->n, n);
  CHECK_OK(runview_add_point(&c, "extra", (runview_point){1, 1, 1})); /* and grows on its own */
  CHECK(runview_find_series(&c, "extra") && !runview_find_series(dash_sim_advance(s, 0), "extra"));
  dash_sim_free(s);
  runview_free(&c);
}

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "ui/dash_records.h"

static void put_file(const char *dir, const char *name, const char *text) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  if (f) {
    fputs(text, f);
    fclose(f);
  }
}

static void fake_run(const char *dir, double loss0) {
  char line[256], all[4096] = "";
  put_file(dir, "events.log",
           "2026-11-24T10:00:00.000Z cluster ready: 2 nodes\n"
           "2026-11-24T10:00:00.500Z fit: 4 steps on 1 workers, 2 variables over 1 ps\n"
           "2026-11-24T10:00:02.000Z shutdown complete: 0 node failures\n");
  put_file(dir, "nodes.tsv",
           "node\tpid\thost\taddress\tcpus_asked\tthreads\tcpus\tmemory_asked\tmemory\tgpus_asked\t"
           "gpus\tslurm_job\tslurm_step\tslurm_node\trestarts\n"
           "ps:0\t11\tvm\t127.0.0.1\t0\t2\t2\t0\t0\t0\t-\t-\t-\t-\t0\n"
           "worker:0\t12\tvm\t127.0.0.1\t0\t2\t2\t0\t0\t0\t-\t-\t-\t-\t1\n");
  for (int i = 1; i <= 4; i++) {
    snprintf(line, sizeof line,
             "{\"time\":%g,\"step\":%d,\"node\":\"worker:0\",\"loss\":%g,\"examples\":32}\n",
             0.6 * i, i, loss0 / i);
    strcat(all, line);
  }
  strcat(all, "not json\n{\"time\":2.5,\"step\":4,\"eval_loss\":0.5,\"eval_accuracy\":null}\n");
  put_file(dir, "metrics.jsonl", all);
}

TEST(dash_records_rebuild_a_finished_run_and_overlay_another) {
  char a[] = "/tmp/drover-records-a-XXXXXX", b[] = "/tmp/drover-records-b-XXXXXX";
  CHECK(mkdtemp(a) && mkdtemp(b));
  fake_run(a, 2.0);
  fake_run(b, 4.0);
  runview m, n;
  runview_init(&m);
  runview_init(&n);
  CHECK_OK(dash_records_load(a, "done", "2026-11-24T10:00:02.000Z", &m));
  CHECK_INT_EQ(m.nnodes, 2);
  CHECK(strcmp(m.nodes[1].name, "worker:0") == 0 && m.nodes[1].steps == 4 && m.nodes[1].restarts == 1);
  CHECK(strcmp(m.nodes[1].state, "done") == 0);
  CHECK_STR_CONTAINS(m.nodes[1].log, "/logs/worker-0.log");
  const runview_series *loss = runview_find_series(&m, "train/loss");
  CHECK(loss && loss->n == 4 && runview_series_at(loss, 3)->value == 0.5);
  CHECK(runview_find_series(&m, "eval/loss") && !runview_find_series(&m, "eval/accuracy"));
  CHECK(m.throughput.n >= 1);
  CHECK_INT_EQ(m.step, 4);
  CHECK_INT_EQ(m.nevents, 3);
  CHECK(m.uptime == 2.0);
  CHECK_STR_CONTAINS(m.banner, "finished at 2026-11-24");
  CHECK_STR_CONTAINS(m.banner, "(exit 0)");
  CHECK_OK(dash_records_load(b, "failed", "2026-11-24T10:00:02.000Z", &n));
  CHECK_STR_CONTAINS(n.banner, "(exit 1)");
  put_file(b, "events.log", "2026-11-24T10:00:00.000Z process exit: 130\n");
  CHECK_OK(dash_records_load(b, "interrupted", "2026-11-24T10:00:00.000Z", &n));
  CHECK_STR_CONTAINS(n.banner, "(exit 130)");
  fake_run(b, 4.0);
  CHECK_OK(dash_records_load(b, "failed", "2026-11-24T10:00:02.000Z", &n));
  CHECK_OK(dash_records_overlay(&m, &n));
  const runview_series *over = runview_overlay(&m, "train/loss");
  CHECK(over && over->n == 4 && runview_series_at(over, 0)->value == 4.0);
  CHECK(n.nmetrics == 0);
  runview_free(&m);
  runview_free(&n);
  CHECK_ERR(dash_records_load("/nonexistent/run", "done", "", &m), DRV_EIO, "/nonexistent/run");
  runview_free(&m);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", a, b);
  CHECK(system(cmd) == 0);
}
