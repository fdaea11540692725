/* test_worker_call.c - scheduled closures on workers (CALL -> CALL_RESULT,
 * l_worker.c): results and the `w` fields, errors with their traceback,
 * malformed closures, unsendable results, misuse of the w methods, and
 * w:train_step/pull/compute/push/batch against real ps processes, which
 * must train exactly like the TASK path and in-process training. Nodes are
 * forked node_main children under the fake coordinator (node_fake.h); the
 * per-call cost is measured in process.
 */
#include <lauxlib.h>
#include <lualib.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/closure.h"
#include "harness.h"
#include "luabind/l_worker.h"
#include "node_fake.h"
#include "train/progress.h"
#include "cluster/worker/worker.h"
#include "worker_fixture.h"

/* ============================== helpers ================================== */

static lua_State *new_state(void) {
  lua_State *L = luaL_newstate();
  CHECK(L != NULL);
  luaL_openlibs(L);
  return L;
}

/* The payload of a CALL for task `task`: the function the chunk `src`
 * returns (its chunk name "@calls.lua" shows in tracebacks) and the nargs
 * values on top of L, which are popped. The caller frees the writer. */
static wire_wr call_payload(lua_State *L, const char *src, uint64_t task, int nargs) {
  if (luaL_loadbuffer(L, src, strlen(src), "@calls.lua") != LUA_OK ||
      lua_pcall(L, 0, 1, 0) != LUA_OK)
    harness_fail(__FILE__, __LINE__, "chunk: %s", lua_tostring(L, -1));
  lua_insert(L, -nargs - 1);
  wire_wr enc, w;
  wire_wr_init(&enc);
  CHECK_OK(closure_encode(L, -nargs - 1, -nargs, nargs, &enc));
  lua_pop(L, nargs + 1);
  wire_wr_init(&w);
  wire_wr_u64(&w, task);
  wire_wr_bytes(&w, enc.buf + WIRE_HEADER_SIZE, (uint32_t)(enc.len - WIRE_HEADER_SIZE));
  wire_wr_free(&enc);
  return w;
}

static void send_call(lua_State *L, peer *ctl, const char *src, uint64_t task, int nargs) {
  wire_wr w = call_payload(L, src, task, nargs);
  nf_send_wr(ctl, &w, WIRE_CALL, (uint32_t)task + 1000);
}

typedef struct call_result {
  uint64_t task;
  int32_t status;
  int n;           /* values pushed on the test's Lua state (status 0) */
  char msg[8192];  /* the error text (status < 0) */
} call_result;

/* Parses a CALL_RESULT payload; on success pushes its values on L. */
static void parse_result(lua_State *L, const uint8_t *p, size_t len, call_result *r) {
  wire_rd rd;
  wire_rd_init(&rd, p, len);
  r->task = wire_rd_u64(&rd);
  r->status = wire_rd_i32(&rd);
  const uint8_t *data;
  uint32_t n = wire_rd_bytes(&rd, &data);
  CHECK_OK(wire_rd_done(&rd, WIRE_CALL_RESULT));
  r->n = 0;
  r->msg[0] = '\0';
  if (r->status == 0) {
    r->n = closure_decode_values(L, data, n);
    CHECK_OK(r->n);
  } else {
    snprintf(r->msg, sizeof r->msg, "%.*s", (int)n, (const char *)data);
  }
}

/* The next CALL_RESULT from ctl, which must answer `task` (req echoed). */
static void read_call_result(fake *f, peer *ctl, lua_State *L, uint64_t task, call_result *r) {
  fk_frame *fr = NF_EXPECT(f, ctl, WIRE_CALL_RESULT);
  parse_result(L, fr->p, fr->h.len, r);
  CHECK_INT_EQ(fr->h.req, (uint32_t)task + 1000);
  nf_frame_free(fr);
  CHECK_INT_EQ(r->task, task);
}

/* A call that must succeed with `want` values. */
static void expect_values(fake *f, peer *ctl, lua_State *L, uint64_t task, int want) {
  call_result r;
  read_call_result(f, ctl, L, task, &r);
  if (r.status != 0) harness_fail(__FILE__, __LINE__, "call %d failed: %s", (int)task, r.msg);
  CHECK_INT_EQ(r.n, want);
}

