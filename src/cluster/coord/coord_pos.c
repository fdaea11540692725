/* coord_pos.c - the trainers' data positions in a cluster checkpoint, and
 * the rollback of the trainers to them (see docs/ARCHITECTURE.md, "The
 * checkpoint commit (cluster)").
 *
 * A checkpoint of the ps shards alone restores the parameters; for the run
 * to go on as it would have, each worker must also draw the batches it
 * would have drawn, with the Dropout masks it would have drawn. So while
 * the ps write their files, the coordinator asks every trainer (POSITION)
 * where its data stood at the checkpoint's version (worker_pos.c says how
 * a worker knows), and the commit records the answers in the manifest:
 *   trainers  the number of trainers
 *   pos.<t>   "<batches drawn since SETUP> <Dropout generators in hex>"
 * A restore (ps failover, `drover run --resume`) sends each trainer its
 * ROLLBACK before any ps is restored, and waits for all of them.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/coord/coord_fit_int.h"
#include "base/err.h"
#include "base/log.h"
#include "proto/wire_msgs.h"

static int trainer_of(const coord_fit_state *f, int node) {
  for (int t = 0; t < f->ntrainers; t++)
    if (f->trainers[t] == node) return t;
  return -1;
}

void coord__pos_clear(coord_fit_state *f) {
  free(f->ck.pos);
  f->ck.pos = NULL;
  f->ck.npos = 0;
  f->ck.pos_waiting = 0;
}

/* Whether trainer t can answer: registered and set up for this fit. */
static bool reachable(const coord_fit_state *f, int t) {
  int node = f->trainers[t];
  return f->c->ctl[node] && f->setup_ok && f->setup_ok[node];
}

int coord__pos_ask(coord_fit_state *f, uint64_t at) {
  coord_ck *ck = &f->ck;
  coord__pos_clear(f);
  ck->seq++;
  if (!ck->want_pos || f->ntrainers <= 0) return 0;
  for (int t = 0; t < f->ntrainers; t++)
    if (!reachable(f, t)) { /* a restarting worker starts its data over anyway */
      log_info("checkpoint step %" PRId64 ": trainer %d is not set up; no data positions", ck->step, t);
      ck->want_pos = false;
      return 0;
    }
  if (!(ck->pos = calloc((size_t)f->ntrainers + 1, sizeof *ck->pos)))
    return err_set(DRV_ENOMEM, "out of memory");
  ck->npos = f->ntrainers;
  for (int t = 0; t < f->ntrainers; t++) {
    wire_wr w;
    wire_wr_init(&w);
    wire_put_position(&w, &(wire_msg_position){at});
    coord__send(f->c, f->trainers[t], &w, WIRE_POSITION, ck->seq);
    ck->pos_waiting++;
  }
  return 0;
}

static void note_failure(coord_ck *ck, const char *fmt, const char *who, const char *msg) {
  if (ck->failed++ == 0) snprintf(ck->why, sizeof ck->why, fmt, who, msg);
}

static int on_position_ok(coord_fit_state *f, int t, uint32_t req, const uint8_t *pl, uint32_t len) {
  coord_ck *ck = &f->ck;
  wire_msg_position_ok m;
  char msg[512] = "", who[32];
  int rc = wire_get_position_ok(pl, len, &m);
  if (rc < 0) return rc;
  wire_str_copy(m.message, msg, sizeof msg);
  if (req != ck->seq || ck->state != CK_WRITING || t >= ck->npos || ck->pos[t].got)
    return 0; /* of an attempt given up */
  ckpos *p = &ck->pos[t];
  p->got = true;
  coord__node_name(&f->c->nodes[f->trainers[t]], who, sizeof who);
  if (m.status == DRV_ERANGE) ck->passed++;
  else if (m.status != 0) note_failure(ck, "%s: %s", who, msg);
  else if (m.rng.len > COORD_POS_RNG_MAX) note_failure(ck, "%s: %s", who, "too many Dropout generators");
  else {
    p->batches = m.batches;
    p->nrng = m.rng.len;
    memcpy(p->rng, m.rng.p, m.rng.len);
  }
  if (--ck->pos_waiting == 0 && ck->waiting == 0) coord__ckpt_finish(f);
  return 0;
}

int coord__pos_frame(coord_fit_state *f, int node, const wire_header *h, const uint8_t *pl) {
  int t = trainer_of(f, node);
  if (t < 0) return err_set(DRV_EPROTO, "%s from a node that is not a trainer", wire_type_name(h->type));
  if (h->type == WIRE_POSITION_OK) return on_position_ok(f, t, h->req, pl, h->len);
  wire_msg_rollback_ok m;
  char msg[512] = "", who[32];
  int rc = wire_get_rollback_ok(pl, h->len, &m);
  if (rc < 0) return rc;
  wire_str_copy(m.message, msg, sizeof msg);
  if (!f->ck.pos || t >= f->ck.npos || !f->ck.pos[t].rb_out) return 0;
  f->ck.pos[t].rb_out = false;
  f->ck.rb_waiting--;
  if (m.status != 0)
    coord__fail_fit(f, "%s could not roll back: %s",
                    coord__node_name(&f->c->nodes[node], who, sizeof who), msg);
  return 0;
}

/* ============================== the manifest ============================== */

