/* test_dash_ui.c - the dashboard's keys and panels without a terminal:
 * keys drive the view state (filter, sort, smoothing bounds, panels,
 * detail, kill with confirmation, ':' commands, read-only sources), and
 * frames drawn on an ncurses screen writing to /dev/null are read back
 * cell by cell (layouts at 80x24 and 120x40, "terminal too small", help,
 * the detail view's log tail, a filtered table). */
#include <curses.h>
#include <stdlib.h>

#include "ui/dash_int.h"
#include "harness.h"
#include "base/rundir.h"

#define ESC 27

/* ============================== fixtures ================================= */

static void model_with_nodes(runview *m) {
  static const char *const names[] = {"ps:0", "chief:0", "worker:0", "worker:1", "worker:2", "evaluator:0"};
  static const char *const states[] = {"ready", "busy", "busy", "lost", "restarting", "done"};
  runview_init(m);
  CHECK_OK(runview_set_nnodes(m, 6));
  for (int i = 0; i < 6; i++) {
    runview_node *n = &m->nodes[i];
    snprintf(n->name, sizeof n->name, "%s", names[i]);
    snprintf(n->state, sizeof n->state, "%s", states[i]);
    snprintf(n->host, sizeof n->host, "host%d", i);
    n->steps = 100 * i;
    n->examples_per_sec = 10.0 * (6 - i);
    n->cpu_pct = -1;
    n->heartbeat_age = i;
    n->backlog = -1;
  }
  snprintf(m->run, sizeof m->run, "exp-7");
  snprintf(m->state, sizeof m->state, "training");
  m->step = 1234;
  m->total_steps = 5000;
  for (int i = 0; i < 50; i++) {
    runview_add_point(m, "train/loss", (runview_point){i, i, 2.0 / (1 + i)});
    runview_add_point(m, "examples/s", (runview_point){i, i, 500 + i});
  }
  runview_add_event(m, 3, "node lost worker:1: killed by signal 9");
}

static struct {
  int kills, commands;
  char last[256];
} calls;

static const runview *fake_get(void *ud) { return ud; }

/* A local source's log tail: the file the model names. */
static int fake_log_tail(void *ud, const char *name, char *out, size_t n) {
  const runview *m = ud;
  const char *path = NULL;
  for (int i = 0; i < m->nnodes; i++)
    if (strcmp(m->nodes[i].name, name) == 0) path = m->nodes[i].log;
  rundir_log_tail(path, DASH_LOG_LINES, out, n);
  return 0;
}
static int fake_kill(void *ud, const char *name, char *out, size_t n) {
  (void)ud;
  calls.kills++;
  snprintf(calls.last, sizeof calls.last, "%s", name);
  snprintf(out, n, "signalled");
  return 0;
}
static int fake_command(void *ud, const char *line, char *out, size_t n) {
  (void)ud;
  calls.commands++;
  snprintf(calls.last, sizeof calls.last, "%s", line);
  snprintf(out, n, "reply to %s", line);
  return 0;
}

static int fake_scale(void *ud, const char *text, char *out, size_t n) {
  (void)ud;
  calls.commands++;
  snprintf(calls.last, sizeof calls.last, "%s", text);
  snprintf(out, n, "scaling: %s", text);
  return 0;
}

static void keys(dash_ui *ui, const runview *m, const char *s) {
  for (; *s; s++) {
    dash_view_rows(ui, m);
    dash_input_key(ui, m, (unsigned char)*s);
  }
  dash_view_rows(ui, m);
}

static int key(dash_ui *ui, const runview *m, int k) {
  dash_view_rows(ui, m);
  int r = dash_input_key(ui, m, k);
  dash_view_rows(ui, m);
  return r;
}

/* ============================== keys ===================================== */

TEST(dash_keys_smoothing_stays_within_bounds) {
  runview m;
  model_with_nodes(&m);
  dash_ui ui;
  dash_ui_init(&ui, (dash_source){.get = fake_get, .ud = &m});
  CHECK_NEAR(ui.smoothing, 0.6, 1e-12);
  key(&ui, &m, '+');
  CHECK_NEAR(ui.smoothing, 0.65, 1e-12);
  for (int i = 0; i < 20; i++) key(&ui, &m, '+');
  CHECK_NEAR(ui.smoothing, 0.99, 1e-12);
  key(&ui, &m, '-');
  CHECK_NEAR(ui.smoothing, 0.94, 1e-12);
  for (int i = 0; i < 40; i++) key(&ui, &m, '-');
  CHECK_NEAR(ui.smoothing, 0, 1e-12);
  key(&ui, &m, 'l');
  CHECK(ui.logy);
  key(&ui, &m, 'x');
  CHECK(ui.wall_x);
  dash_ui_free(&ui);
  runview_free(&m);
}

