/* test_webhdfs.c - WebHDFS URLs: the webhdfs:// form, hdfs:// resolved
 * through a Hadoop client configuration (fs.defaultFS,
 * dfs.namenode.http-address, its wildcard host, comments and entities),
 * the errors that say what to set, percent-encoding, the user name, and
 * an unreachable NameNode's bounded error. The operations themselves run
 * against a real HDFS in tests/cli/test_hdfs.sh. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/hadoopconf.h"
#include "base/webhdfs.h"
#include "base/webhdfs_int.h"
#include "harness.h"

/* A conf dir "conf" in the case's directory with these files' bodies
 * (NULL: no such file), set as HADOOP_CONF_DIR. */
static void conf_dir(const char *core, const char *hdfs) {
  mkdir("conf", 0755);
  unlink("conf/core-site.xml");
  unlink("conf/hdfs-site.xml");
  if (core) harness_write_str("conf/core-site.xml", core);
  if (hdfs) harness_write_str("conf/hdfs-site.xml", hdfs);
  char cwd[1024];
  CHECK(getcwd(cwd, sizeof cwd) != NULL);
  char dir[1100];
  snprintf(dir, sizeof dir, "%s/conf", cwd);
  CHECK(setenv("HADOOP_CONF_DIR", dir, 1) == 0);
}

#define PROP(n, v) "<property><name>" n "</name><value>" v "</value></property>\n"
#define SITE(body) "<?xml version=\"1.0\"?>\n<configuration>\n" body "</configuration>\n"

TEST(webhdfs_is_url) {
  CHECK(webhdfs_is_url("hdfs://nn:8020/x"));
  CHECK(webhdfs_is_url("webhdfs://nn:9870/x"));
  CHECK(webhdfs_is_url("hdfs:///x"));
  CHECK(!webhdfs_is_url("/data/x.csv"));
  CHECK(!webhdfs_is_url("file:///x"));
  CHECK(!webhdfs_is_url("hdfs:/x"));
  CHECK(!webhdfs_is_url(NULL));
}

TEST(webhdfs_resolve_webhdfs_needs_no_conf) {
  char out[WEBHDFS_URL_MAX];
  CHECK(setenv("HADOOP_CONF_DIR", "/nonexistent", 1) == 0);
  CHECK_OK(webhdfs_resolve("webhdfs://127.0.0.1:15000/a/b.csv", out, sizeof out));
  CHECK(strcmp(out, "webhdfs://127.0.0.1:15000/a/b.csv") == 0);
  CHECK_OK(webhdfs_resolve("webhdfs://nn", out, sizeof out));
  CHECK(strcmp(out, "webhdfs://nn:9870/") == 0);
  CHECK_OK(webhdfs_resolve("webhdfs://[::1]:9871/x", out, sizeof out));
  CHECK(strcmp(out, "webhdfs://[::1]:9871/x") == 0);
  CHECK_ERR(webhdfs_resolve("webhdfs://nn:99999/x", out, sizeof out), DRV_EINVAL, "bad port");
  CHECK_ERR(webhdfs_resolve("webhdfs://:9870/x", out, sizeof out), DRV_EINVAL, "no host");
  CHECK_ERR(webhdfs_resolve("/local/x", out, sizeof out), DRV_EINVAL, "not an hdfs://");
  CHECK_ERR(webhdfs_resolve("webhdfs://nn:1/x", out, 10), DRV_ERANGE, "too long");
}

TEST(webhdfs_resolve_hdfs_through_the_conf) {
  char out[WEBHDFS_URL_MAX];
  conf_dir(SITE(PROP("fs.defaultFS", "hdfs://nn.example:8020")),
           SITE("<!-- " PROP("dfs.namenode.http-address", "wrong:1") " -->\n"
                PROP("dfs.replication", "1")
                "<property>\n  <name> dfs.namenode.http-address </name>\n"
                "  <value>\n    nn-http.example:50070\n  </value>\n</property>\n"));
  CHECK_OK(webhdfs_resolve("hdfs://nn.example:8020/data/train.csv", out, sizeof out));
  CHECK(strcmp(out, "webhdfs://nn-http.example:50070/data/train.csv") == 0);
  /* hdfs:///: the NameNode of fs.defaultFS */
  CHECK_OK(webhdfs_resolve("hdfs:///user/x", out, sizeof out));
  CHECK(strcmp(out, "webhdfs://nn-http.example:50070/user/x") == 0);
}