int coord__pos_meta(coord_fit_state *f, const char **meta, int *m, char **owned) {
  coord_ck *ck = &f->ck;
  *owned = NULL;
  if (!ck->want_pos || !ck->pos || ck->npos != f->ntrainers) return 0;
  /* "pos.<t>\0<batches> <hex>\0" per trainer, and the count. */
  size_t per = 32 + 24 + 2 * COORD_POS_RNG_MAX + 2, cap = (size_t)ck->npos * per + 32;
  char *buf = malloc(cap), *at = buf;
  if (!buf) return err_set(DRV_ENOMEM, "out of memory");
  meta[(*m)++] = "trainers";
  meta[(*m)++] = at;
  at += sprintf(at, "%d", ck->npos) + 1;
  for (int t = 0; t < ck->npos; t++) {
    const ckpos *p = &ck->pos[t];
    meta[(*m)++] = at;
    at += sprintf(at, "pos.%d", t) + 1;
    meta[(*m)++] = at;
    at += sprintf(at, "%" PRIu64 " ", p->batches);
    for (uint32_t i = 0; i < p->nrng; i++) at += sprintf(at, "%02x", p->rng[i]);
    at++;
  }
  meta[*m] = NULL;
  *owned = buf;
  return 0;
}

/* "<batches> <hex>" into p; false when it does not parse. */
static bool parse_pos(const char *s, ckpos *p) {
  char *end;
  p->batches = strtoull(s, &end, 10);
  if (end == s || (*end != ' ' && *end != '\0')) return false;
  const char *h = *end ? end + 1 : end;
  size_t n = strlen(h);
  if (n % 2 || n / 2 > COORD_POS_RNG_MAX || (n / 2) % 32) return false;
  for (size_t i = 0; i < n / 2; i++) {
    unsigned v;
    if (sscanf(h + 2 * i, "%2x", &v) != 1) return false;
    p->rng[i] = (uint8_t)v;
  }
  p->nrng = (uint32_t)(n / 2);
  return true;
}

/* ============================== the rollback ============================== */

static bool rolled_back(coord *c, void *arg) {
  (void)arg;
  return c->fit->ck.rb_waiting <= 0;
}

/* The positions of m into f->ck.pos (all zero for m NULL): 0, or 1 when m
 * has none for these trainers (why says so). */
static int read_positions(coord_fit_state *f, const manifest *m, char *why, size_t n) {
  coord_ck *ck = &f->ck;
  const char *count = m ? manifest_meta(m, "trainers") : NULL;
  if (m && !count) return snprintf(why, n, "the checkpoint has no data positions"), 1;
  if (m && strtol(count, NULL, 10) != f->ntrainers)
    return snprintf(why, n, "the checkpoint is of %s trainers, the fit has %d", count, f->ntrainers), 1;
  if (!(ck->pos = calloc((size_t)f->ntrainers + 1, sizeof *ck->pos)))
    return err_set(DRV_ENOMEM, "out of memory");
  ck->npos = f->ntrainers;
  for (int t = 0; m && t < f->ntrainers; t++) {
    char key[32];
    snprintf(key, sizeof key, "pos.%d", t);
    const char *v = manifest_meta(m, key);
    if (!v || !parse_pos(v, &ck->pos[t]))
      return snprintf(why, n, "its %s is missing or damaged", key), 1;
  }
  return 0;
}

int coord__pos_rollback(coord_fit_state *f, const manifest *m) {
  coord_ck *ck = &f->ck;
  char why[256];
  coord__pos_clear(f);
  int rc = read_positions(f, m, why, sizeof why);
  if (rc != 0) {
    coord__pos_clear(f);
    if (rc > 0) rundir_event(&f->c->rd, "the workers' data goes on where it is: %s", why);
    return rc < 0 ? rc : 0;
  }
  ck->rb_waiting = 0;
  for (int t = 0; t < f->ntrainers; t++) {
    if (!reachable(f, t)) continue; /* set up again from the start when it is back */
    ckpos *p = &ck->pos[t];
    wire_wr w;
    wire_wr_init(&w);
    wire_put_rollback(&w, &(wire_msg_rollback){p->batches, {p->rng, p->nrng}});
    coord__send(f->c, f->trainers[t], &w, WIRE_ROLLBACK, 0);
    p->rb_out = true;
    ck->rb_waiting++;
  }
  double bound = coord__reply_bound(f);
  rc = coord__pump(f->c, rolled_back, NULL, bound, true);
  if (rc == DRV_ETIMEDOUT) {
    char who[512] = "";
    size_t len = 0;
    for (int t = 0; t < f->ntrainers && len < sizeof who; t++) {
      char name[32];
      if (ck->pos[t].rb_out)
        len += (size_t)snprintf(who + len, sizeof who - len, " %s",
                                coord__node_name(&f->c->nodes[f->trainers[t]], name, sizeof name));
    }
    rc = err_set(DRV_ETIMEDOUT, "no ROLLBACK_OK from%s within %.0f s", who, bound);
  }
  coord__pos_clear(f);
  return rc;
}

void coord__pos_node_lost(coord_fit_state *f, int node) {
  coord_ck *ck = &f->ck;
  int t = trainer_of(f, node);
  if (t < 0 || !ck->pos || t >= ck->npos) return;
  ckpos *p = &ck->pos[t];
  if (p->rb_out) {
    p->rb_out = false;
    ck->rb_waiting--;
  }
  if (ck->state == CK_WRITING && ck->want_pos && !p->got) {
    char who[32];
    p->got = true;
    note_failure(ck, "%s %s", coord__node_name(&f->c->nodes[node], who, sizeof who),
                 "was lost before it gave its data position");
    if (--ck->pos_waiting == 0 && ck->waiting == 0) coord__ckpt_finish(f);
  }
}
