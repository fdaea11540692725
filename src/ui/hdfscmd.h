/* hdfscmd.h - `drover hdfs`: ls, cat, put, get, rm, mkdir, mv and stat of
 * hdfs:// and webhdfs:// URLs through WebHDFS (base/webhdfs.h), with no
 * JVM: the users' client and the test surface of the WebHDFS client. */
#ifndef DROVER_HDFSCMD_H
#define DROVER_HDFSCMD_H

#include <stdio.h>

/* Runs `drover hdfs ARGS`: argv[0] is the verb ("ls"), argc counts from
 * it. Output to `out`; a failure is one line "drover hdfs VERB: WHY" on
 * `err`. Returns the exit status: 0, 1 on a failure (any URL of several
 * failing), 2 on a usage error (its message printed; the caller prints
 * the usage). */
int hdfscmd_main(int argc, char **argv, FILE *out, FILE *err);

#endif
