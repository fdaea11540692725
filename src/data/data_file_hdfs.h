/* data_file_hdfs.h - data_file's backend for hdfs:// and webhdfs:// URLs
 * (base/webhdfs.h): the same four calls, for data_file.c only.
 */
#ifndef DROVER_DATA_FILE_HDFS_H
#define DROVER_DATA_FILE_HDFS_H

#include "data/data_file.h"

/* f->path a URL, f otherwise zeroed: resolves it, stats it (a directory is
 * refused) and reads its first two bytes for gzip's magic. */
int data_file_hdfs_open(data_file *f);
/* data_file_pread's contract, on the bytes as stored (gzip or not). */
int data_file_hdfs_pread(data_file *f, void *buf, size_t n, int64_t at);
/* data_file_read's contract (f->pos left to the caller). */
int data_file_hdfs_read(data_file *f, void *buf, size_t n, size_t *got);
/* Frees f->remote (NULL is fine). */
void data_file_hdfs_close(data_file *f);

#endif
