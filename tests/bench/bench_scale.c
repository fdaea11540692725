/* bench_scale.c - many simulated worker nodes in one process, speaking the
 * real protocol to one coordinator (its cluster made with launcher =
 * "external"): the scale bench's nodes (tests/bench/scale.sh).
 *
 * usage: bench_scale RUNS_DIR NODES [HEARTBEAT_MS [FROM TO]]
 *
 * FROM TO: this process simulates only worker:FROM..worker:TO-1 of the
 * NODES (and ps:0 when FROM is 0); another process simulates the rest, so
 * a test can SIGKILL a few simulated nodes by pid (tests/cli/test_external.sh).
 *
 * Waits for a run in RUNS_DIR (a directory of the bench's own, holding one
 * run) to have its coordinator file, derives each worker's key from the run's
 * secret (as the coordinator does: whoever runs an external launcher's
 * nodes holds the secret), and connects NODES workers worker:0..N-1, at
 * most IN_FLIGHT handshakes at a time, and a ps:0 that serves nothing (as nodes spread over hosts would
 * arrive; the coordinator bounds waiting handshakes per address). Each
 * registers, heartbeats every HEARTBEAT_MS (500), answers a CALL with an
 * empty CALL_RESULT (a no-op closure's), and closes on SHUTDOWN. Prints
 * "registered N in S s" once every node is registered (from the first
 * connect to the last REGISTERED), and "done" once every connection is
 * closed. Raises its descriptor limit to the hard limit and says so when
 * that is too low for NODES.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "proto/auth.h"
#include "net/conn.h"
#include "base/err.h"
#include "base/log.h"
#include "proto/wire_msgs.h"

#define IN_FLIGHT 64

typedef struct sim sim;
typedef struct simnode {
  sim *s;
  int role, index;
  auth_secret key;
  conn_opts o;
  conn *c;
  bool registered, closed;
} simnode;

struct sim {
  uv_loop_t loop;
  uv_timer_t hb, poll;
  int hb_ms;
  simnode *nodes;
  int n, next, connecting, registered, closed;
  char host[64];
  int port;
  auth_secret root;
  double t0, t_reg;
  uint64_t seq, calls;
  uint32_t interval_ms; /* the coordinator's HEARTBEAT interval_ms, as a node obeys it */
  double hb_sent;
  const char *runs;
  char run_dir[1024];
};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void send_wr(simnode *nd, wire_wr *w, uint8_t type, uint32_t req) {
  if (nd->c && conn_is_ready(nd->c)) conn_send_wr(nd->c, w, type, req);
  else wire_wr_free(w);
}

static void connect_more(sim *s);

static void on_ready(conn *c) {
  simnode *nd = conn_ud(c);
  wire_wr w;
  wire_wr_init(&w);
  wire_put_register(&w, &(wire_msg_register){
      .role = (uint8_t)nd->role, .index = (uint32_t)nd->index, .pid = (uint32_t)getpid(),
      .host = WIRE_STR("127.0.0.1"), .hostname = WIRE_STR("sim"), .threads = 1, .cpus = 1,
      .gpus = WIRE_STR(""), .slurm_job = WIRE_STR(""), .slurm_step = WIRE_STR(""),
      .slurm_node = WIRE_STR("")});
  send_wr(nd, &w, WIRE_REGISTER, 0);
}

static void on_frame(conn *c, const wire_header *h, const uint8_t *p) {
  simnode *nd = conn_ud(c);
  sim *s = nd->s;
  if (h->type == WIRE_REGISTERED) {
    wire_msg_registered m;
    if (wire_get_registered(p, h->len, &m) < 0 || !m.ok) {
      fprintf(stderr, "bench_scale: worker:%d refused: %.*s\n", nd->index, (int)m.message.len,
              m.message.s);
      conn_close(c, "refused");
      return;
    }
    nd->registered = true;
    s->connecting--;
    if (++s->registered == s->n) {
      s->t_reg = now_s();
      printf("registered %d nodes in %.3f s\n", s->n, s->t_reg - s->t0);
      fflush(stdout);
    }
    connect_more(s);
  } else if (h->type == WIRE_CALL) {
    wire_msg_call m;
    if (wire_get_call(p, h->len, &m) < 0) return;
    wire_wr w;
    wire_wr_init(&w);
    wire_put_call_result(&w, &(wire_msg_call_result){.task = m.task, .status = 0});
    send_wr(nd, &w, WIRE_CALL_RESULT, h->req);
    s->calls++;
  } else if (h->type == WIRE_HEARTBEAT) {
    wire_msg_heartbeat m;
    if (wire_get_heartbeat(p, h->len, &m) == 0 && m.interval_ms != s->interval_ms) {
      s->interval_ms = m.interval_ms;
      printf("heartbeat interval %u ms\n", (unsigned)m.interval_ms);
      fflush(stdout);
    }
  } else if (h->type == WIRE_SHUTDOWN) {
    conn_close(c, "shutdown");
  }
}

static void on_close(conn *c, int err, const char *why) {
  simnode *nd = conn_ud(c);
  sim *s = nd->s;
  if (!nd->registered) s->connecting--;
  if (err && !nd->registered) fprintf(stderr, "bench_scale: worker:%d: %s\n", nd->index, why);
  nd->c = NULL;
  nd->closed = true;
  if (++s->closed == s->n) {
    uv_timer_stop(&s->hb);
    uv_close((uv_handle_t *)&s->hb, NULL);
    uv_close((uv_handle_t *)&s->poll, NULL);
  }
  connect_more(s);
}

static const conn_cbs cbs = {on_ready, on_frame, on_close};

