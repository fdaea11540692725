/* nodeout.h - `drover node --log-forward`: the node's own stdout and
 * stderr (a Lua print, a library's message, an abort's last words) as log
 * records for the coordinator.
 *
 * Descriptors 1 and 2 become pipes (dup2 at start); a small thread reads
 * them, because the loop thread may be busy in a long closure that prints
 * more than a pipe holds. The thread copies every byte to the original
 * descriptors first (the executor's own files keep them), then cuts lines
 * (at most NODEOUT_LINE bytes: a longer one is sent in pieces) into
 * records "2026-11-21T10:53:06.123Z worker:1 stdout text\n" ("stderr" for
 * descriptor 2), queued (at most NODEOUT_QUEUE bytes; beyond, lines are
 * dropped and counted) and handed to the loop through a uv_async.
 */
#ifndef DROVER_NODEOUT_H
#define DROVER_NODEOUT_H

#include <stddef.h>
#include <stdio.h>
#include <uv.h>

#define NODEOUT_LINE 4096
#define NODEOUT_QUEUE (256 * 1024)

typedef struct nodeout nodeout;

/* Called on the loop thread with whole records ("...\n", len bytes, valid
 * for the call; several at once). */
typedef void (*nodeout_fn)(void *ud, const char *records, size_t len);

/* Starts capturing descriptors 1 and 2 for `who` ("worker:1", copied).
 * *log_out is a stream on the original stderr for log.c (log records are
 * forwarded by their own sink, not twice); owned by the nodeout. Returns
 * 0 or a negative code (nothing changed then). */
int nodeout_start(uv_loop_t *loop, const char *who, nodeout_fn fn, void *ud, nodeout **out,
                  FILE **log_out);

/* Puts descriptors 1 and 2 back, reads what is left in the pipes (also a
 * last line without its newline), stops the thread and hands the rest to
 * fn before returning. Bounded: a child still holding the pipes does not
 * keep it waiting. Loop thread; idempotent. */
void nodeout_finish(nodeout *o);

/* Closes the loop handle (after nodeout_finish); the memory goes in its
 * close callback, so run the loop once more. NULL: nothing. */
void nodeout_close(nodeout *o);

/* Installed for fatal signals (SIGSEGV, SIGABRT, ...): puts descriptors 1
 * and 2 back and copies what is still in the pipes to the originals, so a
 * crash's last words reach the executor's stderr, then lets the signal
 * do what it did. Only async-signal-safe calls. */
void nodeout_crash_guard(nodeout *o);

#endif
