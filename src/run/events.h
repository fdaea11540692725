/* events.h - TensorBoard event files: scalar summaries that
 * `tensorboard --logdir` reads, written without TensorFlow.
 *
 * A file is a sequence of TFRecords, each
 *   uint64 length (LE), uint32 masked crc32c(length bytes),
 *   `length` bytes of data, uint32 masked crc32c(data)
 * where masked(crc) = ((crc >> 15) | (crc << 17)) + 0xa282ead8, and each
 * record's data is one protobuf `tensorboard.Event` (event.proto):
 *   1 wall_time double, 2 step int64, 3 file_version string,
 *   5 summary Summary { repeated Value value = 1 {
 *       string tag = 1; float simple_value = 2 } }
 * The first record carries file_version "brain.Event:2"; every later one
 * carries one scalar.
 *
 * Records are buffered in memory and written at most once a second (sooner
 * when 64 KiB are queued; and on flush and close), so a training loop that
 * logs every step pays for a memcpy and two CRCs, not a system call. A
 * failed write is sticky: it fails with the path and the reason ("cannot
 * write 'runs/x/events/...': No space left on device"), and every later
 * call returns the same code and message without touching the file
 * again. Not thread-safe.
 */
#ifndef DROVER_EVENTS_H
#define DROVER_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct wire_wr; /* wire.h */

typedef struct events_writer events_writer;

/* Creates `dir` and its missing parents, and in it a new file
 * events.out.tfevents.<10-digit unix time>.<hostname><suffix> (TensorFlow's
 * name; an existing one gets ".2", ".3"... after it), and writes the
 * file_version record. `suffix` ("" or NULL for none) keeps the files of
 * two writers of one host apart (".chief"). On success *out is the
 * caller's, to end with events_close. Errors name the path and the reason
 * ("cannot create 'x/events': Not a directory"). */
int events_open(const char *dir, const char *suffix, events_writer **out);

/* The same at an exact path (created or truncated). */
int events_open_file(const char *path, events_writer **out);

/* Queues one scalar: Event{wall_time, step, summary{value{tag, value}}}.
 * `tag` is copied; `value` is stored as float32 (simple_value).
 * `wall_time` is seconds since the Unix epoch; <= 0 means now. Writes the
 * buffer out when the last write is a second old. Returns 0 or a negative
 * code (DRV_EIO for a failed write, DRV_EINVAL for a tag too long). */
int events_scalar(events_writer *w, const char *tag, int64_t step, double value,
                  double wall_time);

/* Writes out everything queued. Returns 0 or the (sticky) error. */
int events_flush(events_writer *w);

/* events_flush if records are queued and the last write is a second old:
 * for a timer, so that the last scalars before a pause reach the disk. */
int events_tick(events_writer *w);

/* Flushes, closes and frees the writer. Returns 0, or the error of the
 * last write or of close (the memory is freed in any case). NULL is fine. */
int events_close(events_writer *w);

/* The file's path (owned by the writer). */
const char *events_path(const events_writer *w);

/* True once a write has failed (every later call fails the same way). */
bool events_failed(const events_writer *w);

/* Seconds since the Unix epoch, with sub-second precision. */
double events_wall_time(void);

/* CRC-32C (Castagnoli) of n bytes, and TFRecord's masked form of it.
 * Exposed for the tests and for readers. */
uint32_t events_crc32c(const void *p, size_t n);
uint32_t events_masked_crc32c(const void *p, size_t n);

/* ---- a run's summaries ----------------------------------------------------
 * In a run directory each writer has its own subdirectory, so that
 * TensorBoard shows it as a run of its own and the same tags (train/loss)
 * from two writers are two curves, not one zigzag:
 *   <run_dir>/events/<who>/events.out.tfevents.<time>.<host>.<who>
 * These wrappers never stop training: a failure is logged once (log.h)
 * and the writer writes nothing more. */

/* Opens who's writer (who: "chief", "coordinator"). NULL when run_dir is
 * NULL, and NULL with a warning in the log when the file cannot be made. */
events_writer *events_run_open(const char *run_dir, const char *who);

/* events_scalar at the current time; a NaN value is skipped. NULL is fine. */
void events_run_scalar(events_writer *w, const char *tag, int64_t step, double value);

/* The chief's duty: the scalars of one RESULT frame it is about to send
 * (`frame` as the worker built it, header space in front; borrowed):
 * `train/loss` and, when the loss counts correct answers,
 * `train/accuracy` of its batch, at step = the task id. A failed step
 * writes nothing. NULL w is fine. */
void events_run_result(events_writer *w, const struct wire_wr *frame);
/* The same from a RESULT's payload as received: the coordinator writes a
 * chief's summaries so when the chief cannot see the run directory
 * (coord_summaries.c), and the file is the one the chief would write. */
void events_run_result_payload(events_writer *w, const uint8_t *payload, size_t len);

/* events_tick and events_flush, logging a failure. NULL is fine. */
void events_run_tick(events_writer *w);
void events_run_flush(events_writer *w);

/* Closes the writer, logging a failure. NULL is fine. */
void events_run_close(events_writer *w);

#endif
