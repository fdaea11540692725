/* node_fake.c - the fake coordinator of the node tests (node_fake.h).
 *
 * Frames from every peer are copied into a per-peer queue by the conn
 * callbacks; the helpers pump the loop (bounded by a timer) until what they
 * wait for is there. If a case fails midway, its children are not left
 * behind: their coordinator connection closes with the test process, and a
 * node exits when it loses its coordinator.
 */
#include "node_fake.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "proto/keyring.h"
#include "luabind/l_worker.h"
#include "cluster/node.h"
#include "proto/nodeinfo.h"
#include "proto/wire_msgs.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#define CHILD_LEAKED() (__lsan_do_recoverable_leak_check() != 0)
#else
#define CHILD_LEAKED() 0
#endif

static fake *g_fake; /* one per case (each case is its own process) */

static void peer_frame(conn *c, const wire_header *h, const uint8_t *p) {
  peer *pe = conn_ud(c);
  fk_frame *f = calloc(1, sizeof *f);
  CHECK(f != NULL);
  f->h = *h;
  f->p = malloc(h->len + 1);
  CHECK(f->p != NULL);
  memcpy(f->p, p, h->len);
  if (pe->tail)
    pe->tail->next = f;
  else
    pe->head = f;
  pe->tail = f;
}

static void peer_close(conn *c, int err, const char *why) {
  peer *pe = conn_ud(c);
  if (!pe) return; /* a server conn that never authenticated */
  pe->c = NULL;
  pe->closed = true;
  pe->err = err;
  snprintf(pe->why, sizeof pe->why, "%s", why ? why : "");
}

static void server_ready(conn *c) {
  fake *f = g_fake;
  peer *pe = calloc(1, sizeof *pe);
  CHECK(pe != NULL && f->naccepted < 8);
  pe->c = c;
  conn_set_ud(c, pe);
  f->accepted[f->naccepted++] = pe;
}

static const conn_cbs server_cbs = {server_ready, peer_frame, peer_close};
static const conn_cbs client_cbs = {NULL, peer_frame, peer_close};

static void on_timer(uv_timer_t *t) { ((fake *)t->data)->timed_out = true; }

bool nf_pump(fake *f, bool (*cond)(void *), void *arg, int ms) {
  f->timed_out = false;
  uv_timer_start(&f->timer, on_timer, (uint64_t)ms, 0);
  while (!cond(arg) && !f->timed_out) uv_run(&f->loop, UV_RUN_ONCE);
  uv_timer_stop(&f->timer);
  return cond(arg);
}

static bool never(void *arg) {
  (void)arg;
  return false;
}

void nf_pump_for(fake *f, int ms) { nf_pump(f, never, NULL, ms); }

void nf_fake_start(fake *f) {
  memset(f, 0, sizeof *f);
  g_fake = f;
  CHECK_OK(auth_init());
  CHECK_OK(auth_secret_generate(&f->secret));
  char cwd[1024], path[1100];
  CHECK(getcwd(cwd, sizeof cwd) != NULL);
  snprintf(path, sizeof path, "%s/secret", cwd);
  CHECK_OK(auth_secret_save(&f->secret, path));
  CHECK(setenv("DROVER_SECRET_FILE", path, 1) == 0);
  CHECK(uv_loop_init(&f->loop) == 0);
  uv_timer_init(&f->loop, &f->timer);
  f->timer.data = f;
  f->sopts = (conn_opts){.secret = &f->secret, .derive_node_keys = true, .cbs = &server_cbs};
  CHECK_OK(conn_listen(&f->loop, "127.0.0.1", 0, &f->sopts, &f->srv, &f->port));
}

static void free_frames(peer *pe) {
  while (pe->head) {
    fk_frame *fr = pe->head;
    pe->head = fr->next;
    free(fr->p);
    free(fr);
  }
  pe->tail = NULL;
}

/* Closes everything the fake holds and frees it (peers included). */
void nf_fake_stop(fake *f, peer **dialed, int ndialed) {
  for (int i = 0; i < f->naccepted; i++)
    if (f->accepted[i]->c) conn_close(f->accepted[i]->c, "test over");
  for (int i = 0; i < ndialed; i++)
    if (dialed[i]->c) conn_close(dialed[i]->c, "test over");
  conn_server_close(f->srv);
  uv_close((uv_handle_t *)&f->timer, NULL);
  uv_run(&f->loop, UV_RUN_DEFAULT);
  CHECK(uv_loop_close(&f->loop) == 0);
  for (int i = 0; i < f->naccepted; i++) {
    free_frames(f->accepted[i]);
    free(f->accepted[i]);
  }
  for (int i = 0; i < ndialed; i++) {
    free_frames(dialed[i]);
    free(dialed[i]);
  }
}

