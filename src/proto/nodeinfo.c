/* nodeinfo.c - probing what a node got (nodeinfo.h). Each probe falls back
 * quietly: a missing /sys file or variable means "no limit there". */
#include "proto/nodeinfo.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "numeric/tensor.h"

static void copy_env(char *out, size_t n, const char *var) {
  const char *v = getenv(var);
  snprintf(out, n, "%s", v ? v : "");
}

/* cgroup v2's memory.max of our own cgroup (0: none or unreadable). */
static uint64_t cgroup_memory_max(void) {
  FILE *f = fopen("/proc/self/cgroup", "r");
  if (!f) return 0;
  char line[512], path[600] = "";
  while (fgets(line, sizeof line, f))
    if (strncmp(line, "0::", 3) == 0) {
      line[strcspn(line, "\n")] = '\0';
      snprintf(path, sizeof path, "/sys/fs/cgroup%s/memory.max", line + 3);
    }
  fclose(f);
  if (!path[0] || !(f = fopen(path, "r"))) return 0;
  unsigned long long v = 0;
  int got = fscanf(f, "%llu", &v); /* "max" reads as nothing */
  fclose(f);
  return got == 1 ? (uint64_t)v : 0;
}

/* What Slurm granted, in bytes (0: not under Slurm): the job's
 * SLURM_MEM_PER_NODE (MiB), or SLURM_MEM_PER_CPU (MiB) times the step's
 * CPUs per task. A step's own --mem is not in its environment: the Slurm
 * launcher passes it as DROVER_SLURM_MEM_MIB. */
static uint64_t slurm_memory(void) {
  const char *step = getenv("DROVER_SLURM_MEM_MIB"); /* launch_slurm.c: the step's --mem */
  if (step && *step) return (uint64_t)strtoull(step, NULL, 10) << 20;
  const char *node = getenv("SLURM_MEM_PER_NODE"), *cpu = getenv("SLURM_MEM_PER_CPU");
  if (node && *node) return (uint64_t)strtoull(node, NULL, 10) << 20;
  if (!cpu || !*cpu) return 0;
  const char *cpt = getenv("SLURM_CPUS_PER_TASK");
  unsigned long long n = cpt && *cpt ? strtoull(cpt, NULL, 10) : 1;
  return ((uint64_t)strtoull(cpu, NULL, 10) << 20) * (n ? n : 1);
}

static uint64_t least(uint64_t a, uint64_t b) { return !a ? b : !b ? a : a < b ? a : b; }

void nodeinfo_probe(node_info *ni) {
  memset(ni, 0, sizeof *ni);
  if (gethostname(ni->hostname, sizeof ni->hostname) != 0) ni->hostname[0] = '\0';
  ni->hostname[sizeof ni->hostname - 1] = '\0';
  ni->threads = (uint32_t)tensor_threads();
  cpu_set_t set;
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  ni->affinity = sched_getaffinity(0, sizeof set, &set) == 0 ? (uint32_t)CPU_COUNT(&set)
                 : online > 0                               ? (uint32_t)online
                                                            : 1;
  long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
  uint64_t ram = pages > 0 && size > 0 ? (uint64_t)pages * (uint64_t)size : 0;
  ni->memory = least(least(ram, cgroup_memory_max()), slurm_memory());
  const char *gpus = getenv("SLURM_STEP_GPUS");
  if (!gpus || !*gpus) gpus = getenv("CUDA_VISIBLE_DEVICES");
  snprintf(ni->gpus, sizeof ni->gpus, "%s", gpus ? gpus : "");
  copy_env(ni->slurm_job, sizeof ni->slurm_job, "SLURM_JOB_ID");
  copy_env(ni->slurm_step, sizeof ni->slurm_step, "SLURM_STEP_ID");
  copy_env(ni->slurm_node, sizeof ni->slurm_node, "SLURMD_NODENAME");
  copy_env(ni->place, sizeof ni->place, "DROVER_PLACE");
  if (!ni->place[0]) copy_env(ni->place, sizeof ni->place, "CONTAINER_ID");
}

void nodeinfo_to_msg(const node_info *ni, wire_msg_register *m) {
  m->hostname = WIRE_STR(ni->hostname);
  m->threads = ni->threads;
  m->cpus = ni->affinity;
  m->memory = ni->memory;
  m->gpus = WIRE_STR(ni->gpus);
  m->slurm_job = WIRE_STR(ni->slurm_job);
  m->slurm_step = WIRE_STR(ni->slurm_step);
  m->slurm_node = WIRE_STR(ni->slurm_node);
  m->place = WIRE_STR(ni->place);
}

int nodeinfo_from_msg(const wire_msg_register *m, node_info *ni) {
  memset(ni, 0, sizeof *ni);
  ni->threads = m->threads;
  ni->affinity = m->cpus;
  ni->memory = m->memory;
  int rc = wire_str_copy(m->hostname, ni->hostname, sizeof ni->hostname);
  if (rc == 0) rc = wire_str_copy(m->gpus, ni->gpus, sizeof ni->gpus);
  if (rc == 0) rc = wire_str_copy(m->slurm_job, ni->slurm_job, sizeof ni->slurm_job);
  if (rc == 0) rc = wire_str_copy(m->slurm_step, ni->slurm_step, sizeof ni->slurm_step);
  if (rc == 0) rc = wire_str_copy(m->slurm_node, ni->slurm_node, sizeof ni->slurm_node);
  if (rc == 0) rc = wire_str_copy(m->place, ni->place, sizeof ni->place);
  return rc;
}

const char *nodeinfo_format(const node_info *ni, char *buf, size_t n) {
  int k = snprintf(buf, n, "%u threads, %u cpus, %.1fG", (unsigned)ni->threads,
                   (unsigned)ni->affinity, (double)ni->memory / (1 << 30));
  if (k > 0 && (size_t)k < n && ni->gpus[0]) k += snprintf(buf + k, n - (size_t)k, ", gpus %s", ni->gpus);
  if (k > 0 && (size_t)k < n && ni->slurm_job[0])
    snprintf(buf + k, n - (size_t)k, ", slurm %s.%s on %s", ni->slurm_job,
             ni->slurm_step[0] ? ni->slurm_step : "?", ni->slurm_node[0] ? ni->slurm_node : "?");
  return buf;
}
