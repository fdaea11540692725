/* nodeinfo.h - what a node actually got where it runs: its host, threads,
 * CPUs, memory, GPUs, and its place in a Slurm job. Probed by the node at
 * start, sent in REGISTER, kept by the coordinator (c:nodes(), the
 * dashboard, <run>/nodes.tsv). Plain data: no ownership to manage.
 */
#ifndef DROVER_NODEINFO_H
#define DROVER_NODEINFO_H

#include <stdint.h>

#include "proto/wire_msgs.h"

typedef struct node_info {
  char hostname[64];   /* gethostname() */
  uint32_t threads;    /* BLAS threads in effect */
  uint32_t affinity;   /* CPUs the process may run on (sched_getaffinity) */
  uint64_t memory;     /* bytes it may use: the least of RAM, its cgroup's
                          memory.max and Slurm's SLURM_MEM_PER_NODE */
  char gpus[64];       /* visible GPU ids (CUDA_VISIBLE_DEVICES, Slurm's
                          step GPUs); "" for none */
  char slurm_job[24];  /* SLURM_JOB_ID, "" outside Slurm */
  char slurm_step[24]; /* SLURM_STEP_ID */
  char slurm_node[64]; /* SLURMD_NODENAME */
  char place[96];      /* its place as its launcher names it: $DROVER_PLACE (the
                          Spark task sets "app-... exec N"), else YARN's
                          $CONTAINER_ID; "" elsewhere */
} node_info;

/* Fills *ni from this process and its environment. */
void nodeinfo_probe(node_info *ni);

/* REGISTER's node fields (wire_msgs.h): nodeinfo_to_msg points m's
 * strings at ni's (ni must outlive m's use); nodeinfo_from_msg copies a
 * decoded m into ni: DRV_EPARSE when a string is longer than its field. */
void nodeinfo_to_msg(const node_info *ni, wire_msg_register *m);
int nodeinfo_from_msg(const wire_msg_register *m, node_info *ni);

/* "8 threads, 8 cpus, 23.5G, gpus 0,1, slurm 12.3 on n01" into buf. */
const char *nodeinfo_format(const node_info *ni, char *buf, size_t n);

#endif
