/* l_nn_sparse.h - the id layers' Lua constructors and model:tables()
 * (l_nn_sparse.c), registered by luaopen_drover_nn (l_nn.c). */
#ifndef DROVER_L_NN_SPARSE_H
#define DROVER_L_NN_SPARSE_H

#include <lua.h>

/* nn.EmbeddingBag(n, dim [, { mode = "sum"|"mean", bags = "field"|"all", std = 1 }]) */
int lnn_embedding_bag(lua_State *L);
/* nn.SparseLinear(n, out [, { std = 0 }]) */
int lnn_sparse_linear(lua_State *L);
/* nn.Embedding(n, dim, { sparse = true [, std = 1] }): the options form of
 * nn.Embedding (sparse = false builds the dense one). */
int lnn_embedding_opts(lua_State *L);
/* model:tables() -> { { name =, rows =, dim =, held =, bytes = }, ... } */
int lnn_m_tables(lua_State *L);

#endif
