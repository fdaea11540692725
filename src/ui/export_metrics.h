/* export_metrics.h - `drover export-metrics`: a run's scalars (its
 * metrics.jsonl) as one table, as TensorBoard's CSV download gives them
 * (wall time, step, value) with the tag, and the node that reported it on
 * a cluster, beside each value:
 *
 *   wall_time,tag,step,value,node
 *   1795527062.338,loss,1,0.760057509,worker:0
 *
 * wall_time is Unix seconds: metrics.jsonl's "time" counts from the start
 * of its fit, whose time events.log gives ("fit ..." lines, in order). The
 * tags are the names of a line's series, as metrics_series (metrics.h)
 * tells them (loss, accuracy, eval_loss, eval_accuracy, lr...); a value
 * JSON could not hold (NaN, an infinity: null in the file) is "nan".
 */
#ifndef DROVER_EXPORT_METRICS_H
#define DROVER_EXPORT_METRICS_H

#include <stdio.h>

typedef enum { EXPORT_CSV, EXPORT_JSONL } export_format;

/* Writes the scalars of the run directory `dir` to out: CSV with a header
 * line, or one JSON object per value ({"wall_time", "tag", "step",
 * "value", "node" when there is one}). Returns the number of values, or
 * DRV_EIO ("cannot read 'dir/metrics.jsonl': ...") / DRV_EINVAL (a line
 * that is not JSON, with its number). */
long export_metrics(const char *dir, export_format fmt, FILE *out);

#endif
