/* l_worker.c - scheduled closures on a worker or the chief (CALL ->
 * CALL_RESULT): the node's Lua state, one coroutine per call, and the `w`
 * object whose methods queue jobs in worker.c and yield until they are
 * over.
 *
 * A call runs on a pooled thread: the closure is decoded (closure.h), `w`
 * goes in front of its arguments and the thread is resumed. It returns
 * (CALL_RESULT with its results), raises (CALL_RESULT with the message and
 * the coroutine's traceback) or yields inside a w method or drover.sleep,
 * waiting for a job or a timer. Their completion does not resume the
 * thread at once: it marks the call ready, and ready calls are resumed only
 * while no Lua code runs. So a coroutine never resumes inside another one,
 * although a job may end while Lua runs (one that fails as it starts, in
 * the settle() that its own submission runs). Results leave in any order:
 * the coordinator matches task ids.
 *
 * The Lua state is made at the first CALL and lives as long as the worker,
 * so a scheduled function may leave globals for later ones. drover.sleep
 * is replaced there by one that yields to a timer: the stock one pumps the
 * loop, and uv_run must not run inside one of its own callbacks.
 *
 * Per call (a no-op closure): a pooled thread, one decode (bytecode load
 * included), one resume, one encode and one frame; no traceback unless it
 * fails, no allocation on the Lua side beyond the closure itself.
 */
#include <lauxlib.h>
#include <lua.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/closure.h"
#include "base/err.h"
#include "luabind/l_drover.h"
#include "luabind/l_util.h"
#include "luabind/l_worker.h"
#include "base/le.h"
#include "base/log.h"
#include "base/util.h"
#include "proto/wire_msgs.h"
#include "cluster/worker/worker_int.h"

#define WORKER_MT "drover.Worker"
#define IDS_MT "drover.BatchIds"
#define POOL_MAX 64 /* idle threads kept for reuse */

typedef enum {
  C_IDLE,  /* in the pool, or over while a job of it is still outstanding */
  C_RUN,   /* running, or about to */
  C_WAIT,  /* suspended in a w method (or drover.sleep) until its job ends */
  C_READY, /* its job is over: to be resumed */
} call_state;

typedef struct wcall {
  struct wlua *lua;
  lua_State *co;       /* the thread, paired with this call for life */
  int ref;             /* registry reference anchoring co */
  uint64_t task;
  uint32_t req;
  call_state state;
  int outstanding;     /* jobs and timers started and not yet over */
  /* the outcome of the job it waited for */
  int rc;
  char msg[512];
  double loss;
  int64_t examples, correct; /* correct: -1 when accuracy does not apply */
  tensor *bx, *by;     /* owned until pushed to Lua */
  uv_timer_t *timer;   /* drover.sleep; made on first use, freed by its close callback */
  struct wcall *next;  /* in the pool or the ready list */
  struct wcall *fed_next; /* waiting in w:next_batch for a fed batch */
  uint64_t feed_ends0;  /* the worker's feed_ends when the call started */
} wcall;

typedef struct wlua {
  worker *w;
  lua_State *L;
  int wref;            /* the `w` userdata */
  int busy;            /* Lua code runs (a resume is under way) */
  bool closed;
  wcall *pool;
  int npool;
  wcall *ready, *ready_tail;
  wcall *fed_waiting;  /* calls waiting in w:next_batch */
  wcall **all;         /* every call made (for close and free) */
  int nall;
  size_t capall;
} wlua;

/* The `w` userdata: the worker it stands for. */
typedef struct lworker {
  worker *w;
} lworker;

/* What a method of `w` runs and what its continuation returns. */
enum { R_NONE, R_LOSS, R_BATCH };
typedef struct method {
  const char *name;
  unsigned phases;
  int results;
} method;

static const method M_TRAIN = {"w:train_step", JP_TRAIN, R_LOSS};
static const method M_PULL = {"w:pull", JP_PULL, R_NONE};
static const method M_COMPUTE = {"w:compute", JP_COMPUTE, R_LOSS};
static const method M_PUSH = {"w:push", JP_PUSH, R_NONE};
static const method M_BATCH = {"w:batch", JP_BATCH, R_BATCH};
static const method M_SLEEP = {"drover.sleep", 0, R_NONE};

static void run_ready(wlua *l);

/* ============================== replies ================================== */