/* A call that must fail with a message containing `needle`. */
static void expect_error(fake *f, peer *ctl, lua_State *L, uint64_t task, const char *needle,
                         call_result *r) {
  read_call_result(f, ctl, L, task, r);
  CHECK(r->status < 0);
  CHECK_STR_CONTAINS(r->msg, needle);
}

static const char *str_at(lua_State *L, int idx) {
  const char *s = lua_tostring(L, idx);
  CHECK(s != NULL && lua_type(L, idx) == LUA_TSTRING);
  return s;
}

static lua_Integer int_at(lua_State *L, int idx) {
  CHECK(lua_isinteger(L, idx));
  return lua_tointeger(L, idx);
}

/* ============================== results and errors ======================= */

TEST(worker_call_returns_results_and_w_fields) {
  nf_cluster c;
  nf_cluster_up(&c, (nf_node[]){{ROLE_WORKER, 1}, {ROLE_CHIEF, 0}}, 2, 100, 10000);
  fake *f = &c.f;
  peer *wk = nf_cluster_reg(&c, ROLE_WORKER, 1)->ctl;
  peer *ch = nf_cluster_reg(&c, ROLE_CHIEF, 0)->ctl;
  lua_State *L = new_state();

  /* Several values and a table; w comes first, then the arguments. */
  lua_pushinteger(L, 41);
  lua_createtable(L, 1, 1);
  lua_pushinteger(L, 5);
  lua_rawseti(L, -2, 1);
  lua_pushstring(L, "v");
  lua_setfield(L, -2, "k");
  send_call(L, wk,
            "return function(w, a, t)\n"
            "  return w.index, w.role, w.name, w.steps, a + 1, {t[1] * 2, k = t.k .. '!'},\n"
            "         nil, true\n"
            "end",
            1, 2);
  expect_values(f, wk, L, 1, 8);
  CHECK_INT_EQ(int_at(L, 1), 1);
  CHECK(strcmp(str_at(L, 2), "worker") == 0);
  CHECK(strcmp(str_at(L, 3), "worker:1") == 0);
  CHECK_INT_EQ(int_at(L, 4), 0);
  CHECK_INT_EQ(int_at(L, 5), 42);
  CHECK(lua_istable(L, 6));
  lua_rawgeti(L, 6, 1);
  CHECK_INT_EQ(int_at(L, -1), 10);
  lua_getfield(L, 6, "k");
  CHECK(strcmp(str_at(L, -1), "v!") == 0);
  CHECK(lua_isnil(L, 7));
  CHECK(lua_toboolean(L, 8));
  lua_settop(L, 0);

  /* The chief is a worker too; the Lua state persists between calls. */
  const char *count = "return function(w) counter = (counter or 0) + 1 "
                      "return w.role, w.index, tostring(w), counter end";
  send_call(L, ch, count, 2, 0);
  send_call(L, ch, count, 3, 0);
  expect_values(f, ch, L, 2, 4);
  CHECK(strcmp(str_at(L, 1), "chief") == 0);
  CHECK_INT_EQ(int_at(L, 2), 0);
  CHECK(strcmp(str_at(L, 3), "drover.Worker (chief:0)") == 0);
  CHECK_INT_EQ(int_at(L, 4), 1);
  lua_settop(L, 0);
  expect_values(f, ch, L, 3, 4);
  CHECK_INT_EQ(int_at(L, 4), 2);
  lua_settop(L, 0);

  nf_cluster_down(&c);
  lua_close(L);
}