TEST(dash_keys_filter_sort_and_selection) {
  runview m;
  model_with_nodes(&m);
  dash_ui ui;
  dash_ui_init(&ui, (dash_source){.get = fake_get, .ud = &m});
  dash_view_rows(&ui, &m);
  CHECK_INT_EQ(ui.nrows, 6);
  keys(&ui, &m, "/worker");
  CHECK_INT_EQ(ui.mode, DASH_MODE_FILTER);
  CHECK_INT_EQ(ui.nrows, 3); /* the table follows the typing */
  keys(&ui, &m, ":1\r");
  CHECK_INT_EQ(ui.mode, DASH_MODE_NORMAL);
  CHECK(strcmp(ui.filter, "worker:1") == 0);
  CHECK_INT_EQ(ui.nrows, 1);
  CHECK(strcmp(m.nodes[ui.rows[0]].name, "worker:1") == 0);
  /* Esc while editing brings the previous filter back */
  keys(&ui, &m, "/xyz");
  CHECK_INT_EQ(ui.nrows, 0);
  key(&ui, &m, ESC);
  CHECK(strcmp(ui.filter, "worker:1") == 0);
  /* Esc in the table clears it; a state filters too */
  key(&ui, &m, ESC);
  CHECK_INT_EQ(ui.nrows, 6);
  keys(&ui, &m, "/busy\r");
  CHECK_INT_EQ(ui.nrows, 2);
  key(&ui, &m, KEY_DOWN);
  key(&ui, &m, ESC);
  CHECK(strcmp(m.nodes[ui.rows[ui.sel]].name, "worker:0") == 0); /* still selected */
  /* sorting by state puts the trouble first; the selection follows its node */
  key(&ui, &m, KEY_HOME);
  key(&ui, &m, KEY_DOWN);
  key(&ui, &m, KEY_DOWN);
  CHECK(strcmp(ui.sel_name, "worker:0") == 0);
  key(&ui, &m, 's'); /* name */
  key(&ui, &m, 's'); /* state */
  CHECK_INT_EQ(ui.sort, DASH_SORT_STATE);
  CHECK(strcmp(m.nodes[ui.rows[0]].name, "worker:1") == 0);   /* lost */
  CHECK(strcmp(m.nodes[ui.rows[1]].name, "worker:2") == 0);   /* restarting */
  CHECK(strcmp(m.nodes[ui.rows[ui.sel]].name, "worker:0") == 0);
  for (int i = 0; i < DASH_NSORTS - 2; i++) key(&ui, &m, 's');
  CHECK_INT_EQ(ui.sort, DASH_SORT_NONE);
  key(&ui, &m, KEY_END);
  CHECK_INT_EQ(ui.sel, 5);
  key(&ui, &m, KEY_DOWN);
  CHECK_INT_EQ(ui.sel, 5);
  key(&ui, &m, KEY_HOME);
  CHECK_INT_EQ(ui.sel, 0);
  dash_ui_free(&ui);
  runview_free(&m);
}

TEST(dash_keys_kill_asks_first_and_commands_reply) {
  runview m;
  model_with_nodes(&m);
  dash_ui ui;
  dash_ui_init(&ui, (dash_source){
                        .get = fake_get, .command = fake_command, .kill_node = fake_kill, .ud = &m});
  memset(&calls, 0, sizeof calls);
  key(&ui, &m, KEY_DOWN);
  key(&ui, &m, KEY_DOWN);
  key(&ui, &m, 'k');
  CHECK_INT_EQ(ui.mode, DASH_MODE_CONFIRM);
  key(&ui, &m, 'n');
  CHECK_INT_EQ(calls.kills, 0);
  CHECK_STR_CONTAINS(ui.status, "not stopped");
  key(&ui, &m, 'k');
  key(&ui, &m, 'y');
  CHECK_INT_EQ(calls.kills, 1);
  CHECK(strcmp(calls.last, "worker:0") == 0);
  CHECK_STR_CONTAINS(ui.status, "stopping worker:0");
  keys(&ui, &m, ":c:fit()");
  CHECK_INT_EQ(ui.mode, DASH_MODE_COMMAND);
  key(&ui, &m, KEY_BACKSPACE);
  keys(&ui, &m, ")\r");
  CHECK_INT_EQ(calls.commands, 1);
  CHECK(strcmp(calls.last, "c:fit()") == 0);
  CHECK(strcmp(ui.status, "reply to c:fit()") == 0);
  /* Esc abandons a command */
  keys(&ui, &m, ":boom");
  key(&ui, &m, ESC);
  CHECK_INT_EQ(calls.commands, 1);
  CHECK_INT_EQ(ui.mode, DASH_MODE_NORMAL);
  dash_ui_free(&ui);
  runview_free(&m);
}

