/* bench_pushpull.c - push+pull of a 1 MiB tensor through a real ps process
 * (drover's protocol, authenticated conn, SGD applied on the ps), against
 * the loopback TCP bandwidth between two processes measured in the same
 * run with plain blocking sockets. The ps link is a same-host link (shared
 * memory) unless DROVER_TRANSPORT says otherwise. The ps is a forked node_main and this
 * process plays the coordinator and the worker (tests/unit/node_fake.c).
 * Prints MB/s for both and the ratio. Usage: bench_pushpull [seconds [pushpull]]
 * ("pushpull": that figure alone, for tests/bench/transport.sh, which runs
 * it once with DROVER_TRANSPORT=auto and once with tcp). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "node_fake.h"
#include "proto/wire_msgs.h"

#define MIB (1 << 20)

/* node_fake.c reports failures through the unit harness; here they end
 * the benchmark. */
void harness_fail(const char *file, int line, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "bench_pushpull: %s:%d: ", file, line);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  exit(1);
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Bytes per second from one process to another over 127.0.0.1, 1 MiB
 * writes, the reader in a child. */
static double loopback_rate(double seconds) {
  int ls = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t al = sizeof a;
  if (bind(ls, (struct sockaddr *)&a, sizeof a) < 0 || listen(ls, 1) < 0 ||
      getsockname(ls, (struct sockaddr *)&a, &al) < 0) {
    perror("loopback");
    exit(1);
  }
  pid_t pid = fork();
  if (pid == 0) {
    int s = accept(ls, NULL, NULL);
    char *buf = malloc(MIB);
    while (read(s, buf, MIB) > 0) {
    }
    _exit(0);
  }
  close(ls);
  int s = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (connect(s, (struct sockaddr *)&a, sizeof a) < 0) {
    perror("connect");
    exit(1);
  }
  char *buf = calloc(1, MIB);
  double bytes = 0, t0 = now();
  while (now() - t0 < seconds) {
    size_t off = 0;
    while (off < MIB) {
      ssize_t w = write(s, buf + off, MIB - off);
      if (w <= 0) exit(1);
      off += (size_t)w;
    }
    bytes += MIB;
  }
  double rate = bytes / (now() - t0);
  close(s);
  waitpid(pid, NULL, 0);
  free(buf);
  return rate;
}

/* The worker side of the data plane, as worker.c does it: PUSH sent
 * without a copy of its own (the worker encodes it into the ring; over TCP
 * into a buffer: here, on both, written from one encoded payload),
 * PULL_REPLY values copied into the parameter buffer (from where they lie
 * on a shared-memory link). */
typedef struct client {
  conn *c;
  uint8_t *push;      /* a PUSH payload: version, count, var, 1-D tensor of MIB/4 */
  size_t push_len;
  float *param;       /* where pulled values land */
  long rounds;
  double t0, seconds, rate;
  bool done, failed;
} client;

static void send_push(client *cl) {
  conn_send_ref(cl->c, WIRE_PUSH, 1, cl->push, cl->push_len, NULL, NULL);
}

/* The one item of a PULL or PUSH. */
static void put_item(wire_wr *w, void *ud, uint32_t i) {
  (void)i;
  wire_put_item_var_id(w, ud);
}

static void put_grad(wire_wr *w, void *ud, uint32_t i) {
  (void)i;
  wire_put_item_var_tensor(w, ud);
}

static void cl_frame(conn *c, const wire_header *h, const uint8_t *pl) {
  client *cl = conn_ud(c);
  if (h->type == WIRE_PUSH_OK) {
    wire_wr w;
    wire_wr_init(&w);
    wire_item_var_id var0 = {0};
    wire_put_pull(&w, &(wire_msg_pull){0, {1, .put = put_item, .ud = &var0}}); /* any version */
    conn_send_wr(c, &w, WIRE_PULL, 2);
    return;
  }
  if (h->type != WIRE_PULL_REPLY) {
    cl->failed = cl->done = true;
    return;
  }
  wire_msg_pull_reply m;
  wire_item_var_tensor it = {0};
  if (wire_get_pull_reply(pl, h->len, &m) == 0 && m.vars.n == 1) {
    wire_rd r = wire_items_reader(&m.vars);
    wire_get_item_var_tensor(&r, &it);
  }
  if (!it.value.data || it.value.shape[0] != MIB / 4) {
    cl->failed = cl->done = true;
    return;
  }
  memcpy(cl->param, conn_in_place(c, it.value.data), MIB); /* worker_ps.c's take_pull_reply */
  if (++cl->rounds == 10) cl->t0 = now();
  if (cl->rounds > 10 && now() - cl->t0 >= cl->seconds) {
    cl->rate = 2.0 * MIB * (double)(cl->rounds - 10) / (now() - cl->t0);
    cl->done = true;
    return;
  }
  send_push(cl);
}