TEST(worker_call_errors_and_misuse) {
  nf_cluster c;
  nf_cluster_up(&c, &(nf_node){ROLE_WORKER, 0}, 1, 100, 10000);
  fake *f = &c.f;
  peer *wk = c.regs[0].ctl;
  lua_State *L = new_state();
  call_result r;

  /* A raising closure: the message, then the coroutine's traceback with
   * the script's file and lines. */
  lua_pushstring(L, "now");
  send_call(L, wk,
            "return function(w, x)\n"
            "  local function inner(y)\n"
            "    error('boom ' .. y)\n"
            "  end\n"
            "  inner(x)\n"
            "end\n",
            1, 1);
  expect_error(f, wk, L, 1, "calls.lua:3: boom now", &r);
  CHECK(strncmp(r.msg, "calls.lua:3: boom now\nstack traceback:", 37) == 0);
  CHECK_STR_CONTAINS(r.msg, "calls.lua:5:");

  /* Bytes that are no closure: an error result, and the node serves on. */
  wire_wr w;
  wire_wr_init(&w);
  wire_wr_u64(&w, 2);
  static const uint8_t junk[] = {1, 0xff, 0xff, 0xff, 0x7f, 0x1b, 'L', 'u', 'a'};
  wire_wr_bytes(&w, junk, sizeof junk);
  nf_send_wr(wk, &w, WIRE_CALL, 1002);
  expect_error(f, wk, L, 2, "closure", &r);

  /* A result that cannot travel is an error naming it. */
  send_call(L, wk, "return function(w) return 1, drover.tensor.zeros(2) end", 3, 0);
  expect_error(f, wk, L, 3, "result 2 is a userdata drover.Tensor", &r);

  /* An error object with __tostring; a bare yield to the worker. */
  send_call(L, wk,
            "return function(w) error(setmetatable({}, {__tostring = function() "
            "return 'custom error' end})) end",
            4, 0);
  expect_error(f, wk, L, 4, "custom error\nstack traceback:", &r);
  send_call(L, wk, "return function(w) coroutine.yield(1) end", 5, 0);
  expect_error(f, wk, L, 5, "cannot yield to the worker", &r);
  send_call(L, wk, "return function(w) local function f() return 1 + f() end return f() end", 12,
            0);
  expect_error(f, wk, L, 12, "stack overflow", &r); /* its thread is reset and reused */

  /* The w methods need a SETUP, a place where the call can wait, and the
   * call's own coroutine. */
  send_call(L, wk, "return function(w) return w:train_step() end", 6, 0);
  expect_error(f, wk, L, 6,
               "w:train_step: this worker has no model yet (run c:fit or c:setup first)", &r);
  send_call(L, wk, "return function(w) local ok, e = pcall(w.batch, w) return ok, e end", 7, 0);
  expect_values(f, wk, L, 7, 2);
  CHECK(!lua_toboolean(L, 1));
  CHECK_STR_CONTAINS(str_at(L, 2), "w:batch: this worker has no model yet");
  lua_settop(L, 0);
  send_call(L, wk,
            "return function(w)\n"
            "  table.sort({3, 1, 2}, function(a, b) w:train_step() return a < b end)\n"
            "end",
            8, 0);
  expect_error(f, wk, L, 8, "w:train_step: cannot wait here", &r);
  CHECK(!strstr(r.msg, "C-call boundary"));
  send_call(L, wk, "return function(w) coroutine.wrap(function() w:pull() end)() end", 9, 0);
  expect_error(f, wk, L, 9, "w:pull: call it from the scheduled function itself", &r);
  send_call(L, wk, "return function(w) return w.no_such_thing, w.push ~= nil end", 10, 0);
  expect_values(f, wk, L, 10, 2);
  CHECK(lua_isnil(L, 1) && lua_toboolean(L, 2));
  lua_settop(L, 0);

  /* Still serving, with the same state. */
  send_call(L, wk, "return function(w) return 'still here', w.steps end", 11, 0);
  expect_values(f, wk, L, 11, 2);
  CHECK(strcmp(str_at(L, 1), "still here") == 0);
  lua_settop(L, 0);

  nf_cluster_down(&c);
  lua_close(L);
}

/* Calls in flight at once finish in any order: drover.sleep yields to a
 * timer (the loop keeps serving), so the quick call overtakes it. */
TEST(worker_call_in_flight_out_of_order) {
  nf_cluster c;
  nf_cluster_up(&c, &(nf_node){ROLE_WORKER, 0}, 1, 100, 10000);
  fake *f = &c.f;
  peer *wk = c.regs[0].ctl;
  lua_State *L = new_state();
  double t0 = nf_now_ms();
  send_call(L, wk, "return function(w) drover.sleep(0.3) return 'slow' end", 1, 0);
  send_call(L, wk, "return function(w) return 'quick' end", 2, 0);
  expect_values(f, wk, L, 2, 1);
  CHECK(strcmp(str_at(L, 1), "quick") == 0);
  lua_settop(L, 0);
  expect_values(f, wk, L, 1, 1);
  CHECK(strcmp(str_at(L, 1), "slow") == 0);
  CHECK(nf_now_ms() - t0 >= 290); /* (the node's loop clock may lag a little) */
  lua_settop(L, 0);
  /* A call still asleep holds the node at SHUTDOWN until the grace is
   * over (a running call finishes within it), then the node stops,
   * status 0, without a leak. */
  send_call(L, wk, "return function(w) drover.sleep(30) end", 3, 0);
  nf_pump_for(f, 50);
  double t1 = nf_now_ms();
  nf_send_shutdown(wk); /* with 2 s of grace */
  CHECK_INT_EQ(nf_cluster_reap(&c, ROLE_WORKER, 0, WAIT_MS), 0);
  CHECK(nf_now_ms() - t1 >= 1900);
  CHECK(nf_now_ms() - t1 < 8000);
  nf_cluster_down(&c);
  lua_close(L);
}