TEST(dash_keys_read_only_source_says_so) {
  runview m;
  model_with_nodes(&m);
  dash_ui ui;
  dash_ui_init(&ui, (dash_source){.get = fake_get, .ud = &m});
  key(&ui, &m, 'k');
  CHECK_INT_EQ(ui.mode, DASH_MODE_NORMAL);
  CHECK_STR_CONTAINS(ui.status, "read-only: attach with --control");
  ui.status[0] = '\0';
  key(&ui, &m, ':');
  CHECK_INT_EQ(ui.mode, DASH_MODE_NORMAL);
  CHECK_STR_CONTAINS(ui.status, "read-only");
  dash_ui_free(&ui);
  runview_free(&m);
}

TEST(dash_keys_panels_detail_help_quit_theme) {
  runview m;
  model_with_nodes(&m);
  dash_ui ui;
  dash_ui_init(&ui, (dash_source){.get = fake_get, .ud = &m});
  ui.nthemes = 3;
  CHECK(key(&ui, &m, 'q') & DASH_DO_QUIT);
  key(&ui, &m, '\t');
  CHECK_INT_EQ(ui.panel, DASH_PANEL_CHARTS);
  key(&ui, &m, KEY_RIGHT);
  CHECK_INT_EQ(ui.panel, DASH_PANEL_EVENTS);
  key(&ui, &m, '\t');
  CHECK_INT_EQ(ui.panel, DASH_PANEL_NODES);
  key(&ui, &m, KEY_BTAB);
  CHECK_INT_EQ(ui.panel, DASH_PANEL_EVENTS);
  key(&ui, &m, KEY_LEFT);
  key(&ui, &m, KEY_LEFT);
  CHECK_INT_EQ(ui.panel, DASH_PANEL_NODES);
  key(&ui, &m, KEY_DOWN);
  key(&ui, &m, '\r');
  CHECK_INT_EQ(ui.mode, DASH_MODE_DETAIL);
  CHECK(strcmp(ui.detail, "chief:0") == 0);
  key(&ui, &m, '?'); /* help over the detail view, then back to it */
  CHECK_INT_EQ(ui.mode, DASH_MODE_HELP);
  key(&ui, &m, 'z');
  CHECK_INT_EQ(ui.mode, DASH_MODE_DETAIL);
  CHECK(!(key(&ui, &m, 'q') & DASH_DO_QUIT)); /* q leaves the view, not the dashboard */
  CHECK_INT_EQ(ui.mode, DASH_MODE_NORMAL);
  CHECK(key(&ui, &m, 't') & DASH_DO_THEME);
  CHECK_INT_EQ(ui.theme, 1);
  key(&ui, &m, 't');
  key(&ui, &m, 't');
  CHECK_INT_EQ(ui.theme, 0);
  const char *const *k, *const *h;
  int n = dash_input_help(&k, &h);
  CHECK(n >= 15);
  bool slash = false;
  for (int i = 0; i < n; i++) slash |= strcmp(k[i], "/") == 0 && strstr(h[i], "filter");
  CHECK(slash);
  dash_ui_free(&ui);
  runview_free(&m);
}

/* ============================== frames =================================== */

static SCREEN *screen_open(int rows, int cols) {
  setenv("TERM", "xterm", 1);
  FILE *out = fopen("/dev/null", "w"), *in = fopen("/dev/null", "r");
  CHECK(out && in);
  SCREEN *s = newterm(NULL, out, in);
  CHECK(s);
  set_term(s);
  resizeterm(rows, cols);
  return s;
}

/* The whole screen as text, one line per row. */
static char *screen_text(void) {
  static char buf[300 * 100];
  size_t k = 0;
  for (int y = 0; y < LINES; y++) {
    for (int x = 0; x < COLS; x++) buf[k++] = (char)(mvinch(y, x) & A_CHARTEXT);
    buf[k++] = '\n';
  }
  buf[k] = '\0';
  return buf;
}