static void cl_ready(conn *c) {
  conn_set_in_place(c, true); /* as a worker's links do */
  send_push(conn_ud(c));
}
static void cl_close(conn *c, int err, const char *why) {
  client *cl = conn_ud(c);
  if (!cl->done) fprintf(stderr, "bench_pushpull: connection closed: %s (%d)\n", why, err);
  cl->c = NULL;
  cl->done = true;
}

static const conn_cbs cl_cbs = {cl_ready, cl_frame, cl_close};

static bool client_done(void *arg) { return ((client *)arg)->done; }

/* Bytes per second moved by push(1 MiB gradient) + pull(1 MiB value)
 * rounds: 2 MiB of tensor data a round. */
static double pushpull_rate(double seconds) {
  nf_cluster c;
  nf_cluster_up(&c, &(nf_node){ROLE_PS, 0}, 1, 500, 60000);
  fake *f = &c.f;
  peer *pe = nf_cluster_dial(&c, ROLE_PS, 0);
  optim_cfg cfg;
  optim_cfg_default(&cfg, OPTIM_SGD);
  cfg.lr = 0;
  int64_t shape[1] = {MIB / 4};
  tensor *value = nf_filled(1, shape, 0, 1e-6f), *grad = nf_filled(1, shape, 1, 0);
  nf_var_init(f, pe, 0, 0, &cfg, value, 1);

  client cl = {.seconds = seconds};
  wire_wr w;
  wire_wr_init(&w);
  wire_item_var_tensor g = {0, {.t = grad}};
  wire_put_push(&w, &(wire_msg_push){0, {1, .put = put_grad, .ud = &g}}); /* async: any version */
  cl.push = w.buf + WIRE_HEADER_SIZE;
  cl.push_len = w.len - WIRE_HEADER_SIZE;
  cl.param = malloc(MIB);
  auth_secret root, key; /* as the coordinator: a ps serves it everything */
  auth_ps_root(&f->secret, (uint32_t)c.regs[0].index, &root);
  auth_node_key(&root, AUTH_ROLE_COORD, 0, &key);
  conn_opts o = {.secret = &key, .who = AUTH_WHO_NODE, .role = AUTH_ROLE_COORD, .cbs = &cl_cbs,
                 .ud = &cl};
  if (conn_connect(&f->loop, "127.0.0.1", c.regs[0].port, &o, &cl.c) < 0 ||
      !nf_pump(f, client_done, &cl, 120000) || cl.failed) {
    fprintf(stderr, "bench_pushpull: the push/pull loop failed\n");
    exit(1);
  }
  if (cl.c) conn_close(cl.c, "done");
  nf_pump_for(f, 50);
  nf_cluster_down(&c); /* the ps must exit 0 within 10 s */
  wire_wr_free(&w);
  free(cl.param);
  tensor_free(value);
  tensor_free(grad);
  unlink("secret");
  return cl.rate;
}

int main(int argc, char **argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 4;
  signal(SIGPIPE, SIG_IGN);
  /* The fake coordinator writes its secret file into the working directory. */
  char dir[] = "/tmp/drover-bench-XXXXXX";
  if (!mkdtemp(dir) || chdir(dir) != 0) {
    perror("mkdtemp");
    return 1;
  }
  if (argc > 2 && strcmp(argv[2], "pushpull") == 0) {
    printf("pushpull_1MiB_MB_per_sec %.0f\n", pushpull_rate(seconds) / 1e6);
    if (chdir("/") == 0) rmdir(dir);
    return 0;
  }
  double lo = loopback_rate(seconds / 2), pp = pushpull_rate(seconds / 2);
  double lo2 = loopback_rate(seconds / 2), pp2 = pushpull_rate(seconds / 2);
  lo = lo > lo2 ? lo : lo2;
  pp = pp > pp2 ? pp : pp2;
  printf("loopback_MB_per_sec %.0f\n", lo / 1e6);
  printf("pushpull_1MiB_MB_per_sec %.0f\n", pp / 1e6);
  printf("pushpull_fraction_of_loopback %.3f\n", pp / lo);
  if (chdir("/") == 0) rmdir(dir);
  return 0;
}
