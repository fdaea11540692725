/* coord_feed_ckpt.c - a fed fit's position in its checkpoints, and the
 * batches a `drover run --resume` passes over.
 *
 * In async training each ps snapshots when CHECKPOINT arrives, so every
 * batch trained (RESULT counted) before the coordinator sent it is in the
 * checkpoint. The batches read but not trained then (queued or in flight)
 * may or may not be: the manifest records them (feed.pending) with the
 * count read (feed.read), and a resume reads the source again from its
 * start, passes over batches 1..read except the pending ones, and trains
 * those again. So no batch is lost; the pending ones (at most a few per
 * worker) may be trained twice. A source read again must give the same
 * batches in the same order: a dataset (its shuffle is seeded per epoch)
 * or a file; stdin, a pipe, a Lua function or external feeders cannot,
 * and a resume of such a run is refused (coord_feed_source.no_replay).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/coord/coord_fit_int.h"
#include "base/err.h"

void coord__feed_ckpt_clear(coord_fit_state *f) {
  free(f->ck.feed_pos);
  f->ck.feed_pos = NULL;
}

int coord__feed_ckpt_mark(coord_fit_state *f) {
  coord_feed_state *fd = &f->feed;
  coord__feed_ckpt_clear(f);
  if (!fd->src) return 0;
  size_t cap = 32 + (size_t)fd->nslots * 21 + 1;
  char *s = malloc(cap);
  if (!s) return err_set(DRV_ENOMEM, "out of memory");
  size_t at = (size_t)snprintf(s, cap, "%" PRIu64, fd->seq) + 1;
  s[at] = '\0';
  for (int i = 0; i < fd->nslots; i++)
    at += (size_t)snprintf(s + at, cap - at, "%s%" PRIu64, i ? " " : "", fd->slots[i].seq);
  f->ck.feed_pos = s;
  return 0;
}

void coord__feed_ckpt_meta(coord_fit_state *f, const char **meta, int *m) {
  const char *s = f->ck.feed_pos;
  if (!s) return;
  meta[(*m)++] = "feed.read";
  meta[(*m)++] = s;
  meta[(*m)++] = "feed.pending";
  meta[(*m)++] = s + strlen(s) + 1;
  meta[*m] = NULL;
}

static int parse_redo(coord_fit_state *f, const char *list, uint64_t read) {
  int n = 0;
  for (const char *p = list; *p; p++) n += *p == ' ';
  if (*list) n++;
  free(f->feed_rs.redo);
  f->feed_rs.redo = n ? calloc((size_t)n, sizeof *f->feed_rs.redo) : NULL;
  if (n && !f->feed_rs.redo) return err_set(DRV_ENOMEM, "out of memory");
  const char *p = list;
  for (int i = 0; i < n; i++) {
    char *end;
    uint64_t v = strtoull(p, &end, 10);
    if (end == p || v == 0 || v > read || (*end != ' ' && *end != '\0'))
      return err_set(DRV_EPARSE, "the checkpoint's feed.pending \"%s\" is damaged", list);
    f->feed_rs.redo[i] = v;
    p = *end ? end + 1 : end;
  }
  f->feed_rs.nredo = n;
  return 0;
}

int coord__feed_ckpt_resume(coord_fit_state *f, const manifest *m) {
  const coord_feed_source *src = f->args ? f->args->feed : NULL;
  const char *read_s = manifest_meta(m, "feed.read"), *pending = manifest_meta(m, "feed.pending");
  f->feed_rs.skip = 0;
  f->feed_rs.nredo = 0;
  f->feed_rs.skipped = 0;
  if (!src) return 0;
  if (!read_s || !pending)
    return err_set(DRV_EINVAL, "cannot resume a fed fit from a checkpoint without a feed "
                   "position (it was not fed)");
  if (src->no_replay)
    return err_set(DRV_EINVAL, "cannot resume this fit: its feed is %s, which cannot be read "
                   "again from its start to pass over what the checkpoint trained (of its "
                   "first %s batches); the checkpoint keeps the model (drover export): start "
                   "a new run to go on", src->no_replay, read_s);
  char *end;
  uint64_t read = strtoull(read_s, &end, 10);
  if (end == read_s || *end) return err_set(DRV_EPARSE, "the checkpoint's feed.read \"%s\" is damaged", read_s);
  int rc = parse_redo(f, pending, read);
  if (rc < 0) return rc;
  f->feed_rs.skip = read;
  return 0;
}

bool coord__feed_ckpt_skip(coord_fit_state *f, uint64_t seq) {
  if (seq > f->feed_rs.skip) return false;
  for (int i = 0; i < f->feed_rs.nredo; i++)
    if (f->feed_rs.redo[i] == seq) return false;
  return true;
}