static bool has_accepted(void *arg) {
  int *want = arg;
  return g_fake->naccepted >= *want;
}

/* Waits for `n` node connections in total. */
void nf_accept_n(fake *f, int n) {
  if (!nf_pump(f, has_accepted, &n, WAIT_MS))
    harness_fail(__FILE__, __LINE__, "only %d of %d nodes connected", f->naccepted, n);
}

static bool peer_ready(void *arg) {
  peer *pe = arg;
  return pe->closed || (pe->c && conn_is_ready(pe->c));
}

/* Dials a ps data port like a worker does; returns the authenticated peer. */
peer *nf_dial(fake *f, uint32_t ps, int port) {
  /* As the coordinator: a ps takes every client request from it. */
  return nf_dial_as(f, ps, port, AUTH_ROLE_COORD, 0);
}

peer *nf_dial_as(fake *f, uint32_t ps, int port, int role, uint32_t index) {
  peer *pe = calloc(1, sizeof *pe);
  CHECK(pe != NULL);
  auth_secret root; /* ps `ps`'s, from which it checks our key */
  auth_ps_root(&f->secret, ps, &root);
  auth_node_key(&root, role, index, &pe->key);
  conn_opts o = {.secret = &pe->key, .who = AUTH_WHO_NODE, .role = (uint8_t)role,
                 .index = index, .cbs = &client_cbs, .ud = pe};
  CHECK_OK(conn_connect(&f->loop, "127.0.0.1", port, &o, &pe->c));
  CHECK(nf_pump(f, peer_ready, pe, WAIT_MS));
  CHECK(!pe->closed);
  return pe;
}

static bool peer_has_frame(void *arg) {
  peer *pe = arg;
  return pe->head || pe->closed;
}

fk_frame *nf_expect(fake *f, peer *pe, uint8_t type, const char *file, int line) {
  for (;;) {
    if (!nf_pump(f, peer_has_frame, pe, WAIT_MS))
      harness_fail(file, line, "no %s within %d ms", wire_type_name(type), WAIT_MS);
    if (!pe->head)
      harness_fail(file, line, "connection closed while waiting for %s: %s",
                   wire_type_name(type), pe->why);
    fk_frame *fr = pe->head;
    pe->head = fr->next;
    if (!pe->head) pe->tail = NULL;
    bool unasked = fr->h.type == WIRE_HEARTBEAT || fr->h.type == WIRE_LINKS; /* a node's own */
    if (unasked && fr->h.type != type) {
      free(fr->p);
      free(fr);
      continue;
    }
    if (fr->h.type != type)
      harness_fail(file, line, "got %s while waiting for %s", wire_type_name(fr->h.type),
                   wire_type_name(type));
    return fr;
  }
}

void nf_frame_free(fk_frame *fr) {
  free(fr->p);
  free(fr);
}

void nf_send_wr(peer *pe, wire_wr *w, uint8_t type, uint32_t req) {
  CHECK(pe->c != NULL);
  CHECK_OK(conn_send_wr(pe->c, w, type, req));
}

bool nf_peer_closed(void *arg) { return ((peer *)arg)->closed; }

/* ============================== children ================================= */

/* The node's key file (keyring.h), as the coordinator writes it, but with
 * keys at every ps 0..NF_MAX_NODES-1 (a ps: at every other ps), since the
 * fake pairs ps replicas as each test likes, and at the fake as a ps
 * (NF_FAKE_PS). */
static void write_key_file(fake *f, int role, int index) {
  keyring k = {.ps = calloc(NF_MAX_NODES + 1, sizeof *k.ps)};
  CHECK(k.ps != NULL);
  auth_node_key(&f->secret, role, (uint32_t)index, &k.coord);
  if (role == ROLE_PS) {
    k.has_root = true;
    auth_ps_root(&f->secret, (uint32_t)index, &k.root);
  }
  for (uint32_t p = 0; p < NF_MAX_NODES; p++) {
    if (role == ROLE_PS && p == (uint32_t)index) continue;
    auth_secret root;
    auth_ps_root(&f->secret, p, &root);
    k.ps[k.nps].ps = p;
    auth_node_key(&root, role, (uint32_t)index, &k.ps[k.nps++].key);
  }
  k.ps[k.nps].ps = NF_FAKE_PS;
  auth_node_key(&f->secret, role, (uint32_t)index, &k.ps[k.nps++].key);
  char path[1100];
  snprintf(path, sizeof path, "%s.%s-%d.%d", getenv("DROVER_SECRET_FILE"), wire_role_name(role),
           index, (int)getpid());
  CHECK_OK(keyring_write(&k, path, false));
  keyring_free(&k);
  CHECK(setenv("DROVER_SECRET_FILE", path, 1) == 0);
}

