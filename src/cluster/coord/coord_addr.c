/* coord_addr.c - where the coordinator listens, the address its nodes
 * dial, and where the nodes themselves bind.
 *
 *                  listens on          nodes dial              nodes bind
 *   local          bind or 127.0.0.1   127.0.0.1 (loopback)    127.0.0.1
 *   ssh, slurm     bind or 0.0.0.0     address, else found     0.0.0.0
 *
 * "Found" means: for ssh, each host learns it from $SSH_CONNECTION, whose
 * first field is our address as that host sees it (the launcher passes the
 * node a wildcard host and its remote wrapper fills it in); for slurm, the
 * first non-loopback IPv4 address of gethostname(), else of any interface
 * that is up. `address` is for what neither can know: NAT, a jump host, a
 * login node whose name resolves to the wrong network.
 *
 * A remote node binds 0.0.0.0 and advertises, in REGISTER, the local
 * address of its own connection to us (node.c), so workers reach the ps
 * data ports over the same network that reached the coordinator.
 *
 * Mixed placement (a role on "local" beside roles on remote launchers):
 * the coordinator listens as for the remote ones, and the local nodes dial
 * the address the remote nodes dial, found as for Slurm when that is a
 * wildcard (ssh's $SSH_CONNECTION is no local node's), and bind 0.0.0.0:
 * what they advertise is then routable from the remote workers. Every
 * connection on these ports must prove the run's secret first (conn.c),
 * which is what makes listening beyond loopback acceptable.
 *
 * The transport between nodes of one host (net/conn.h) is the cluster's
 * `transport`, else this process's own mode: set before we listen (we
 * offer same-host links only when it is not tcp), passed to the nodes the
 * launcher starts in their environment, and to every node in REGISTERED.
 */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cluster/coord/coord_int.h"
#include "base/err.h"
#include "base/log.h"

static bool is_wildcard(const char *h) {
  return strcmp(h, "0.0.0.0") == 0 || strcmp(h, "::") == 0;
}

/* Launchers whose nodes run on other machines. */
static bool is_remote(const char *launcher) {
  return strcmp(launcher, "ssh") == 0 || strcmp(launcher, "slurm") == 0 ||
         strcmp(launcher, "spark") == 0 || strcmp(launcher, "yarn") == 0;
}

/* The remote launcher some role uses ("yarn"), or NULL when all are local;
 * *unfound: one whose nodes cannot find us as ssh's do (Slurm's, Spark's
 * and YARN's have no $SSH_CONNECTION). */
static const char *remote_used(const coord_opts *o, bool *unfound) {
  const char *used = NULL;
  *unfound = false;
  for (int r = 0; r < ROLE_COUNT; r++) {
    const char *l = coord_role_launcher(o, r);
    if (o->count[r] == 0 || !is_remote(l)) continue;
    used = l;
    *unfound |= strcmp(l, "ssh") != 0;
  }
  return used;
}

static bool usable_v4(const struct sockaddr *sa) {
  if (!sa || sa->sa_family != AF_INET) return false;
  uint32_t a = ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr);
  return (a >> 24) != 127 && a != 0;
}

/* This machine's address for nodes of a Slurm allocation or Spark: gethostname()'s
 * first non-loopback IPv4 address (Debian maps the name to 127.0.1.1, so
 * loopback ones are skipped), else the first such address of an interface
 * that is up. */
static int host_address(char *out, size_t n) {
  char name[256] = "";
  struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res = NULL;
  if (gethostname(name, sizeof name - 1) == 0 && getaddrinfo(name, NULL, &hints, &res) == 0) {
    for (struct addrinfo *a = res; a; a = a->ai_next)
      if (usable_v4(a->ai_addr)) {
        inet_ntop(AF_INET, &((struct sockaddr_in *)a->ai_addr)->sin_addr, out, (socklen_t)n);
        freeaddrinfo(res);
        return 0;
      }
    freeaddrinfo(res);
  }
  struct ifaddrs *ifs = NULL;
  if (getifaddrs(&ifs) == 0) {
    for (struct ifaddrs *i = ifs; i; i = i->ifa_next)
      if ((i->ifa_flags & IFF_UP) && usable_v4(i->ifa_addr)) {
        inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, out, (socklen_t)n);
        freeifaddrs(ifs);
        return 0;
      }
    freeifaddrs(ifs);
  }
  return err_set(DRV_EINVAL, "cluster: no routable address for this host ('%s' resolves to "
                 "loopback only): set address = \"...\"", name);
}