/* CALL_RESULT with an error: the text in msg[len] (borrowed). */
static void reply_error(worker *w, uint64_t task, uint32_t req, int code, const char *msg,
                        size_t len) {
  wire_wr m;
  wire_wr_init(&m);
  uint32_t n = (uint32_t)(len < CLOSURE_MAX_BYTES ? len : CLOSURE_MAX_BYTES);
  wire_put_call_result(&m, &(wire_msg_call_result){task, code < 0 ? code : DRV_EINVAL,
                                                   {(const uint8_t *)msg, n}});
  log_warn("call %llu failed: %.*s", (unsigned long long)task, (int)(len < 300 ? len : 300), msg);
  w->send(w->ud, &m, WIRE_CALL_RESULT, req);
}

__attribute__((format(printf, 5, 6)))
static void reply_errorf(worker *w, uint64_t task, uint32_t req, int code, const char *fmt, ...) {
  char msg[1200];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  size_t len = n < 0 ? 0 : (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1;
  reply_error(w, task, req, code, msg, len);
}

/* The nres values on top of c's thread as its results; values that cannot
 * be sent make it an error result with the codec's message. */
static void reply_results(wcall *c, int nres) {
  worker *w = c->lua->w;
  wire_wr m;
  wire_wr_init(&m);
  /* The results are encoded straight into the frame: CALL_RESULT with no
   * data first, then the data behind its last field (data's length),
   * which is patched once known. */
  wire_put_call_result(&m, &(wire_msg_call_result){.task = c->task, .status = 0});
  size_t at = m.len - 4;
  int rc = closure_encode_values(c->co, -nres, nres, "result", &m);
  if (rc < 0) {
    wire_wr_free(&m);
    reply_errorf(w, c->task, c->req, rc,
                 "the scheduled function's results cannot be sent back: %s", err_msg());
    return;
  }
  le_put(m.buf + at, m.len - at - 4, 4);
  w->send(w->ud, &m, WIRE_CALL_RESULT, c->req);
}

/* lua_pcall'ed with [1] = an error object, [2] = the thread it stopped:
 * the message (__tostring honoured) followed by the thread's traceback. */
static int p_traceback(lua_State *L) {
  lua_State *co = lua_touserdata(L, 2);
  const char *msg = lua_tostring(L, 1);
  if (!msg && luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING)
    msg = lua_tostring(L, -1);
  if (!msg) msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  luaL_traceback(L, co, msg, 0);
  return 1;
}

/* After a failed resume: the error on top of c's thread, with its
 * traceback (the thread's frames stay until it is reset). */
static void reply_lua_error(wcall *c) {
  lua_State *L = c->lua->L;
  lua_pushcfunction(L, p_traceback);
  lua_xmove(c->co, L, 1);
  lua_pushlightuserdata(L, c->co);
  size_t len = 0;
  const char *text = NULL;
  if (lua_pcall(L, 2, 1, 0) == LUA_OK) text = lua_tolstring(L, -1, &len);
  if (!text) text = "(the error message could not be made)", len = strlen(text);
  reply_error(c->lua->w, c->task, c->req, DRV_EINVAL, text, len);
  lua_settop(L, 0);
}

/* ============================== calls ==================================== */

static void free_call(wcall *c) {
  if (c->timer) uv_close((uv_handle_t *)c->timer, util_free_handle);
  c->timer = NULL;
  tensor_free(c->bx);
  tensor_free(c->by);
  c->bx = c->by = NULL;
}

/* Back to the pool (or gone, past POOL_MAX), once nothing refers to it. */
static void recycle(wcall *c) {
  wlua *l = c->lua;
  if (l->closed) return; /* wlua_free takes everything */
  if (l->npool >= POOL_MAX) {
    for (int i = 0; i < l->nall; i++)
      if (l->all[i] == c) {
        l->all[i] = l->all[--l->nall];
        break;
      }
    luaL_unref(l->L, LUA_REGISTRYINDEX, c->ref);
    free_call(c);
    free(c);
    return;
  }
  c->next = l->pool;
  l->pool = c;
  l->npool++;
}

/* The call is over (its reply sent): its thread is cleaned for the next. */
static void end_call(wcall *c) {
  if (c->timer && uv_is_active((uv_handle_t *)c->timer)) {
    uv_timer_stop(c->timer);
    c->outstanding--;
  }
  if (lua_status(c->co) != LUA_OK) lua_resetthread(c->co); /* after an error or a yield */
  lua_settop(c->co, 0);
  tensor_free(c->bx);
  tensor_free(c->by);
  c->bx = c->by = NULL;
  c->state = C_IDLE;
  if (c->outstanding == 0) recycle(c);
  worker__call_over(c->lua->w);
}

/* lua_pcall'ed (memory errors must not escape): a new thread and its
 * registry reference. */
static int p_newthread(lua_State *L) {
  lua_State *co = lua_newthread(L);
  lua_pushinteger(L, luaL_ref(L, LUA_REGISTRYINDEX));
  lua_pushlightuserdata(L, co);
  return 2;
}

static wcall *new_call(wlua *l) {
  if (l->pool) {
    wcall *c = l->pool;
    l->pool = c->next;
    l->npool--;
    return c;
  }
  if (util_grow(&l->all, &l->capall, (size_t)l->nall + 1, sizeof *l->all, 16) < 0) return NULL;
  wcall *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  lua_pushcfunction(l->L, p_newthread);
  if (lua_pcall(l->L, 0, 2, 0) != LUA_OK) {
    lua_settop(l->L, 0);
    free(c);
    return NULL;
  }
  c->lua = l;
  c->ref = (int)lua_tointeger(l->L, -2);
  c->co = lua_touserdata(l->L, -1);
  lua_settop(l->L, 0);
  *(wcall **)lua_getextraspace(c->co) = c; /* how the methods find their call */
  l->all[l->nall++] = c;
  return c;
}

/* Resumes c's thread with nargs values on it, and answers the call if it
 * is over. */
static void resume(wcall *c, int nargs) {
  wlua *l = c->lua;
  int nres;
  c->state = C_RUN;
  l->busy++;
  int st = lua_resume(c->co, l->L, nargs, &nres);
  l->busy--;
  if (st == LUA_YIELD && c->state != C_RUN) return; /* waits for a job or a timer */
  if (st == LUA_YIELD)
    reply_errorf(l->w, c->task, c->req, DRV_EINVAL, "%s",
                 "a scheduled function cannot yield to the worker (coroutine.yield outside "
                 "a coroutine of its own)");
  else if (st == LUA_OK)
    reply_results(c, nres);
  else
    reply_lua_error(c);
  end_call(c);
}

/* The call's job (or timer) is over: resume it now, or once Lua is idle. */
static void make_ready(wcall *c) {
  wlua *l = c->lua;
  c->state = C_READY;
  c->next = NULL;
  if (l->ready_tail)
    l->ready_tail->next = c;
  else
    l->ready = c;
  l->ready_tail = c;
  if (!l->busy) run_ready(l);
}

static void run_ready(wlua *l) {
  while (l->ready && !l->busy && !l->closed && !l->w->closed) {
    wcall *c = l->ready;
    l->ready = c->next;
    if (!l->ready) l->ready_tail = NULL;
    resume(c, 0);
  }
}

/* A job or timer of c is over; false when c no longer waits for it (the
 * call ended meanwhile: it is recycled once nothing is outstanding). */
static bool outcome_wanted(wcall *c) {
  c->outstanding--;
  if (c->state == C_WAIT) return true;
  if (c->state == C_IDLE && c->outstanding == 0) recycle(c);
  return false;
}

static void on_job_done(job *j) {
  wcall *c = j->ud;
  if (!outcome_wanted(c)) return;
  c->rc = j->rc;
  snprintf(c->msg, sizeof c->msg, "%s", j->msg);
  c->loss = j->loss;
  c->examples = j->examples;
  c->correct = j->correct;
  tensor_free(c->bx);
  tensor_free(c->by);
  c->bx = j->bx;
  c->by = j->by;
  j->bx = j->by = NULL;
  make_ready(c);
}

static void on_wake(uv_timer_t *t) {
  wcall *c = t->data;
  if (!outcome_wanted(c)) return;
  c->rc = 0;
  make_ready(c);
}

/* ============================== the `w` object =========================== */

/* The call whose thread L is, for `what`; raises where it cannot wait. */
static wcall *waiting_call(lua_State *L, const char *what) {
  wcall *c = *(wcall **)lua_getextraspace(L);
  if (!c)
    luaL_error(L, "%s: call it from the scheduled function itself, not from a coroutine it "
                  "created", what);
  if (!lua_isyieldable(L))
    luaL_error(L, "%s: cannot wait here, inside a C function that Lua cannot suspend "
                  "(a table.sort comparator, a metamethod, string.gsub's callback...); "
                  "call it from the scheduled function's own code", what);
  return c;
}

/* Runs in c's thread once its job is over: the method's results. */
static int k_method(lua_State *L, int status, lua_KContext ctx) {
  (void)status;
  const method *m = (const method *)ctx;
  wcall *c = *(wcall **)lua_getextraspace(L);
  if (c->state != C_RUN)
    return luaL_error(L, "%s: resumed before it was over (the scheduled function's coroutine "
                         "must not be resumed by the function itself)", m->name);
  if (c->rc < 0) return luaL_error(L, "%s: %s", m->name, c->msg);
  switch (m->results) {
  case R_LOSS:
    lua_pushnumber(L, c->loss);
    lua_pushinteger(L, c->examples);
    if (c->correct >= 0)
      lua_pushinteger(L, c->correct);
    else
      lua_pushnil(L);
    return 3;
  case R_BATCH:
    ltensor_push(L, c->bx);
    c->bx = NULL;
    ltensor_push(L, c->by);
    c->by = NULL;
    return 2;
  }
  return 0;
}

static lworker *check_w(lua_State *L) { return luaL_checkudata(L, 1, WORKER_MT); }

/* A batch of the caller's for w:train_step(x, y [, ids]): x, y (and ids)
 * copied; bx NULL when no x was given. Raises on a mismatch. */
typedef struct given_batch {
  tensor *bx, *by;
  data_sparse sp;
} given_batch;

static void given_free(given_batch *b) {
  tensor_free(b->bx), tensor_free(b->by);
  data_sparse_free(&b->sp);
}

/* The ids userdata: a batch's ids, as w:next_batch gives them. */
typedef struct lids {
  data_sparse sp; /* owned */
  int64_t rows;
} lids;

static void given(lua_State *L, const method *m, given_batch *b) {
  *b = (given_batch){0};
  if (lua_isnoneornil(L, 2)) return;
  const tensor *x = ltensor_check(L, 2), *y = ltensor_check(L, 3);
  const lids *ids = lua_isnoneornil(L, 4) ? NULL : luaL_checkudata(L, 4, IDS_MT);
  if (x->ndim < 2 || y->ndim < 1 || y->ndim > 2 || x->shape[0] != y->shape[0] || x->shape[0] < 1)
    luaL_error(L, "%s: x must be [n, ...] and y [n] or [n, k], n >= 1", m->name);
  if (ids && ids->rows != x->shape[0])
    luaL_error(L, "%s: ids of %d rows for x of %d: pass the ids w:next_batch gave with x",
               m->name, (int)ids->rows, (int)x->shape[0]);
  b->bx = tensor_clone(x), b->by = tensor_clone(y);
  if (!b->bx || !b->by || (ids && worker__sparse_slice(&b->sp, &ids->sp, 0, ids->rows) < 0)) {
    given_free(b);
    luaL_error(L, "%s: out of memory", m->name);
  }
}

static int submit(lua_State *L, const method *m) {
  worker *w = check_w(L)->w;
  wcall *c = waiting_call(L, m->name);
  given_batch b = {0};
  if (m == &M_TRAIN) given(L, m, &b); /* w:train_step(x, y [, ids]) */
  c->state = C_WAIT; /* before: the job may end inside worker_submit */
  c->outstanding++;
  int rc = b.bx ? worker_submit_batch(w, m->phases, b.bx, b.by, &b.sp, on_job_done, c)
                : worker_submit(w, m->phases, on_job_done, c);
  if (rc < 0) {
    c->state = C_RUN;
    c->outstanding--;
    return luaL_error(L, "%s: %s", m->name, err_msg());
  }
  return lua_yieldk(L, 0, (lua_KContext)m, k_method);
}

/* ============================== the input queue ========================= */
/* w:next_batch(n), w:should_stop(), w:terminate(): TensorFlowOnSpark's
 * DataFeed over the batches c:feed sends (worker_feed.c). */

/* Whether the feed this call reads is over: a FEED_END came since it
 * started (a feed that ended before is not its feed: a function
 * scheduled before c:feed reads the next one). */
static bool feed_over(lua_State *L, const worker *w) {
  const wcall *c = *(wcall **)lua_getextraspace(L);
  return c ? w->feed_ends > c->feed_ends0 : w->feed_ended;
}

static int ids_gc(lua_State *L) {
  data_sparse_free(&((lids *)luaL_checkudata(L, 1, IDS_MT))->sp);
  return 0;
}

static int ids_len(lua_State *L) {
  lua_pushinteger(L, ((lids *)luaL_checkudata(L, 1, IDS_MT))->rows);
  return 1;
}

/* ids:row(i) -> ids, vals: row i's ids (and weights, when weighted) as lists. */
static int ids_row(lua_State *L) {
  const lids *u = luaL_checkudata(L, 1, IDS_MT);
  lua_Integer i = luaL_checkinteger(L, 2);
  luaL_argcheck(L, i >= 1 && i <= u->rows, 2, "row outside the batch");
  int64_t a = u->sp.ptr[i - 1], m = u->sp.ptr[i] - a;
  for (int v = 0; v < 1 + u->sp.weighted; v++) {
    lua_createtable(L, (int)m, 0);
    for (int64_t k = 0; k < m; k++) {
      if (v) lua_pushnumber(L, u->sp.vals[a + k]);
      else lua_pushinteger(L, (lua_Integer)u->sp.ids[a + k]);
      lua_rawseti(L, -2, (lua_Integer)k + 1);
    }
  }
  return 1 + u->sp.weighted;
}

/* ids.rows, ids.fields (0: any count per row), ids.weighted, ids.bound. */
static int ids_index(lua_State *L) {
  const lids *u = luaL_checkudata(L, 1, IDS_MT);
  const char *k = luaL_checkstring(L, 2);
  if (strcmp(k, "row") == 0) lua_pushcfunction(L, ids_row);
  else if (strcmp(k, "rows") == 0) lua_pushinteger(L, u->rows);
  else if (strcmp(k, "fields") == 0) lua_pushinteger(L, u->sp.fields);
  else if (strcmp(k, "weighted") == 0) lua_pushboolean(L, u->sp.weighted);
  else if (strcmp(k, "bound") == 0) lua_pushinteger(L, (lua_Integer)u->sp.bound);
  else lua_pushnil(L);
  return 1;
}

static int ids_tostring(lua_State *L) {
  const lids *u = luaL_checkudata(L, 1, IDS_MT);
  lua_pushfstring(L, "drover.BatchIds (%d rows, %d ids)", (int)u->rows, (int)u->sp.ptr[u->rows]);
  return 1;
}

/* sp (taken) as an ids userdata on the stack. */
static void ids_push(lua_State *L, data_sparse *sp, int64_t rows) {
  lids *u = lua_newuserdatauv(L, sizeof *u, 0);
  *u = (lids){.sp = *sp, .rows = rows};
  *sp = (data_sparse){0};
  if (luaL_newmetatable(L, IDS_MT)) {
    static const luaL_Reg meta[] = {{"__gc", ids_gc},         {"__len", ids_len},
                                    {"__index", ids_index},   {"__tostring", ids_tostring},
                                    {NULL, NULL}};
    luaL_setfuncs(L, meta, 0);
  }
  lua_setmetatable(L, -2);
}

/* Up to n rows now: 3 results (x, y and their ids, nil when the batches
 * had none), 1 (nil: the feed is over), or -1 when none is there yet. */
static int take_rows(lua_State *L, worker *w, int64_t n) {
  tensor *x, *y;
  data_sparse sp;
  int rc = worker__fed_take(w, n, &x, &y, &sp);
  if (rc < 0) return luaL_error(L, "w:next_batch: %s", err_msg());
  if (rc == 1) {
    int64_t rows = x->shape[0];
    ltensor_push(L, x);
    ltensor_push(L, y);
    if (sp.bound) ids_push(L, &sp, rows);
    else lua_pushnil(L);
    return 3;
  }
  if (feed_over(L, w)) {
    lua_pushnil(L);
    return 1;
  }
  return -1;
}

static int wait_fed(lua_State *L, wcall *c, lua_KContext n);

static int k_next_batch(lua_State *L, int status, lua_KContext ctx) {
  (void)status;
  wcall *c = *(wcall **)lua_getextraspace(L);
  int r = take_rows(L, c->lua->w, (int64_t)ctx);
  return r >= 0 ? r : wait_fed(L, c, ctx);
}

static int wait_fed(lua_State *L, wcall *c, lua_KContext n) {
  wlua *l = c->lua;
  c->state = C_WAIT;
  c->outstanding++;
  c->fed_next = l->fed_waiting;
  l->fed_waiting = c;
  return lua_yieldk(L, 0, n, k_next_batch);
}

static int l_next_batch(lua_State *L) {
  worker *w = check_w(L)->w;
  lua_Integer n = luaL_checkinteger(L, 2);
  luaL_argcheck(L, n >= 1 && n <= ((lua_Integer)1 << 30), 2, "n must be between 1 and 2^30");
  int r = take_rows(L, w, (int64_t)n);
  if (r >= 0) return r;
  return wait_fed(L, waiting_call(L, "w:next_batch"), (lua_KContext)n);
}

static int l_should_stop(lua_State *L) {
  worker *w = check_w(L)->w;
  lua_pushboolean(L, feed_over(L, w) && w->nfed == 0);
  return 1;
}

static int l_terminate(lua_State *L) {
  worker__fed_terminate(check_w(L)->w);
  return 0;
}

/* worker_calls.fed: the input queue changed: every call waiting in
 * w:next_batch looks again. */
static void fed_changed(worker *w) {
  wlua *l = w->lua;
  if (!l || l->closed) return;
  wcall *c = l->fed_waiting;
  l->fed_waiting = NULL;
  while (c) {
    wcall *next = c->fed_next;
    c->fed_next = NULL;
    if (outcome_wanted(c)) {
      c->rc = 0;
      make_ready(c);
    }
    c = next;
  }
}

static int l_train_step(lua_State *L) { return submit(L, &M_TRAIN); }
static int l_pull(lua_State *L) { return submit(L, &M_PULL); }
static int l_compute(lua_State *L) { return submit(L, &M_COMPUTE); }
static int l_push(lua_State *L) { return submit(L, &M_PUSH); }
static int l_batch(lua_State *L) { return submit(L, &M_BATCH); }

/* drover.sleep(seconds) in a scheduled function: yields to a timer. */
static int l_sleep(lua_State *L) {
  double secs = luaL_checknumber(L, 1);
  wcall *c = waiting_call(L, M_SLEEP.name);
  wlua *l = c->lua;
  if (!c->timer) {
    if (!(c->timer = malloc(sizeof *c->timer))) return luaL_error(L, "out of memory");
    uv_timer_init(l->w->loop, c->timer);
    c->timer->data = c;
  }
  c->state = C_WAIT;
  c->outstanding++;
  uv_update_time(l->w->loop); /* cached since the loop's last turn (drover.sleep's reason) */
  uv_timer_start(c->timer, on_wake, secs > 0 ? (uint64_t)(secs * 1000) : 0, 0);
  return lua_yieldk(L, 0, (lua_KContext)&M_SLEEP, k_method);
}

static int w_index(lua_State *L) {
  worker *w = check_w(L)->w;
  const char *k = lua_tostring(L, 2);
  if (k && lua_type(L, 2) == LUA_TSTRING) {
    if (strcmp(k, "index") == 0) {
      lua_pushinteger(L, w->index);
      return 1;
    }
    if (strcmp(k, "role") == 0) {
      lua_pushstring(L, wire_role_name(w->role));
      return 1;
    }
    if (strcmp(k, "name") == 0) {
      lua_pushfstring(L, "%s:%d", wire_role_name(w->role), w->index);
      return 1;
    }
    if (strcmp(k, "steps") == 0) {
      lua_pushinteger(L, (lua_Integer)w->steps);
      return 1;
    }
  }
  luaL_getmetafield(L, 1, "__methods");
  lua_pushvalue(L, 2);
  lua_rawget(L, -2);
  return 1;
}

static int w_tostring(lua_State *L) {
  worker *w = check_w(L)->w;
  lua_pushfstring(L, "drover.Worker (%s:%d)", wire_role_name(w->role), w->index);
  return 1;
}

static const luaL_Reg w_methods[] = {{"train_step", l_train_step}, {"pull", l_pull},
                                     {"compute", l_compute},       {"push", l_push},
                                     {"batch", l_batch},           {"next_batch", l_next_batch},
                                     {"should_stop", l_should_stop}, {"terminate", l_terminate},
                                     {NULL, NULL}};

static const luaL_Reg w_meta[] = {{"__index", w_index}, {"__tostring", w_tostring}, {NULL, NULL}};

/* lua_pcall'ed with [1] = the wlua: the metatable, the `w` userdata (its
 * reference in l->wref) and drover.sleep. */
static int p_open(lua_State *L) {
  wlua *l = lua_touserdata(L, 1);
  ldrv_createmeta(L, WORKER_MT, w_meta, w_methods);
  lworker *u = lua_newuserdatauv(L, sizeof *u, 0);
  u->w = l->w;
  luaL_setmetatable(L, WORKER_MT);
  l->wref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_getglobal(L, "drover");
  lua_pushcfunction(L, l_sleep);
  lua_setfield(L, -2, "sleep");
  return 0;
}

static int make_lua(worker *w) {
  wlua *l = calloc(1, sizeof *l);
  if (!l) return err_set(DRV_ENOMEM, "out of memory");
  l->w = w;
  if (!(l->L = luaL_newstate())) {
    free(l);
    return err_set(DRV_ENOMEM, "cannot make a Lua state: out of memory");
  }
  *(wcall **)lua_getextraspace(l->L) = NULL; /* new threads copy it: not a call's */
  int rc = drover_lua_init(l->L);
  if (rc == 0) {
    drover_lua_set_loop(l->L, w->loop);
    lua_pushcfunction(l->L, p_open);
    lua_pushlightuserdata(l->L, l);
    if (lua_pcall(l->L, 1, 0, 0) != LUA_OK)
      rc = err_set(DRV_ENOMEM, "cannot make the worker object: %s", lua_tostring(l->L, -1));
  }
  if (rc < 0) {
    lua_close(l->L);
    free(l);
    return rc;
  }
  lua_settop(l->L, 0);
  w->lua = l;
  log_info("Lua state ready for scheduled functions");
  return 0;
}

/* ============================== CALL ===================================== */

static int call(worker *w, uint32_t req, const uint8_t *payload, size_t len) {
  if (w->role == ROLE_EVALUATOR) return err_set(DRV_EINVAL, "CALL sent to an evaluator");
  wire_msg_call m;
  int rc = wire_get_call(payload, len, &m);
  if (rc < 0) return rc;
  uint64_t task = m.task;
  const uint8_t *p = m.closure.p;
  uint32_t n = m.closure.len;
  if (!w->lua && make_lua(w) < 0) {
    reply_errorf(w, task, req, DRV_ENOMEM, "%s", err_msg());
    return 0;
  }
  wlua *l = w->lua;
  wcall *c = new_call(l);
  if (!c) {
    reply_errorf(w, task, req, DRV_ENOMEM, "%s", "out of memory");
    return 0;
  }
  c->task = task;
  c->req = req;
  c->state = C_RUN;
  c->feed_ends0 = w->feed_ends;
  int nargs = closure_decode(l->L, p, n);
  if (nargs < 0 || !lua_checkstack(c->co, nargs + 2 + LUA_MINSTACK)) {
    lua_settop(l->L, 0);
    reply_errorf(w, task, req, DRV_EPARSE, "cannot run the scheduled function: %s",
                 nargs < 0 ? err_msg() : "Lua stack overflow");
    end_call(c);
    return 0;
  }
  lua_rawgeti(l->L, LUA_REGISTRYINDEX, l->wref);
  lua_rotate(l->L, -nargs - 1, 1); /* function, w, arguments */
  lua_xmove(l->L, c->co, nargs + 2);
  resume(c, nargs + 1);
  run_ready(l);
  return 0;
}

/* ============================== lifetime ================================= */

static void wlua_close(wlua *l) {
  if (!l || l->closed) return;
  l->closed = true;
  for (int i = 0; i < l->nall; i++) free_call(l->all[i]); /* timers closed */
}

static void wlua_free(wlua *l) {
  if (!l) return;
  wlua_close(l);
  lua_close(l->L); /* collects the threads, suspended or not */
  for (int i = 0; i < l->nall; i++) free(l->all[i]);
  free(l->all);
  free(l);
}

static void close_calls(worker *w) { wlua_close(w->lua); }
static void free_calls(worker *w) { wlua_free(w->lua); }

/* Calls not over: running, waiting in a w method or drover.sleep, ready. */
static int inflight(const worker *w) {
  const wlua *l = w->lua;
  int n = 0;
  for (int i = 0; l && i < l->nall; i++) n += l->all[i]->state != C_IDLE;
  return n;
}

const worker_calls lworker_calls = {.call = call, .close = close_calls, .free = free_calls,
                                    .fed = fed_changed, .inflight = inflight};
