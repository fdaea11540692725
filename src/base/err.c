/* err.c - error codes, messages and the interrupt flag. */
#include "base/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Large enough for a reservation timeout that quotes the tails of several
 * nodes' logs (coord.c builds it in 8 KB). */
static _Thread_local char errbuf[8192];
static volatile sig_atomic_t interrupt_flag;

int err_set(int code, const char *fmt, ...) {
  /* Callers often wrap the previous message ("launching %s: %s", ...,
   * err_msg()): format aside, then copy, so that source and target of
   * vsnprintf never overlap. */
  char msg[sizeof errbuf];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  memcpy(errbuf, msg, sizeof errbuf);
  return code;
}

const char *err_msg(void) { return errbuf; }

const char *err_str(int code) {
  switch (code) {
  case DRV_OK: return "success";
#define XX(c, msg) case DRV_E##c: return msg;
  DRV_ERRNO_MAP(XX)
#undef XX
  default: return "unknown error";
  }
}

const char *err_name(int code) {
  switch (code) {
  case DRV_OK: return "DRV_OK";
#define XX(c, _) case DRV_E##c: return "DRV_E" #c;
  DRV_ERRNO_MAP(XX)
#undef XX
  default: return "DRV_E?";
  }
}

void err_interrupt_request(void) { interrupt_flag = 1; }
int err_interrupted(void) { return interrupt_flag != 0; }
void err_interrupt_clear(void) { interrupt_flag = 0; }
