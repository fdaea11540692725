/* data_file.h - the bytes of a data file, behind the few calls its readers
 * make: open it (learning its size and whether it is gzip), read a byte
 * range of a plain file, and stream it from its start (decompressed when it
 * is gzip). A worker of files mode reads its shard's byte ranges through
 * data_file_pread; a coordinator checking a file, and a worker reading a
 * gzip file, stream it through data_file_read.
 *
 * An hdfs:// or webhdfs:// path (base/webhdfs.h) is read without a local
 * copy: GETFILESTATUS for the size, a WebHDFS OPEN with offset and length
 * for data_file_pread, and for data_file_read OPENs of DATA_FILE_CHUNK
 * bytes one after another through a buffer of that size (gzip inflated by
 * zlib as it comes: gzread wants a descriptor), so a coordinator checking
 * a 10 GB file on HDFS holds a few MiB of it.
 */
#ifndef DROVER_DATA_FILE_H
#define DROVER_DATA_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bytes of one OPEN of data_file_read's stream on HDFS. */
#define DATA_FILE_CHUNK ((size_t)4 << 20)

struct data_file_remote;

typedef struct data_file {
  const char *path; /* borrowed: named in every message */
  int fd;           /* -1 for a URL */
  struct data_file_remote *remote; /* owned: a URL's state, else NULL */
  int64_t size;     /* bytes of the file as stored (gzip: compressed); -1 when
                       it is not a regular file (a pipe) */
  bool gzip;        /* begins with gzip's magic bytes */
  void *gz;         /* gzFile of the stream, made by the first data_file_read */
  int64_t pos;      /* bytes data_file_read handed out (decompressed) */
} data_file;

/* Opens path (a local path or an hdfs:// or webhdfs:// URL) for reading.
 * "cannot open 'PATH': REASON" on failure, REASON being HDFS's exception
 * and message for a URL (f is then closed: data_file_close is harmless). */
int data_file_open(data_file *f, const char *path);

/* Exactly n bytes at byte `at` of a plain file (not gzip). A read past
 * the end is DRV_EIO naming the file and the byte ("changed while it was
 * read?"): callers check the size first. */
int data_file_pread(data_file *f, void *buf, size_t n, int64_t at);

/* The next bytes of the file from its start, decompressed when it is gzip
 * (members one after another): *got == n but at the end. A corrupt or cut
 * gzip file is DRV_EPARSE naming the byte of the compressed file. Do not
 * mix with data_file_pread's offsets: this is a stream. */
int data_file_read(data_file *f, void *buf, size_t n, size_t *got);

void data_file_close(data_file *f);

/* Bytes worth fetching in one data_file_pread when rows to read are
 * scattered (the gaps read through): `local` for a local file, where a
 * read costs a system call, 4 times DATA_FILE_CHUNK (16 MiB) on HDFS, where an
 * OPEN costs tens of milliseconds (a NameNode round trip and a redirect). */
size_t data_file_span(const data_file *f, size_t local);

/* What this process fetched from HDFS through data_file (every file, all
 * threads): OPEN requests and their bytes. Tests read it to see that a
 * worker read byte ranges rather than whole files. */
void data_file_hdfs_counts(uint64_t *opens, uint64_t *bytes);

#endif
