/* l_feed.h - train.feed as a coordinator feed source (l_feed.c) and
 * data.stream (l_stream.c). */
#ifndef DROVER_L_FEED_H
#define DROVER_L_FEED_H

#include <lua.h>
#include <stdbool.h>

#include "cluster/coord/coord.h"
#include "data/data_stream.h"
#include "luabind/l_settings.h"
#include "luabind/l_util.h"

/* The feed of one c:fit: the source and what it reads from. Lives on the
 * C stack of c:fit; the Lua values it uses stay on the Lua stack. */
typedef struct lfeed {
  coord_feed_source src;
  lua_State *L;
  int fn;            /* a function source: its stack index */
  int64_t epochs;    /* train.epochs */
  uint32_t epoch;
  bool got;          /* the function gave a batch in this epoch */
  bool dataset;      /* src is coord_feed_source_dataset's */
  data_stream *stream; /* a stream source (borrowed from its userdata) */
  int64_t batch;
  tensor *x, *y;     /* the last batch handed out (the source's until the next) */
} lfeed;

/* Reads exp.train.feed (at e->train_feed) into f; raises a Lua error for a
 * source that cannot be opened. May push a value (a stream it opened),
 * which must stay on the stack until lfeed_close. */
void lfeed_open(lua_State *L, const lsettings *e, lfeed *f);
void lfeed_close(lfeed *f);

/* data.stream into the drover.data table on top of the stack. */
void lstream_register(lua_State *L);
/* The stream at idx (a drover.Stream), or for a path or "-" a new one
 * pushed on the stack (CSV, label last). Raises for anything else, and
 * when epochs > 1 (a stream is read once). */
data_stream *ldata_stream_for_feed(lua_State *L, int idx, int64_t epochs);

#endif