TEST(webhdfs_resolve_wildcard_and_default_port) {
  char out[WEBHDFS_URL_MAX];
  conf_dir(SITE(PROP("fs.defaultFS", "hdfs://nn:8020/")),
           SITE(PROP("dfs.namenode.http-address", "0.0.0.0:9871")));
  CHECK_OK(webhdfs_resolve("hdfs:///a", out, sizeof out));
  CHECK(strcmp(out, "webhdfs://nn:9871/a") == 0);
  /* No dfs.namenode.http-address: Hadoop 3's 9870 on the URL's host. */
  conf_dir(SITE(PROP("fs.defaultFS", "hdfs://nn:8020")), NULL);
  CHECK_OK(webhdfs_resolve("hdfs://other:8020/b", out, sizeof out));
  CHECK(strcmp(out, "webhdfs://other:9870/b") == 0);
}

TEST(webhdfs_resolve_says_what_to_set) {
  char out[WEBHDFS_URL_MAX];
  conf_dir(NULL, NULL);
  CHECK_ERR(webhdfs_resolve("hdfs:///a", out, sizeof out), DRV_EINVAL, "no fs.defaultFS");
  CHECK_STR_CONTAINS(err_msg(), "HADOOP_CONF_DIR");
  CHECK_STR_CONTAINS(err_msg(), "webhdfs://HOST:PORT");
  conf_dir(SITE(PROP("fs.defaultFS", "file:///")), NULL);
  CHECK_ERR(webhdfs_resolve("hdfs:///a", out, sizeof out), DRV_EINVAL, "not an HDFS");
  conf_dir(SITE(PROP("fs.defaultFS", "hdfs://ns1")), SITE(PROP("dfs.nameservices", "ns1,ns2")));
  CHECK_ERR(webhdfs_resolve("hdfs:///a", out, sizeof out), DRV_EINVAL, "HA nameservice");
  CHECK_STR_CONTAINS(err_msg(), "dfs.namenode.http-address");
  conf_dir(NULL, SITE(PROP("dfs.namenode.http-address", "nohost")));
  CHECK_ERR(webhdfs_resolve("hdfs://nn/a", out, sizeof out), DRV_EINVAL, "is not HOST:PORT");
}

TEST(hadoopconf_entities_last_wins_and_cut_files) {
  char v[64];
  const char *p = harness_write_str("s.xml", SITE(PROP("a", "1") PROP("b", "x&amp;y&lt;") PROP("a", "2")
                                                   "<property><name>e</name><value/></property>"));
  char path[512];
  snprintf(path, sizeof path, "%s", p);
  CHECK_INT_EQ(hadoopconf_get(path, "a", v, sizeof v), 1);
  CHECK(strcmp(v, "2") == 0);
  CHECK_INT_EQ(hadoopconf_get(path, "b", v, sizeof v), 1);
  CHECK(strcmp(v, "x&y<") == 0);
  CHECK_INT_EQ(hadoopconf_get(path, "e", v, sizeof v), 1);
  CHECK(strcmp(v, "") == 0);
  CHECK_INT_EQ(hadoopconf_get(path, "missing", v, sizeof v), 0);
  CHECK_INT_EQ(hadoopconf_get("no-such-file.xml", "a", v, sizeof v), 0);
  CHECK_ERR(hadoopconf_get(path, "b", v, 3), DRV_ERANGE, "too long");
  p = harness_write_str("cut.xml", "<configuration><property><name>a</name>");
  snprintf(path, sizeof path, "%s", p);
  CHECK_ERR(hadoopconf_get(path, "a", v, sizeof v), DRV_EPARSE, "without its </property>");
}

TEST(webhdfs_encode_and_user) {
  char out[64], u[64];
  CHECK_OK(webhdfs__encode("/a b/c%d?e&f=ü", 1, out, sizeof out));
  CHECK(strcmp(out, "/a%20b/c%25d%3Fe%26f%3D%C3%BC") == 0);
  CHECK_OK(webhdfs__encode("/x/y", 0, out, sizeof out));
  CHECK(strcmp(out, "%2Fx%2Fy") == 0);
  CHECK_ERR(webhdfs__encode("/abcdef", 1, out, 4), DRV_ERANGE, "too long");
  CHECK(setenv("HADOOP_USER_NAME", "alice", 1) == 0);
  CHECK_OK(webhdfs_user(u, sizeof u));
  CHECK(strcmp(u, "alice") == 0);
  CHECK(unsetenv("HADOOP_USER_NAME") == 0);
  CHECK_OK(webhdfs_user(u, sizeof u));
  CHECK(u[0] != '\0');
}

TEST(webhdfs_unreachable_namenode_is_a_clear_error) {
  webhdfs_info st;
  /* Port 1 on loopback: nothing listens, the connection is refused. */
  CHECK_ERR(webhdfs_stat("webhdfs://127.0.0.1:1/x", &st), DRV_EIO, "the NameNode at http://127.0.0.1:1");
  CHECK_STR_CONTAINS(err_msg(), "GETFILESTATUS webhdfs://127.0.0.1:1/x");
  conf_dir(NULL, NULL);
  CHECK_ERR(webhdfs_stat("hdfs:///x", &st), DRV_EINVAL, "fs.defaultFS");
}
