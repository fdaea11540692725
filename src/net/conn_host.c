/* conn_host.c - what a conn knows of this host: its id (HELLO's same-host
 * offer, conn_shm.c) and whether a peer's address is one of its own (a TCP
 * client that closes after the offer can only have moved to a link if it
 * is on this host). */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "base/le.h"
#include "net/conn_int.h"

/* The boot id (16 bytes of its UUID) and the network namespace's inode:
 * equal only for processes of one kernel that share their network. */
void conn__host_id(uint8_t out[WIRE_HOST_ID_SIZE]) {
  static uint8_t id[WIRE_HOST_ID_SIZE];
  static bool have;
  if (!have) {
    char uuid[64] = "";
    struct stat st = {0}; /* st_ino 0 when stat fails */
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
      if (!fgets(uuid, sizeof uuid, f)) uuid[0] = 0;
      fclose(f);
    }
    for (int i = 0, j = 0; uuid[i] && j < 32; i++) {
      int v = uuid[i] >= '0' && uuid[i] <= '9' ? uuid[i] - '0'
              : uuid[i] >= 'a' && uuid[i] <= 'f' ? uuid[i] - 'a' + 10 : -1;
      if (v >= 0) id[j / 2] |= (uint8_t)(j % 2 ? v : v << 4), j++;
    }
    if (stat("/proc/self/ns/net", &st) == 0) le_put(id + 16, (uint64_t)st.st_ino, 8);
    /* Without either, an id of zeros: it never matches (HELLO's "no offer"). */
    if (!uuid[0] || st.st_ino == 0) memset(id, 0, sizeof id);
    have = true;
  }
  memcpy(out, id, WIRE_HOST_ID_SIZE);
}

/* The IPv4 address of an AF_INET or IPv4-mapped AF_INET6 address. */
static bool ipv4_of(const struct sockaddr *sa, struct in_addr *out) {
  if (sa->sa_family == AF_INET) {
    *out = ((const struct sockaddr_in *)sa)->sin_addr;
    return true;
  }
  const struct in6_addr *a6 = &((const struct sockaddr_in6 *)sa)->sin6_addr;
  if (sa->sa_family != AF_INET6 || !IN6_IS_ADDR_V4MAPPED(a6)) return false;
  memcpy(&out->s_addr, a6->s6_addr + 12, 4);
  return true;
}

/* Whether two addresses are equal (an IPv4-mapped IPv6 one as IPv4). */
static bool same_ip(const struct sockaddr *a, const struct sockaddr *b) {
  struct in_addr x, y;
  if (a->sa_family == AF_INET6 && b->sa_family == AF_INET6)
    return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
                  &((const struct sockaddr_in6 *)b)->sin6_addr, sizeof(struct in6_addr)) == 0;
  return ipv4_of(a, &x) && ipv4_of(b, &y) && x.s_addr == y.s_addr;
}

bool conn__addr_is_local(const struct sockaddr *sa) {
  struct in_addr v4;
  if (ipv4_of(sa, &v4) && (ntohl(v4.s_addr) >> 24) == 127) return true; /* 127.0.0.0/8 */
  if (sa->sa_family == AF_INET6 &&
      IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)sa)->sin6_addr))
    return true;
  if (sa->sa_family != AF_INET && sa->sa_family != AF_INET6) return false;
  struct ifaddrs *all;
  bool local = false;
  if (getifaddrs(&all) != 0) return true; /* unknown: as before, a move */
  for (struct ifaddrs *i = all; i && !local; i = i->ifa_next)
    local = i->ifa_addr && (i->ifa_addr->sa_family == AF_INET ||
                            i->ifa_addr->sa_family == AF_INET6) && same_ip(i->ifa_addr, sa);
  freeifaddrs(all);
  return local;
}