static void join(char *out, size_t n, const char *host, int port) {
  snprintf(out, n, strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
}

/* Where the local nodes of a mixed cluster dial us: the remote nodes'
 * address, found when that is a wildcard. */
static int local_beside_remote(coord *c, const char *dial) {
  char found[64];
  if (!dial || is_wildcard(dial)) {
    int rc = host_address(found, sizeof found);
    if (rc < 0) return rc;
    dial = found;
  }
  join(c->local_addr, sizeof c->local_addr, dial, c->port);
  c->local_bind = "0.0.0.0";
  return 0;
}

/* The cluster's `transport`, else the process's (DROVER_TRANSPORT, else
 * auto): this cluster's own, given to its listener and the links it dials
 * (conn_opts.own_transport), so that clusters of one process (a REPL) keep
 * theirs. */
static void set_transport(coord *c) {
  static const char *const what[] = {
      [CONN_TRANSPORT_AUTO] = "shared memory between nodes on one host, TCP across hosts",
      [CONN_TRANSPORT_UNIX] = "a Unix socket between nodes on one host, TCP across hosts",
      [CONN_TRANSPORT_TCP] = "TCP between every two nodes, on one host too"};
  conn_transport_mode m = conn_get_transport();
  const char *env = getenv("DROVER_TRANSPORT");
  char from[64] = "";
  if (c->opts.transport) /* a known name: coord__check_opts */
    conn_transport_parse(c->opts.transport, &m);
  else if (env && *env)
    snprintf(from, sizeof from, "; from DROVER_TRANSPORT=%s", env);
  c->transport = m;
  rundir_event(&c->rd, "transport: %s (%s%s)", conn_transport_mode_name(m), what[m], from);
}

int coord__listen(coord *c, const conn_opts *co) {
  const coord_opts *op = &c->opts;
  set_transport(c);
  conn_opts ow = *co, *o = &ow;
  ow.own_transport = true;
  ow.transport = (int)c->transport;
  bool unfound;
  const char *remote_launcher = remote_used(op, &unfound);
  bool remote = remote_launcher != NULL;
  const char *listen = op->bind_host ? op->bind_host : remote ? "0.0.0.0" : "127.0.0.1";
  int rc = conn_listen(c->loop, listen, 0, o, &c->server, &c->port);
  if (rc < 0) return rc;
  bool v6 = strchr(listen, ':') != NULL;
  /* What a process on this machine dials (the coordinator file, attach). */
  join(c->addr, sizeof c->addr, is_wildcard(listen) ? (v6 ? "::1" : "127.0.0.1") : listen,
       c->port);
  char found[64];
  const char *dial = op->address;
  unsigned char bin[sizeof(struct in6_addr)];
  if (dial && inet_pton(AF_INET, dial, bin) != 1 && inet_pton(AF_INET6, dial, bin) != 1)
    return err_set(DRV_EINVAL, "cluster: address = \"%s\" is not a numeric IPv4 or IPv6 "
                   "address", dial);
  if (!dial && (!remote || !is_wildcard(listen))) dial = remote ? listen : c->addr;
  if (!dial && unfound) {
    if ((rc = host_address(found, sizeof found)) < 0) return rc;
    dial = found;
  }
  if (dial == c->addr)
    snprintf(c->node_addr, sizeof c->node_addr, "%s", c->addr);
  else
    join(c->node_addr, sizeof c->node_addr, dial ? dial : listen, c->port);
  c->node_bind = remote ? "0.0.0.0" : "127.0.0.1";
  snprintf(c->local_addr, sizeof c->local_addr, "%s", c->node_addr);
  c->local_bind = c->node_bind;
  if (remote && coord_uses_launcher(op, "local") &&
      (rc = local_beside_remote(c, dial ? dial : listen)) < 0)
    return rc;
  char line[128];
  snprintf(line, sizeof line, "%s %d\n", c->addr, (int)getpid());
  if ((rc = rundir_write(&c->rd, RUNDIR_COORDINATOR, line, 0644)) < 0) return rc;
  char where[96];
  join(where, sizeof where, listen, c->port);
  rundir_event(&c->rd, "coordinator listening on %s; nodes dial %s%s", where, c->node_addr,
               dial ? "" : " (each host fills in our address from $SSH_CONNECTION)");
  if (remote && coord_uses_launcher(op, "local"))
    rundir_event(&c->rd, "local nodes dial %s and listen on %s (routable from the %s nodes)",
                 c->local_addr, c->local_bind, remote_launcher);
  return 0;
}