static void frame(dash_ui *ui, const runview *m) {
  dash_theme t;
  dash_theme_fallback(&t);
  dash_theme_apply(&t, false, &ui->pal);
  ui->now = 100;
  dash_view_draw(ui, m, LINES, COLS);
}

TEST(dash_frame_small_terminal_layout) {
  screen_open(24, 80);
  runview m;
  model_with_nodes(&m);
  dash_ui ui;
  dash_ui_init(&ui, (dash_source){.get = fake_get, .ud = &m});
  frame(&ui, &m);
  char *s = screen_text();
  CHECK_STR_CONTAINS(s, "exp-7");
  CHECK_STR_CONTAINS(s, "step 1234/5000 24%");
  CHECK_STR_CONTAINS(s, "queue 0/0");
  CHECK_STR_CONTAINS(s, "ps:0");
  CHECK_STR_CONTAINS(s, "worker:1    lost");
  CHECK_STR_CONTAINS(s, "examples/s");
  CHECK_STR_CONTAINS(s, "train/loss");
  CHECK_STR_CONTAINS(s, "node lost worker:1: killed by signal 9");
  CHECK_STR_CONTAINS(s, "? help  q quit");
  CHECK(!strstr(s, "HOST")); /* no room at 80 columns */
  endwin();
  dash_ui_free(&ui);
  runview_free(&m);
}

TEST(dash_frame_large_terminal_and_too_small) {
  screen_open(40, 120);
  runview m;
  model_with_nodes(&m);
  dash_ui ui;
  dash_ui_init(&ui, (dash_source){.get = fake_get, .ud = &m});
  frame(&ui, &m);
  char *s = screen_text();
  CHECK_STR_CONTAINS(s, "HOST");
  CHECK_STR_CONTAINS(s, "host3");
  CHECK_STR_CONTAINS(s, " queue ");
  CHECK_STR_CONTAINS(s, "evaluator:0");
  resizeterm(15, 60);
  frame(&ui, &m);
  s = screen_text();
  CHECK_STR_CONTAINS(s, "terminal too small (need 64x18)");
  CHECK(!strstr(s, "ps:0"));
  resizeterm(40, 120);
  ui.mode = DASH_MODE_HELP;
  frame(&ui, &m);
  s = screen_text();
  CHECK_STR_CONTAINS(s, "filter nodes by name");
  CHECK_STR_CONTAINS(s, "any key closes");
  ui.mode = DASH_MODE_NORMAL;
  snprintf(ui.filter, sizeof ui.filter, "chief");
  frame(&ui, &m);
  s = screen_text();
  CHECK_STR_CONTAINS(s, "nodes 1/6");
  CHECK(!strstr(s, "worker:0"));
  endwin();
  dash_ui_free(&ui);
  runview_free(&m);
}

/* The URL of the TensorBoard serving the run, in the header when there is
 * room; a narrow terminal drops it before the step. */
TEST(dash_frame_header_names_the_tensorboard) {
  screen_open(40, 160);
  runview m;
  model_with_nodes(&m);
  dash_ui ui;
  dash_ui_init(&ui, (dash_source){.get = fake_get, .ud = &m});
  frame(&ui, &m);
  CHECK(!strstr(screen_text(), "tensorboard"));
  snprintf(m.tensorboard, sizeof m.tensorboard, "http://127.0.0.1:6006/");
  frame(&ui, &m);
  CHECK_STR_CONTAINS(screen_text(), "tensorboard http://127.0.0.1:6006/");
  resizeterm(24, 80);
  frame(&ui, &m);
  char *s = screen_text();
  CHECK_STR_CONTAINS(s, "step 1234/5000");
  CHECK(!strstr(s, "tensorboard"));
  endwin();
  dash_ui_free(&ui);
  runview_free(&m);
}