TEST(worker_call_refused_by_an_evaluator) {
  nf_cluster c;
  nf_cluster_up(&c, &(nf_node){ROLE_EVALUATOR, 0}, 1, 100, 10000);
  fake *f = &c.f;
  peer *ev = c.regs[0].ctl;
  lua_State *L = new_state();
  send_call(L, ev, "return function(w) return 1 end", 1, 0);
  CHECK_STR_CONTAINS(nf_expect_error_and_close(f, ev), "CALL sent to an evaluator");
  CHECK_INT_EQ(nf_cluster_reap(&c, ROLE_EVALUATOR, 0, WAIT_MS), 1);
  nf_cluster_down(&c);
  lua_close(L);
}

/* ============================== training ================================= */

/* The losses, examples and correct counts (tables) of a call's first
 * three results against reference steps [from, from + n). */
static void check_losses(lua_State *L, const wf_reference *ref, int from, int n) {
  CHECK(lua_istable(L, 1) && lua_istable(L, 2) && lua_istable(L, 3));
  CHECK_INT_EQ(lua_rawlen(L, 1), n);
  for (int i = 0; i < n; i++) {
    lua_rawgeti(L, 1, i + 1);
    lua_rawgeti(L, 2, i + 1);
    lua_rawgeti(L, 3, i + 1);
    CHECK(lua_tonumber(L, -3) == (double)ref->losses[from + i]);
    CHECK_INT_EQ(int_at(L, -2), ref->examples[from + i]);
    CHECK_INT_EQ(int_at(L, -1), ref->correct[from + i]);
    lua_pop(L, 3);
  }
}

/* The batch after the first `skip` of worker 0's shard, as w:batch() must
 * return it (x:totable(), y:totable() on the stack at 1 and 2). */
