/* ckfs_int.h - the two kinds of checkpoint directory behind ckfs.h: one
 * table of operations each (ckfs.c: local; ckfs_hdfs.c: WebHDFS). */
#ifndef DROVER_CKFS_INT_H
#define DROVER_CKFS_INT_H

#include "train/ckfs.h"

typedef struct ckfs_ops {
  int (*list)(const char *dir, ckpt_entry **out, bool all);
  bool (*committed)(const char *step);
  int (*mkdirs)(const char *dir);
  void (*remove)(const char *step);
  int (*manifest_read)(const char *step, manifest *m);
  int (*manifest_verify)(const char *step, const manifest *m);
  int (*manifest_commit)(const char *step, const char *const *files, const uint64_t *sizes,
                         const char *const *hexes, const char *const *meta);
} ckfs_ops;

extern const ckfs_ops ckfs__hdfs;

/* Sorts entries by step (both kinds list in any order). */
void ckfs__sort(ckpt_entry *e, int n);

#endif
