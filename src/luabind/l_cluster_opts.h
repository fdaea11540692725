/* l_cluster_opts.h - reading drover.cluster{...}'s options (l_cluster_opts.c). */
#ifndef DROVER_L_CLUSTER_OPTS_H
#define DROVER_L_CLUSTER_OPTS_H

#include <lua.h>
#include <stdbool.h>
#include <stdint.h>

#include "cluster/coord/coord.h"

/* Fills *o from the options table at index 1, raising a Lua error that
 * names the key on any mistake. The strings in *o borrow from that table;
 * C arrays (hosts, files, slurm options) are userdata pushed on the stack,
 * so both live as long as the caller keeps the stack. Returns how many
 * values it pushed. */
int lcluster_read_opts(lua_State *L, coord_opts *o);

/* tensorboard = true | false | { port = N, bind = "host" }, the value at
 * idx (nil: off) into *o: whether it is on. A mistake raises a Lua error
 * naming "WHAT: tensorboard...". Whether TensorBoard can start (installed,
 * the port free) is tboard_check's. */
bool lcluster_tensorboard(lua_State *L, int idx, const char *what, tboard_opts *o);

/* "512M", "4G", "1.5T", "4GiB", "4096" (MiB, as Slurm's --mem) into bytes:
 * 0, or -1 when s is not a size. */
int lcluster_parse_memory(const char *s, uint64_t *bytes);

#endif
