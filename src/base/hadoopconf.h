/* hadoopconf.h - one property of a Hadoop configuration file
 * (core-site.xml, hdfs-site.xml): what a cluster's client configuration
 * ($HADOOP_CONF_DIR) says, read without a JVM.
 *
 * The files are `<configuration><property><name>N</name><value>V</value>
 * ...</property>...</configuration>`; comments are skipped, the five XML
 * entities decoded, surrounding white space trimmed, and a later
 * definition of a name wins. XInclude and ${var} expansion are not done.
 *
 * Base layer: includes only err.h of drover's.
 */
#ifndef DROVER_HADOOPCONF_H
#define DROVER_HADOOPCONF_H

#include <stddef.h>

/* The directory of the client configuration into out: $HADOOP_CONF_DIR,
 * else $HADOOP_HOME/etc/hadoop, else /etc/hadoop/conf (whether or not it
 * exists). 0, or DRV_ERANGE when it does not fit. */
int hadoopconf_dir(char *out, size_t cap);

/* The value of property `name` in the file `path` into `out` (cap bytes,
 * NUL-terminated). 1 when found, 0 when the file or the property is not
 * there, DRV_EIO when the file cannot be read, DRV_ERANGE when the value
 * (or the file, over 4 MiB) is too long, DRV_EPARSE when a property is cut
 * short. */
int hadoopconf_get(const char *path, const char *name, char *out, size_t cap);

/* hadoopconf_get of FILE ("core-site.xml") in hadoopconf_dir(). */
int hadoopconf_lookup(const char *file, const char *name, char *out, size_t cap);

#endif