static void connect_more(sim *s) {
  while (s->next < s->n && s->connecting < IN_FLIGHT) {
    simnode *nd = &s->nodes[s->next++];
    nd->s = s;
    auth_node_key(&s->root, nd->role, (uint32_t)nd->index, &nd->key);
    nd->o = (conn_opts){.secret = &nd->key, .who = AUTH_WHO_NODE, .role = (uint8_t)nd->role,
                        .index = (uint32_t)nd->index, .cbs = &cbs, .ud = nd,
                        .handshake_ms = 20000};
    s->connecting++;
    if (conn_connect(&s->loop, s->host, s->port, &nd->o, &nd->c) < 0) {
      fprintf(stderr, "bench_scale: %s\n", err_msg());
      exit(1);
    }
  }
}

/* Every node speaks at the interval the coordinator asks for, as node.c
 * does (the timer runs at HEARTBEAT_MS, the floor). */
static void on_hb(uv_timer_t *t) {
  sim *s = t->data;
  double now = now_s();
  if (s->hb_sent > 0 && (now - s->hb_sent) * 1000 + s->hb_ms / 2.0 < s->interval_ms) return;
  s->hb_sent = now;
  s->seq++;
  for (int i = 0; i < s->n; i++) {
    if (!s->nodes[i].registered || !s->nodes[i].c) continue;
    wire_wr w;
    wire_wr_init(&w);
    wire_put_heartbeat(&w, &(wire_msg_heartbeat){s->seq, 8u << 20, 0, 0});
    send_wr(&s->nodes[i], &w, WIRE_HEARTBEAT, 0);
  }
}

/* The run's coordinator file appears once it listens: "HOST:PORT PID". */
static bool read_coordinator(sim *s) {
  char path[1200], line[256];
  FILE *f = NULL;
  DIR *d = opendir(s->runs);
  for (struct dirent *e; d && !f && (e = readdir(d));) {
    if (e->d_name[0] == '.') continue;
      if (snprintf(s->run_dir, sizeof s->run_dir, "%s/%s", s->runs, e->d_name) >= (int)sizeof s->run_dir) continue;
    snprintf(path, sizeof path, "%s/coordinator", s->run_dir);
    f = fopen(path, "r");
  }
  if (d) closedir(d);
  if (!f) return false;
  bool got = fgets(line, sizeof line, f) != NULL;
  fclose(f);
  char *colon = got ? strrchr(strtok(line, " "), ':') : NULL;
  if (!colon) return false;
  *colon = '\0';
  if (strlen(line) >= sizeof s->host) return false;
  memcpy(s->host, line, strlen(line) + 1);
  s->port = atoi(colon + 1);
  snprintf(path, sizeof path, "%s/secret", s->run_dir);
  return auth_secret_load(path, &s->root) == 0;
}

static void on_poll(uv_timer_t *t) {
  sim *s = t->data;
  if (s->t0 > 0 || !read_coordinator(s)) return;
  uv_timer_stop(t);
  s->t0 = now_s();
  connect_more(s);
}

static void raise_fd_limit(int n) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
  rl.rlim_cur = rl.rlim_max;
  setrlimit(RLIMIT_NOFILE, &rl);
  if (rl.rlim_cur < (rlim_t)n + 64)
    fprintf(stderr, "bench_scale: the descriptor limit %llu is below %d nodes' needs\n",
            (unsigned long long)rl.rlim_cur, n);
}

int main(int argc, char **argv) {
  if (argc != 3 && argc != 4 && argc != 6) {
    fprintf(stderr, "usage: bench_scale RUNS_DIR NODES [HEARTBEAT_MS [FROM TO]]\n");
    return 2;
  }
  static sim s;
  s.runs = argv[1];
  int nodes = atoi(argv[2]);
  int hb = argc > 3 ? atoi(argv[3]) : 500;
  int from = argc > 5 ? atoi(argv[4]) : 0, to = argc > 5 ? atoi(argv[5]) : nodes;
  if (nodes < 1 || hb < 1 || from < 0 || to > nodes || from >= to) {
    fprintf(stderr, "bench_scale: need NODES >= 1, HEARTBEAT_MS >= 1, 0 <= FROM < TO <= NODES\n");
    return 2;
  }
  s.n = to - from;
  raise_fd_limit(s.n);
  /* The simulated nodes stand for nodes on other hosts: TCP, never the
   * same-host links that one process's thousands of conns would take. */
  conn_set_transport(CONN_TRANSPORT_TCP);
  log_setup(stderr, "sim", LOG_ERROR);
  bool ps = from == 0; /* ps:0, which a cluster needs (no fit here: it serves nothing) */
  s.n += ps;
  s.nodes = calloc((size_t)s.n, sizeof *s.nodes);
  if (!s.nodes) return 1;
  for (int i = 0; i < to - from; i++) s.nodes[i] = (simnode){.role = ROLE_WORKER, .index = from + i};
  if (ps) s.nodes[s.n - 1] = (simnode){.role = ROLE_PS, .index = 0};
  uv_loop_init(&s.loop);
  uv_timer_init(&s.loop, &s.hb);
  uv_timer_init(&s.loop, &s.poll);
  s.hb.data = s.poll.data = &s;
  uv_timer_start(&s.poll, on_poll, 0, 10);
  s.hb_ms = hb;
  uv_timer_start(&s.hb, on_hb, (uint64_t)hb, (uint64_t)hb);
  uv_run(&s.loop, UV_RUN_DEFAULT);
  printf("done: %llu calls answered\n", (unsigned long long)s.calls);
  uv_loop_close(&s.loop);
  free(s.nodes);
  return 0;
}