pid_t nf_spawn_node(fake *f, int role, int index, uint32_t hb_ms, uint32_t timeout_ms) {
  fflush(NULL);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    write_key_file(f, role, index);
    node_opts o = {.coord_host = "127.0.0.1", .coord_port = f->port, .role = role,
                   .index = index, .bind_host = "127.0.0.1", .cpus = 1,
                   .heartbeat_ms = hb_ms, .timeout_ms = timeout_ms,
                   .calls = &lworker_calls};
    int status = node_main(&o);
    fflush(NULL);
    _exit(CHILD_LEAKED() ? LEAKED : status);
  }
  return pid;
}

double nf_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int nf_reap(fake *f, pid_t pid, int ms) {
  double end = nf_now_ms() + ms;
  int st;
  for (;;) {
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (nf_now_ms() > end) break;
    nf_pump_for(f, 10);
  }
  kill(pid, SIGKILL);
  waitpid(pid, &st, 0);
  return -1;
}

/* ============================== protocol helpers ========================= */

void nf_read_register(fake *f, peer *pe, reg *r) {
  fk_frame *fr = NF_EXPECT(f, pe, WIRE_REGISTER);
  wire_msg_register m;
  CHECK_OK(wire_get_register(fr->p, fr->h.len, &m));
  *r = (reg){0};
  r->role = m.role;
  r->index = (int)m.index;
  r->pid = m.pid;
  CHECK_OK(wire_str_copy(m.host, r->host, sizeof r->host));
  r->port = m.port;
  node_info ni;
  CHECK_OK(nodeinfo_from_msg(&m, &ni));
  r->cpus = ni.threads;
  r->memory = ni.memory;
  r->affinity = ni.affinity;
  snprintf(r->hostname, sizeof r->hostname, "%s", ni.hostname);
  r->ctl = pe;
  nf_frame_free(fr);
}

static void put_reg(wire_wr *w, void *ud, uint32_t k) {
  const reg *r = &((const reg *)ud)[k];
  wire_put_item_spec_node(w, &(wire_item_spec_node){(uint8_t)r->role, (uint32_t)r->index,
                                                    WIRE_STR(r->host), (uint16_t)r->port,
                                                    r->fake ? NF_FAKE_PS : (uint32_t)r->index});
}

static uint8_t registered_transport; /* the next nf_register_all's, then auto */

void nf_registered_transport(uint8_t transport) { registered_transport = transport; }

/* Accepts n nodes, reads their REGISTERs, answers REGISTERED ok, and
 * sends every one the SPEC of all of them. regs[] in arrival order. */
void nf_register_all(fake *f, reg *regs, int n) {
  uint8_t transport = registered_transport;
  registered_transport = WIRE_TRANSPORT_AUTO;
  nf_accept_n(f, n);
  for (int i = 0; i < n; i++) nf_read_register(f, f->accepted[i], &regs[i]);
  wire_wr w;
  for (int i = 0; i < n; i++) {
    wire_wr_init(&w);
    wire_put_registered(&w, &(wire_msg_registered){.ok = true, .transport = transport});
    nf_send_wr(regs[i].ctl, &w, WIRE_REGISTERED, 0);
  }
  for (int i = 0; i < n; i++) nf_send_spec(regs[i].ctl, regs, n);
}

void nf_send_spec(peer *ctl, reg *regs, int n) {
  wire_wr w;
  wire_wr_init(&w);
  wire_put_spec(&w, &(wire_msg_spec){{(uint32_t)n, .put = put_reg, .ud = regs}, false});
  nf_send_wr(ctl, &w, WIRE_SPEC, 0);
}

reg *nf_find_reg(reg *regs, int n, int role, int index) {
  for (int i = 0; i < n; i++)
    if (regs[i].role == role && regs[i].index == index) return &regs[i];
  harness_fail(__FILE__, __LINE__, "%s:%d did not register", wire_role_name(role), index);
}