TEST(dash_frame_detail_view_shows_the_log_tail) {
  char log[8000] = "";
  for (int i = 0; i < 60; i++) {
    size_t l = strlen(log);
    snprintf(log + l, sizeof log - l, "log line %d\n", i);
  }
  harness_write_str("worker-0.log", log);
  char cwd[256];
  CHECK(getcwd(cwd, sizeof cwd));
  screen_open(30, 100);
  runview m;
  model_with_nodes(&m);
  snprintf(m.nodes[2].log, sizeof m.nodes[2].log, "%s/worker-0.log", cwd);
  snprintf(m.nodes[3].log, sizeof m.nodes[3].log, "%s/missing.log", cwd);
  dash_ui ui;
  dash_ui_init(&ui, (dash_source){.get = fake_get, .log_tail = fake_log_tail, .ud = &m});
  key(&ui, &m, KEY_DOWN);
  key(&ui, &m, KEY_DOWN);
  key(&ui, &m, '\n');
  frame(&ui, &m);
  char *s = screen_text();
  CHECK_STR_CONTAINS(s, "node worker:0");
  CHECK_STR_CONTAINS(s, "log line 59"); /* the newest */
  CHECK_STR_CONTAINS(s, "log line 50");
  CHECK(!strstr(s, "log line 5\n") && !strstr(s, "log line 10 ")); /* the oldest did not fit */
  CHECK_STR_CONTAINS(s, "Esc back");
  key(&ui, &m, ESC);
  key(&ui, &m, KEY_DOWN);
  key(&ui, &m, '\n');
  frame(&ui, &m);
  s = screen_text();
  CHECK_STR_CONTAINS(s, "node worker:1");
  CHECK_STR_CONTAINS(s, "missing.log: No such file or directory");
  endwin();
  dash_ui_free(&ui);
  runview_free(&m);
}

/* A node's state colours its cell by the tone nodestate.h gives it. */
TEST(dash_state_colours_follow_the_state_table) {
  static const struct {
    const char *state;
    int role;
  } want[] = {{"failed", DASH_ROLE_BAD},      {"lost", DASH_ROLE_BAD},     {"restarting", DASH_ROLE_WARN},
              {"restoring", DASH_ROLE_WARN},  {"syncing", DASH_ROLE_WARN}, {"starting", DASH_ROLE_WARN},
              {"busy", DASH_ROLE_BUSY},       {"ready", DASH_ROLE_OK},     {"replica", DASH_ROLE_OK},
              {"done", DASH_ROLE_OK},         {"idle", DASH_ROLE_TEXT},    {"", DASH_ROLE_TEXT}};
  for (size_t i = 0; i < sizeof want / sizeof *want; i++)
    if (dash_state_role(want[i].state) != want[i].role)
      harness_fail(__FILE__, __LINE__, "\"%s\" is %s, not %s", want[i].state,
                   dash_role_name(dash_state_role(want[i].state)), dash_role_name(want[i].role));
}

/* '+' / '-' on a worker row: one worker more / fewer through the source;
 * on another row or panel, the smoothing; read-only, refused in the status
 * line. */
TEST(dash_keys_plus_minus_scale_on_a_worker_row) {
  runview m;
  model_with_nodes(&m);
  dash_ui ui;
  dash_ui_init(&ui, (dash_source){.get = fake_get, .scale = fake_scale, .ud = &m});
  memset(&calls, 0, sizeof calls);
  key(&ui, &m, KEY_DOWN);
  key(&ui, &m, KEY_DOWN); /* worker:0, as the kill test selects it */
  key(&ui, &m, '+');
  CHECK_INT_EQ(calls.commands, 1);
  CHECK(strcmp(calls.last, "worker=+1") == 0);
  CHECK_STR_CONTAINS(ui.status, "scaling: worker=+1");
  key(&ui, &m, '-');
  CHECK_INT_EQ(calls.commands, 2);
  CHECK(strcmp(calls.last, "worker=-1") == 0);
  CHECK_NEAR(ui.smoothing, 0.6, 1e-12); /* untouched */
  key(&ui, &m, KEY_HOME); /* not a worker: the smoothing */
  key(&ui, &m, '+');
  CHECK_INT_EQ(calls.commands, 2);
  CHECK_NEAR(ui.smoothing, 0.65, 1e-12);
  key(&ui, &m, '\t'); /* the charts */
  key(&ui, &m, '-');
  CHECK_NEAR(ui.smoothing, 0.6, 1e-12);
  dash_ui_free(&ui);
  dash_ui_init(&ui, (dash_source){.get = fake_get, .ud = &m}); /* read-only */
  key(&ui, &m, KEY_DOWN);
  key(&ui, &m, KEY_DOWN);
  key(&ui, &m, '+');
  CHECK_STR_CONTAINS(ui.status, "read-only: attach with --control to add or remove workers");
  CHECK_NEAR(ui.smoothing, 0.6, 1e-12);
  dash_ui_free(&ui);
  runview_free(&m);
}
