/* err.h - drover's error codes and the thread's last error message.
 *
 * Every library function returns 0 (or a count) on success and a negative
 * DRV_E* code on failure. Alongside the code, the failing function leaves a
 * human-readable message (naming the file, line, shape... that was wrong) in
 * a thread-local buffer, read with err_msg(). The message stays valid
 * until the next err_set() on the same thread.
 */
#ifndef DROVER_ERR_H
#define DROVER_ERR_H

#include <signal.h>

/* One table: code, short message. */
#define DRV_ERRNO_MAP(XX)                                   \
  XX(NOMEM, "out of memory")                                \
  XX(INVAL, "invalid argument")                             \
  XX(SHAPE, "shape mismatch")                               \
  XX(IO, "i/o error")                                       \
  XX(PARSE, "malformed input")                              \
  XX(RANGE, "value out of range")                           \
  XX(UNSUPPORTED, "unsupported")                            \
  XX(INTERRUPTED, "interrupted")                            \
  XX(TIMEDOUT, "timed out")                                 \
  XX(NODE, "a cluster node failed")                         \
  XX(PROTO, "protocol error")                               \
  XX(CLOSURE, "a scheduled closure failed")                 \
  XX(CANCELLED, "cancelled")                                \
  XX(PERM, "not permitted")                                 \
  XX(AGAIN, "not ready yet: try again later")               \
  XX(NOENT, "no such file or directory")

enum err_code {
  DRV_OK = 0,
  DRV__EBASE = -1000,
#define XX(code, _) DRV_E##code,
  DRV_ERRNO_MAP(XX)
#undef XX
  DRV__ELAST
};

/* Records a formatted message for the calling thread and returns `code`,
 * so that error paths read `return err_set(DRV_EPARSE, "%s:%d: ...", ...)`. */
int err_set(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The last message recorded on this thread ("" when none). Never NULL. */
const char *err_msg(void);

/* Static short description and name ("DRV_EPARSE") of a code. Never NULL. */
const char *err_str(int code);
const char *err_name(int code);

/* Cooperative interruption (Ctrl-C). A SIGINT handler calls
 * err_interrupt_request(); long-running C loops (training, readers) poll
 * err_interrupted() and return DRV_EINTERRUPTED. Whoever resumes normal work
 * calls err_interrupt_clear(). Async-signal-safe. */
void err_interrupt_request(void);
int err_interrupted(void);
void err_interrupt_clear(void);

#endif