void nf_send_shutdown(peer *ctl) {
  wire_wr w;
  wire_wr_init(&w);
  wire_put_shutdown(&w, &(wire_msg_shutdown){2000});
  nf_send_wr(ctl, &w, WIRE_SHUTDOWN, 0);
}

void nf_var_init(fake *f, peer *pe, uint32_t var, uint64_t row0, const optim_cfg *cfg,
                 const tensor *value, uint32_t req) {
  nf_var_init_mode(f, pe, var, row0, false, 0, 0, cfg, value, req);
}

void nf_var_init_mode(fake *f, peer *pe, uint32_t var, uint64_t row0, bool sync,
                      uint32_t replicas, uint64_t target, const optim_cfg *cfg,
                      const tensor *value, uint32_t req) {
  wire_wr w;
  wire_wr_init(&w);
  wire_put_var_init(&w, &(wire_msg_var_init){var, row0, sync, replicas, target, *cfg,
                                              {.t = value}});
  nf_send_wr(pe, &w, WIRE_VAR_INIT, req);
  fk_frame *fr = NF_EXPECT(f, pe, WIRE_VAR_INIT_OK);
  CHECK_INT_EQ(fr->h.req, req);
  CHECK_INT_EQ(fr->h.len, 0);
  nf_frame_free(fr);
}

static void put_var_id(wire_wr *w, void *ud, uint32_t i) {
  wire_put_item_var_id(w, &(wire_item_var_id){((const uint32_t *)ud)[i]});
}

void nf_send_pull(peer *pe, const uint32_t *vars, uint32_t n, uint32_t req) {
  nf_send_pull_v(pe, 0, vars, n, req);
}

void nf_send_pull_v(peer *pe, uint64_t min_version, const uint32_t *vars, uint32_t n,
                    uint32_t req) {
  wire_wr w;
  wire_wr_init(&w);
  wire_put_pull(&w, &(wire_msg_pull){min_version, {n, .put = put_var_id, .ud = (void *)vars}});
  nf_send_wr(pe, &w, WIRE_PULL, req);
}

static void put_var_tensor(wire_wr *w, void *ud, uint32_t i) {
  (void)i;
  wire_put_item_var_tensor(w, ud);
}

void nf_send_push1(peer *pe, uint32_t var, const tensor *grad, uint32_t req) {
  nf_send_push1_v(pe, 0, var, grad, req);
}

void nf_send_push1_v(peer *pe, uint64_t version, uint32_t var, const tensor *grad,
                     uint32_t req) {
  wire_wr w;
  wire_wr_init(&w);
  wire_item_var_tensor it = {var, {.t = grad}};
  wire_put_push(&w, &(wire_msg_push){version, {1, .put = put_var_tensor, .ud = &it}});
  nf_send_wr(pe, &w, WIRE_PUSH, req);
}

/* Reads a PULL_REPLY's tensors into out[] (new tensors), checking the ids. */
void nf_read_pull_reply(fk_frame *fr, const uint32_t *vars, uint32_t n, tensor **out) {
  nf_read_pull_reply_v(fr, vars, n, out);
}

uint64_t nf_read_pull_reply_v(fk_frame *fr, const uint32_t *vars, uint32_t n, tensor **out) {
  wire_msg_pull_reply m;
  CHECK_OK(wire_get_pull_reply(fr->p, fr->h.len, &m));
  CHECK_INT_EQ(m.vars.n, n);
  wire_rd rd = wire_items_reader(&m.vars);
  for (uint32_t i = 0; i < n; i++) {
    wire_item_var_tensor it;
    wire_get_item_var_tensor(&rd, &it);
    CHECK_INT_EQ(it.var, vars[i]);
    out[i] = tensor_new(it.value.ndim, it.value.shape);
    CHECK(out[i] != NULL);
    wire_tensor_to(&it.value, tensor_data(out[i]));
  }
  return m.version;
}

tensor *nf_pull1(fake *f, peer *pe, uint32_t var, uint32_t req) {
  tensor *t;
  nf_send_pull(pe, &var, 1, req);
  fk_frame *fr = NF_EXPECT(f, pe, WIRE_PULL_REPLY);
  CHECK_INT_EQ(fr->h.req, req);
  nf_read_pull_reply(fr, &var, 1, &t);
  nf_frame_free(fr);
  return t;
}

uint64_t nf_read_push_ok(fake *f, peer *pe, uint32_t req) {
  return nf_read_push_ok_v(f, pe, req, NULL);
}