static void check_batch(lua_State *L, const dataset *d, int skip) {
  data_iter it;
  CHECK_OK(data_iter_init(&it, d, WF_BATCH, true, WF_SEED));
  const tensor *x = NULL, *y = NULL;
  for (int i = 0; i <= skip; i++) {
    if (data_iter_next(&it, &x, &y) == 0) {
      data_iter_reset(&it);
      CHECK(data_iter_next(&it, &x, &y) == 1);
    }
  }
  int64_t rows = x->shape[0];
  CHECK_INT_EQ(lua_rawlen(L, 1), rows);
  CHECK_INT_EQ(lua_rawlen(L, 2), rows);
  for (int64_t i = 0; i < rows; i++) {
    lua_rawgeti(L, 1, i + 1);
    for (int k = 0; k < 4; k++) {
      lua_rawgeti(L, -1, k + 1);
      CHECK(lua_tonumber(L, -1) == (double)tensor_data(x)[4 * i + k]);
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
    lua_rawgeti(L, 2, i + 1);
    CHECK(lua_tonumber(L, -1) == (double)tensor_data(y)[i]);
    lua_pop(L, 1);
  }
  data_iter_free(&it);
}

static const char *TRAIN_STEPS =
    "return function(w, n)\n"
    "  local losses, examples, correct = {}, {}, {}\n"
    "  for i = 1, n do losses[i], examples[i], correct[i] = w:train_step() end\n"
    "  return losses, examples, correct, w.steps\n"
    "end";

static const char *PHASES =
    "return function(w, n)\n"
    "  local losses, examples, correct = {}, {}, {}\n"
    "  for i = 1, n do\n"
    "    w:pull()\n"
    "    losses[i], examples[i], correct[i] = w:compute()\n"
    "    w:push()\n"
    "  end\n"
    "  return losses, examples, correct, w.steps\n"
    "end";

TEST(worker_call_trains_like_tasks_and_in_process) {
  dataset *train = wf_toy_data(20, 7);
  nf_cluster c;
  nf_cluster_up(&c, (nf_node[]){{ROLE_PS, 0}, {ROLE_PS, 1}, {ROLE_WORKER, 0}}, 3, 100, 10000);
  fake *f = &c.f;
  peer *wk = nf_cluster_reg(&c, ROLE_WORKER, 0)->ctl;
  peer *ps[2] = {nf_cluster_dial(&c, ROLE_PS, 0), nf_cluster_dial(&c, ROLE_PS, 1)};
  rng_t rg;
  rng_seed(&rg, WF_SEED);
  nn_module *init = nn_from_spec(WF_SPEC, &rg);
  nn_param_list pl = {0};
  CHECK_OK(nn_collect_params(init, &pl));
  optim_cfg cfg = wf_adam_cfg();
  wf_init_vars(f, ps, &pl, &cfg);
  wf_send_setup(wk, &pl, train, WF_BATCH, 5);
  nf_frame_free(NF_EXPECT(f, wk, WIRE_SETUP_OK));
  wf_reference ref;
  wf_run_reference(&ref, train, &cfg);
  lua_State *L = new_state();

  /* Steps 0-3 by w:train_step, 4-6 phase by phase, 7-8 as TASKs: each one
   * is the in-process step of the same index. */
  lua_pushinteger(L, 4);
  send_call(L, wk, TRAIN_STEPS, 1, 1);
  expect_values(f, wk, L, 1, 4);
  check_losses(L, &ref, 0, 4);
  CHECK_INT_EQ(int_at(L, 4), 4);
  lua_settop(L, 0);
  lua_pushinteger(L, 3);
  send_call(L, wk, PHASES, 2, 1);
  expect_values(f, wk, L, 2, 4);
  check_losses(L, &ref, 4, 3);
  CHECK_INT_EQ(int_at(L, 4), 4); /* separate phases are not whole steps */
  lua_settop(L, 0);
  for (int s = 7; s < WF_STEPS; s++) {
    wf_send_task(wk, (uint64_t)s, 50 + (uint32_t)s);
    wf_result res;
    wf_read_result(f, wk, &res);
    if (res.status != 0) harness_fail(__FILE__, __LINE__, "task failed: %s", res.msg);
    CHECK(res.loss == (double)ref.losses[s]);
  }
  CHECK_INT_EQ(ref.examples[3], 2); /* the run crossed an epoch boundary */
  tensor *got[4];
  wf_pull_model(f, ps, &pl, got);
  for (int i = 0; i < 4; i++) {
    CHECK(nf_same_bits(got[i], ref.params.items[i].value));
    tensor_free(got[i]);
  }

  /* w:batch() copies the next batch of the shard. */
  send_call(L, wk,
            "return function(w)\n"
            "  local x, y = w:batch()\n"
            "  return x:totable(), y:totable(), drover.tensor.is_tensor(x)\n"
            "end",
            3, 0);
  expect_values(f, wk, L, 3, 3);
  CHECK(lua_toboolean(L, 3));
  check_batch(L, train, WF_STEPS);
  lua_settop(L, 0);

  /* Two training calls in flight at once: both complete, every step counts. */
  lua_pushinteger(L, 3);
  send_call(L, wk, TRAIN_STEPS, 4, 1);
  lua_pushinteger(L, 2);
  send_call(L, wk, TRAIN_STEPS, 5, 1);
  bool seen[2] = {false, false};
  for (int k = 0; k < 2; k++) {
    fk_frame *fr = NF_EXPECT(f, wk, WIRE_CALL_RESULT);
    call_result r;
    parse_result(L, fr->p, fr->h.len, &r);
    nf_frame_free(fr);
    if (r.status != 0) harness_fail(__FILE__, __LINE__, "call failed: %s", r.msg);
    CHECK(r.task == 4 || r.task == 5);
    CHECK(!seen[r.task - 4]);
    seen[r.task - 4] = true;
    CHECK_INT_EQ(lua_rawlen(L, 1), r.task == 4 ? 3 : 2);
    lua_settop(L, 0);
  }
  send_call(L, wk, "return function(w) return w.steps end", 6, 0);
  expect_values(f, wk, L, 6, 1);
  CHECK_INT_EQ(int_at(L, 1), 6 + 5);
  lua_settop(L, 0);

  /* SHUTDOWN in the middle of a training call: the node stops cleanly. */
  lua_pushinteger(L, 1000);
  send_call(L, wk, TRAIN_STEPS, 7, 1);
  nf_pump_for(f, 50);
  nf_cluster_down(&c);
  wf_free_reference(&ref);
  nn_param_list_free(&pl);
  nn_unref(init);
  data_free(train);
  lua_close(L);
}

/* A job of a call fails with the ps: the error reaches the closure, which
 * may catch it like any Lua error. */
TEST(worker_call_job_failure_raises_in_lua) {
  dataset *train = wf_toy_data(12, 3);
  nf_cluster c;
  nf_cluster_up(&c, (nf_node[]){{ROLE_PS, 0}, {ROLE_PS, 1}, {ROLE_WORKER, 0}}, 3, 100, 10000);
  fake *f = &c.f;
  peer *wk = nf_cluster_reg(&c, ROLE_WORKER, 0)->ctl;
  rng_t rg;
  rng_seed(&rg, WF_SEED);
  nn_module *init = nn_from_spec(WF_SPEC, &rg);
  nn_param_list pl = {0};
  CHECK_OK(nn_collect_params(init, &pl));
  wf_send_setup(wk, &pl, train, 4, 2); /* no VAR_INIT: the ps refuse the pull */
  nf_frame_free(NF_EXPECT(f, wk, WIRE_SETUP_OK));
  lua_State *L = new_state();
  send_call(L, wk,
            "return function(w)\n"
            "  local ok, err = pcall(w.pull, w)\n"
            "  return ok, err\n"
            "end",
            1, 0);
  expect_values(f, wk, L, 1, 2);
  CHECK(!lua_toboolean(L, 1));
  CHECK_STR_CONTAINS(str_at(L, 2), "w:pull: ps:");
  CHECK_STR_CONTAINS(str_at(L, 2), "unknown var");
  lua_settop(L, 0);
  nf_cluster_down(&c);
  nn_param_list_free(&pl);
  nn_unref(init);
  data_free(train);
  lua_close(L);
}

/* ============================== cost ===================================== */

/* Many calls through a node, up to 256 in flight: each is answered once
 * with its own argument back. Prints the rate (one worker, the fake
 * coordinator on the same machine). */
TEST(worker_call_many_through_a_node) {
  nf_cluster c;
  nf_cluster_up(&c, &(nf_node){ROLE_WORKER, 0}, 1, 100, 10000);
  fake *f = &c.f;
  peer *wk = c.regs[0].ctl;
  lua_State *L = new_state();
  lua_pushinteger(L, 0);
  wire_wr proto = call_payload(L, "return function(w, i) return i end", 0, 1);
  size_t len = proto.len - WIRE_HEADER_SIZE;
  enum { N = 20000, WINDOW = 256 };
  char *seen = calloc(N, 1);
  CHECK(seen != NULL);
  uint64_t sent = 0;
  double t0 = nf_now_ms();
  for (int got = 0; got < N; got++) {
    while (sent < N && sent - (uint64_t)got < WINDOW) {
      wire_wr w;
      wire_wr_init(&w);
      wire_wr_raw(&w, proto.buf + WIRE_HEADER_SIZE, len);
      for (int b = 0; b < 8; b++) /* the task id, and the argument (the last 8 bytes) */
        w.buf[WIRE_HEADER_SIZE + b] = w.buf[w.len - 8 + b] = (uint8_t)(sent >> (8 * b));
      nf_send_wr(wk, &w, WIRE_CALL, (uint32_t)sent);
      sent++;
    }
    fk_frame *fr = NF_EXPECT(f, wk, WIRE_CALL_RESULT);
    call_result r;
    parse_result(L, fr->p, fr->h.len, &r);
    nf_frame_free(fr);
    if (r.status != 0) harness_fail(__FILE__, __LINE__, "call failed: %s", r.msg);
    CHECK(r.task < N && !seen[r.task]);
    seen[r.task] = 1;
    CHECK_INT_EQ(r.n, 1);
    CHECK_INT_EQ(int_at(L, 1), (lua_Integer)r.task);
    lua_settop(L, 0);
  }
  double ms = nf_now_ms() - t0;
  fprintf(stderr, "CALL through a node: %.2f us per call (%.0f calls/s)\n", ms * 1e3 / N,
          N / (ms / 1e3));
  nf_cluster_down(&c);
  free(seen);
  wire_wr_free(&proto);
  lua_close(L);
}

typedef struct sink {
  lua_State *L;
  int answered, failed;
  uint64_t next_task;
} sink;

/* The worker's replies in process: each must answer the next task with
 * its argument back. */
static int sink_send(void *ud, wire_wr *w, uint8_t type, uint32_t req) {
  sink *s = ud;
  (void)req;
  CHECK_INT_EQ(type, WIRE_CALL_RESULT);
  call_result r;
  parse_result(s->L, w->buf + WIRE_HEADER_SIZE, w->len - WIRE_HEADER_SIZE, &r);
  if (r.status != 0 || r.task != s->next_task || r.n != 1 ||
      lua_tointeger(s->L, -1) != (lua_Integer)r.task)
    s->failed++;
  lua_settop(s->L, 0);
  s->next_task++;
  s->answered++;
  wire_wr_free(w);
  return 0;
}

/* worker_call on a no-op closure, in process (no sockets): every call is
 * answered at once, in order; prints the cost per call. */
TEST(worker_call_per_call_cost) {
  uv_loop_t loop;
  CHECK(uv_loop_init(&loop) == 0);
  keyring keys;
  memset(&keys, 0, sizeof keys);
  sink s = {.L = new_state()};
  worker *w = worker_new(&loop, &keys, ROLE_WORKER, 0, sink_send, &s);
  CHECK(w != NULL);
  worker_set_calls(w, &lworker_calls);
  lua_State *L = new_state();
  lua_pushinteger(L, 0);
  wire_wr p = call_payload(L, "return function(w, i) return i end", 0, 1);
  uint8_t *pl = p.buf + WIRE_HEADER_SIZE;
  size_t len = p.len - WIRE_HEADER_SIZE;
  /* The task id leads the payload; the closure's argument (an INT, the
   * last 8 bytes) is patched to match it. */
  enum { N = 20000 };
  double t0 = 0;
  for (uint64_t t = 0; t < N + 100; t++) {
    if (t == 100) t0 = progress_now(); /* the first calls make the state and threads */
    for (int b = 0; b < 8; b++) pl[b] = pl[len - 8 + b] = (uint8_t)(t >> (8 * b));
    CHECK_OK(worker_call(w, (uint32_t)t, pl, len));
  }
  double secs = progress_now() - t0;
  CHECK_INT_EQ(s.answered, N + 100);
  CHECK_INT_EQ(s.failed, 0);
  fprintf(stderr, "worker_call: %.2f us per no-op call (%.0f calls/s)\n", secs * 1e6 / N,
          N / secs);
  worker_close(w);
  uv_run(&loop, UV_RUN_DEFAULT);
  worker_free(w);
  CHECK(uv_loop_close(&loop) == 0);
  wire_wr_free(&p);
  lua_close(L);
  lua_close(s.L);
}

/* A worker made without the Lua side (worker_set_calls) refuses a CALL
 * with an error rather than crashing or calling up into a Lua it lacks. */
TEST(worker_call_without_lua_is_refused) {
  uv_loop_t loop;
  CHECK(uv_loop_init(&loop) == 0);
  keyring keys;
  memset(&keys, 0, sizeof keys);
  sink s = {.L = new_state()};
  worker *w = worker_new(&loop, &keys, ROLE_WORKER, 0, sink_send, &s);
  CHECK(w != NULL);
  lua_State *L = new_state();
  lua_pushinteger(L, 0);
  wire_wr p = call_payload(L, "return function(w, i) return i end", 0, 1);
  CHECK_ERR(worker_call(w, 1, p.buf + WIRE_HEADER_SIZE, p.len - WIRE_HEADER_SIZE), DRV_EINVAL,
            "cannot take a CALL");
  CHECK_INT_EQ(s.answered, 0);
  worker_close(w);
  uv_run(&loop, UV_RUN_DEFAULT);
  worker_free(w);
  CHECK(uv_loop_close(&loop) == 0);
  wire_wr_free(&p);
  lua_close(L);
  lua_close(s.L);
}
