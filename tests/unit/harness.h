/* harness.h - a minimal unit-test harness.
 *
 * TEST(name) { ... } registers a case at load time (no central list to
 * edit). The runner (tests/unit/main.c) runs every case in its own forked
 * process with a timeout, inside a fresh temporary directory, and prints
 * "PASS name" or "FAIL name: why" per case; tests/run.sh counts the lines.
 * A failed CHECK prints where and what, and ends that case only.
 */
#ifndef DROVER_HARNESS_H
#define DROVER_HARNESS_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"

typedef void (*harness_fn)(void);
void harness_register(const char *name, harness_fn fn);
/* Ends the current case as failed. */
void harness_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 3, 4)));
/* Writes `content` to a file in the case's temporary directory; returns its
 * path (static storage, valid until the next call: copy it if needed). */
const char *harness_write(const char *name, const void *content, size_t len);
const char *harness_write_str(const char *name, const char *content);
/* Absolute path of a file in the source tree (cases run in a temp dir). */
const char *harness_src(const char *relpath);

#define TEST(name)                                                     \
  static void test_##name(void);                                      \
  __attribute__((constructor)) static void register_##name(void) {    \
    harness_register(#name, test_##name);                             \
  }                                                                   \
  static void test_##name(void)

#define CHECK(cond)                                                    \
  do {                                                                 \
    if (!(cond)) harness_fail(__FILE__, __LINE__, "CHECK(%s)", #cond); \
  } while (0)

/* expr returns >= 0 on success; on failure shows the code and err_msg(). */
#define CHECK_OK(expr)                                                        \
  do {                                                                        \
    long long rc_ = (long long)(expr);                                        \
    if (rc_ < 0)                                                              \
      harness_fail(__FILE__, __LINE__, "%s -> %s: %s", #expr,                \
                   err_name((int)rc_), err_msg());                     \
  } while (0)

/* expr must fail with `code`, and err_msg() must contain `needle`. */
#define CHECK_ERR(expr, code, needle)                                         \
  do {                                                                        \
    long long rc_ = (long long)(expr);                                        \
    if (rc_ != (code))                                                        \
      harness_fail(__FILE__, __LINE__, "%s -> %s (%lld), expected %s", #expr, \
                   err_name((int)rc_), rc_, #code);                       \
    if (!strstr(err_msg(), (needle)))                                      \
      harness_fail(__FILE__, __LINE__, "message \"%s\" lacks \"%s\"",        \
                   err_msg(), (needle));                                   \
  } while (0)

#define CHECK_INT_EQ(a, b)                                                    \
  do {                                                                        \
    long long a_ = (long long)(a), b_ = (long long)(b);                       \
    if (a_ != b_)                                                             \
      harness_fail(__FILE__, __LINE__, "%s == %s: %lld != %lld", #a, #b, a_, b_); \
  } while (0)

#define CHECK_NEAR(a, b, tol)                                                 \
  do {                                                                        \
    double a_ = (double)(a), b_ = (double)(b), t_ = (double)(tol);            \
    if (!(fabs(a_ - b_) <= t_))                                               \
      harness_fail(__FILE__, __LINE__, "%s ~ %s: %.9g vs %.9g (tol %g)", #a, #b, \
                   a_, b_, t_);                                               \
  } while (0)

#define CHECK_STR_CONTAINS(hay, needle)                                       \
  do {                                                                        \
    const char *h_ = (hay), *n_ = (needle);                                   \
    if (!h_ || !strstr(h_, n_))                                               \
      harness_fail(__FILE__, __LINE__, "\"%s\" lacks \"%s\"", h_ ? h_ : "(null)", n_); \
  } while (0)

#endif