uint64_t nf_read_push_ok_v(fake *f, peer *pe, uint32_t req, bool *applied) {
  fk_frame *fr = NF_EXPECT(f, pe, WIRE_PUSH_OK);
  CHECK_INT_EQ(fr->h.req, req);
  wire_msg_push_ok m;
  CHECK_OK(wire_get_push_ok(fr->p, fr->h.len, &m));
  if (applied) *applied = m.applied;
  nf_frame_free(fr);
  return m.step;
}

/* An ERROR frame followed by the close of that connection; returns the
 * message (static). */
const char *nf_expect_error_and_close(fake *f, peer *pe) {
  static char msg[WIRE_MAX_STR + 1];
  fk_frame *fr = NF_EXPECT(f, pe, WIRE_ERROR);
  wire_msg_error m;
  CHECK_OK(wire_get_error(fr->p, fr->h.len, &m));
  CHECK(m.code < 0);
  CHECK_OK(wire_str_copy(m.message, msg, sizeof msg));
  nf_frame_free(fr);
  CHECK(nf_pump(f, nf_peer_closed, pe, WAIT_MS));
  return msg;
}

/* ============================== a fake cluster ============================ */

void nf_cluster_up(nf_cluster *c, const nf_node *nodes, int n, uint32_t hb_ms,
                   uint32_t timeout_ms) {
  CHECK(n >= 1 && n <= NF_MAX_NODES);
  nf_fake_start(&c->f);
  c->n = n;
  c->ndialed = 0;
  /* Every child forked before the fake accepts (node_fake.h says why). */
  for (int i = 0; i < n; i++) {
    c->nodes[i] = nodes[i];
    c->pids[i] = nf_spawn_node(&c->f, nodes[i].role, nodes[i].index, hb_ms, timeout_ms);
  }
  nf_register_all(&c->f, c->regs, n);
}

reg *nf_cluster_reg(nf_cluster *c, int role, int index) {
  return nf_find_reg(c->regs, c->n, role, index);
}

peer *nf_cluster_dial(nf_cluster *c, int role, int index) {
  return nf_cluster_dial_as(c, role, index, AUTH_ROLE_COORD, 0);
}

peer *nf_cluster_dial_as(nf_cluster *c, int role, int index, int as_role, uint32_t as_index) {
  CHECK(c->ndialed < NF_MAX_DIALED);
  peer *pe = nf_dial_as(&c->f, (uint32_t)index, nf_cluster_reg(c, role, index)->port, as_role,
                        as_index);
  c->dialed[c->ndialed++] = pe;
  return pe;
}

static int node_at(const nf_cluster *c, int role, int index) {
  for (int i = 0; i < c->n; i++)
    if (c->nodes[i].role == role && c->nodes[i].index == index) return i;
  harness_fail(__FILE__, __LINE__, "%s:%d is not in the cluster", wire_role_name(role), index);
}

int nf_cluster_reap(nf_cluster *c, int role, int index, int ms) {
  int i = node_at(c, role, index);
  CHECK(c->pids[i] > 0);
  int st = nf_reap(&c->f, c->pids[i], ms);
  c->pids[i] = 0;
  return st;
}

void nf_cluster_down(nf_cluster *c) {
  for (int i = 0; i < c->n; i++)
    if (c->pids[i] > 0) nf_send_shutdown(nf_cluster_reg(c, c->nodes[i].role, c->nodes[i].index)->ctl);
  for (int i = 0; i < c->n; i++) {
    if (c->pids[i] <= 0) continue;
    int st = nf_reap(&c->f, c->pids[i], WAIT_MS);
    c->pids[i] = 0;
    if (st != 0)
      harness_fail(__FILE__, __LINE__, "%s:%d exited with %d after SHUTDOWN, not 0",
                   wire_role_name(c->nodes[i].role), c->nodes[i].index, st);
  }
  nf_fake_stop(&c->f, c->dialed, c->ndialed);
  c->ndialed = 0;
}

bool nf_same_bits(const tensor *a, const tensor *b) {
  return tensor_same_shape(a, b) &&
         memcmp(tensor_data(a), tensor_data(b), (size_t)tensor_numel(a) * sizeof(float)) == 0;
}

tensor *nf_filled(int ndim, const int64_t *shape, float base, float step) {
  tensor *t = tensor_new(ndim, shape);
  CHECK(t != NULL);
  float *d = tensor_data(t);
  for (int64_t i = 0; i < tensor_numel(t); i++) d[i] = base + step * (float)i;
  return t;
}

