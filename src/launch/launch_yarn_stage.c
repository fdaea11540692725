/* launch_yarn_stage.c - the YARN launcher's local resources: this drover
 * and the script's files, uploaded through the ApplicationMaster (POST
 * /put) to the application's staging directory on the cluster's default
 * file system (HDFS, or file:/// on a one-machine cluster), which the AM
 * writes with Hadoop's FileSystem: drover needs no HDFS client, and the
 * cluster's own NodeManagers then download each file into every node's
 * container ("localisation"). Each upload's answer is the staged copy's
 * URL, size and timestamp, which every /start hands back as the
 * container's local resources: the binary as "drover" and each file
 * under the name the ssh launcher gives it, links in the container's
 * working directory, where the node runs.
 *
 * Uploads happen once, at the start, before any node: they are as
 * synchronous as the rest of the start, bounded by a time that grows
 * with the file's size (at least 1 MB/s).
 *
 * Each node's key file goes the same way, at each start of the node
 * (launch_yarn__stage_key): STAGING/files/keys/KEY, owner-only, the
 * container's local resource YARN_KEY_FILE. A node's key never travels
 * through a file system the coordinator and the node share, and the AM
 * removes it with the staging directory.
 */
#include "launch/launch_yarn_int.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/err.h"

#define STAGE_MIN_MS 60000L

/* "NAME\tURL\tSIZE\tTIMESTAMP\n" from the AM's answer to /put, malloc'd. */
static int resource_line(const char *name, const char *answer, char **out) {
  char url[2048];
  unsigned long long size, ts;
  if (sscanf(answer, "%2047s %llu %llu", url, &size, &ts) != 3 || strlen(url) >= sizeof url - 1)
    return err_set(DRV_EPARSE, "YARN: staging '%s': unexpected answer '%.200s'", name, answer);
  size_t n = strlen(name) + strlen(url) + 48;
  *out = malloc(n);
  if (!*out) return err_set(DRV_ENOMEM, "out of memory");
  snprintf(*out, n, "%s\t%s\t%llu\t%llu\n", name, url, size, ts);
  return 0;
}

/* Appends one resource line to y->files. */
static int add_line(yarn_launcher *y, const char *line) {
  size_t have = y->files ? strlen(y->files) : 0, add = strlen(line);
  if (add > SIZE_MAX - have - 1) return err_set(DRV_ERANGE, "yarn: too many files");
  char *p = realloc(y->files, have + add + 1);
  if (!p) return err_set(DRV_ENOMEM, "out of memory");
  y->files = p;
  memcpy(p + have, line, add + 1);
  y->nfiles++;
  return 0;
}

/* Why the file cannot be a local resource named `name`, or 0. */
static int check_file(const char *path, const char *name) {
  struct stat st;
  if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
    return err_set(DRV_EINVAL, "files: '%s' is not a readable file", path);
  for (const char *c = name; *c; c++)
    if ((unsigned char)*c < 0x20)
      return err_set(DRV_EINVAL, "files: '%s': a YARN local resource's name cannot hold "
                     "control characters", path);
  return 0;
}

int launch_yarn__check_files(const launch_config *cfg) {
  int rc = 0;
  for (int i = 0; rc == 0 && i < cfg->nfiles; i++) {
    char name[PATH_MAX];
    rc = launch__ship_name(cfg->files[i], name, sizeof name);
    if (rc == 0) rc = check_file(cfg->files[i], name);
    if (rc == 0 && strcmp(name, "drover") == 0)
      rc = err_set(DRV_EINVAL, "files: '%s' would hide the drover binary in the container "
                   "(rename it)", cfg->files[i]);
    if (rc == 0 && strcmp(name, YARN_KEY_FILE) == 0)
      rc = err_set(DRV_EINVAL, "files: '%s' would hide the node's key file in the container "
                   "(rename it)", cfg->files[i]);
    for (int k = 0; rc == 0 && k < i; k++) {
      char other[PATH_MAX];
      if (launch__ship_name(cfg->files[k], other, sizeof other) == 0 && !strcmp(other, name))
        rc = err_set(DRV_EINVAL, "files: '%s' and '%s' both become '%s' in the container",
                     cfg->files[k], cfg->files[i], name);
    }
  }
  return rc;
}

/* Uploads path as STAGING/files/STAGE_NAME; *line: its resource line, the
 * link `name` in the container's working directory (malloc'd). */
static int put(yarn_launcher *y, const char *path, const char *stage_name, const char *name,
               char **line) {
  struct stat st;
  if (stat(path, &st) != 0) return err_set(DRV_EIO, "files: '%s' vanished", path);
  char header[PATH_MAX + 32];
  snprintf(header, sizeof header, "X-Drover-Name: %s", stage_name);
  long ms = STAGE_MIN_MS + (long)(st.st_size / 1000); /* 1 MB/s at the least */
  char *resp = NULL;
  int rc = launch_yarn__am_req(y, "POST", "/put", NULL, path, header, ms, &resp);
  if (rc < 0) return err_set(rc, "YARN: staging '%s': %s", path, err_msg());
  rc = resource_line(name, resp, line);
  free(resp);
  return rc;
}

static int put_file(yarn_launcher *y, const char *path, const char *name) {
  char *line = NULL;
  int rc = check_file(path, name);
  if (rc == 0) rc = put(y, path, name, name, &line);
  if (rc == 0) rc = add_line(y, line);
  free(line);
  return rc;
}

int launch_yarn__stage_key(yarn_launcher *y, const char *secret_file, const char *key,
                           char **line) {
  char stage_name[YARN_KEY_MAX + 8];
  snprintf(stage_name, sizeof stage_name, "keys/%s", key);
  int rc = put(y, secret_file, stage_name, YARN_KEY_FILE, line);
  if (rc < 0) return err_set(rc, "YARN: %s's key: %s", key, err_msg());
  return 0;
}

int launch_yarn__stage(yarn_launcher *y, const launch_config *cfg) {
  int rc = launch_yarn__check_files(cfg);
  if (rc == 0) rc = put_file(y, launch_self_exe(), "drover");
  for (int i = 0; rc == 0 && i < cfg->nfiles; i++) {
    char name[PATH_MAX];
    rc = launch__ship_name(cfg->files[i], name, sizeof name);
    if (rc == 0) rc = put_file(y, cfg->files[i], name);
  }
  if (rc == 0)
    launch_yarn__note(y, "YARN application %s: drover and %d file%s staged as local resources",
                      y->app, cfg->nfiles, cfg->nfiles == 1 ? "" : "s");
  return rc;
}
