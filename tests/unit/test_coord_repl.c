/* test_coord_repl.c - where ps replicas go (coord__repl_match): each
 * group's replica on another machine than its primary's whenever the
 * candidates allow, the round-robin placements the ssh and Slurm
 * launchers make (ps:0..N-1 the primaries, ps:N..2N-1 the replicas,
 * alternating over the hosts) included, and the groups that cannot be
 * counted. No process is started. */
#include <string.h>

#include "cluster/coord/coord_int.h"
#include "harness.h"

/* Groups whose replica shares its primary's machine under out[]. */
static int same(const char *const *prim, const char *const *cand, const int *out, int n) {
  int s = 0;
  for (int k = 0; k < n; k++) s += strcmp(prim[k], cand[out[k]]) == 0;
  return s;
}

/* Every candidate used once. */
static void check_permutation(const int *out, int n) {
  int seen[16] = {0};
  for (int k = 0; k < n; k++) {
    CHECK(out[k] >= 0 && out[k] < n);
    CHECK_INT_EQ(seen[out[k]]++, 0);
  }
}

TEST(coord_repl_match_puts_replicas_on_other_machines) {
  int out[8];
  /* ps = 2 over hosts a, b round-robin: ps:0 a, ps:1 b, ps:2 a, ps:3 b;
   * in order, group 0 would get ps:2, on a as well */
  const char *p2[] = {"a", "b"}, *c2[] = {"a", "b"};
  CHECK_INT_EQ(coord__repl_match(p2, c2, 2, out), 0);
  check_permutation(out, 2);
  CHECK_INT_EQ(same(p2, c2, out, 2), 0);
  CHECK_INT_EQ(out[0], 1);
  /* ps = 3 over a, b: ps:0 a, ps:1 b, ps:2 a; replicas ps:3 b, ps:4 a, ps:5 b */
  const char *p3[] = {"a", "b", "a"}, *c3[] = {"b", "a", "b"};
  CHECK_INT_EQ(coord__repl_match(p3, c3, 3, out), 0);
  check_permutation(out, 3);
  CHECK_INT_EQ(same(p3, c3, out, 3), 0);
  /* the first pass strands the last group on its machine; a swap fixes it */
  const char *p4[] = {"b", "a", "c", "c"}, *c4[] = {"a", "c", "b", "c"};
  CHECK_INT_EQ(coord__repl_match(p4, c4, 4, out), 0);
  check_permutation(out, 4);
  CHECK_INT_EQ(same(p4, c4, out, 4), 0);
  /* one machine: every group counted, every candidate still used */
  const char *p1[] = {"h", "h", "h"}, *c1[] = {"h", "h", "h"};
  CHECK_INT_EQ(coord__repl_match(p1, c1, 3, out), 3);
  check_permutation(out, 3);
  /* hosts a, a, b for primaries and a, a, a for replicas: only b's group can */
  const char *pa[] = {"a", "a", "b"}, *ca[] = {"a", "a", "a"};
  CHECK_INT_EQ(coord__repl_match(pa, ca, 3, out), 2);
  check_permutation(out, 3);
}
