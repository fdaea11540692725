package drover.yarn;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.yarn.api.records.ApplicationId;

/**
 * The application's staging directory on the cluster's default file system
 * (HDFS on a real cluster, file:/// on the test one): what outlives one
 * ApplicationMaster attempt.
 *
 *   STAGING/files/NAME   the drover binary and the script's files, uploaded
 *                        by drover (POST /put): the containers' local
 *                        resources, which every NodeManager downloads;
 *                        files/keys/KEY, each node's key file (0600), its
 *                        container's alone
 *   STAGING/nodes/KEY    one per node the AM was asked for: its state line
 *                        ("pending", "running CONTAINER_ID", "exit STATUS
 *                        DIAG") and its /start body, so that a new attempt
 *                        adopts the running containers, asks again for the
 *                        pending ones and reports the exits drover has not
 *                        heard of yet
 *
 * STAGING is $DROVER_AM_STAGING/APP_ID, or ~/.droverStaging/APP_ID on the
 * default file system. The AM removes it when drover finishes the
 * application, and when drover stops answering (DroverAM.java); an
 * application killed through the RM leaves it behind.
 */
final class Staging {
  final FileSystem fs;
  final Path dir;

  Staging(Configuration conf, ApplicationId app) throws IOException {
    fs = FileSystem.get(conf);
    String base = System.getenv("DROVER_AM_STAGING");
    Path root = base == null || base.isEmpty() ? new Path(fs.getHomeDirectory(), ".droverStaging")
        : new Path(base);
    dir = fs.makeQualified(new Path(root, app.toString()));
    fs.mkdirs(dir, new FsPermission((short) 0700));
  }

  // InputStream's own transferTo and readAllBytes are Java 9's; the AM is
  // built for Java 8 (see pom.xml).
  static void copy(InputStream in, OutputStream out) throws IOException {
    byte[] b = new byte[65536];
    for (int n; (n = in.read(b)) > 0; ) out.write(b, 0, n);
  }

  static byte[] readAll(InputStream in) throws IOException {
    ByteArrayOutputStream b = new ByteArrayOutputStream();
    copy(in, b);
    return b.toByteArray();
  }

  /** A file name drover gave: relative, no "..", no control characters. */
  static String checkName(String name) {
    if (name == null || name.isEmpty() || name.startsWith("/") || name.length() > 1024)
      throw new IllegalArgumentException("bad file name '" + name + "'");
    for (String part : name.split("/"))
      if (part.isEmpty() || part.equals("..") || part.equals("."))
        throw new IllegalArgumentException("bad file name '" + name + "'");
    for (char c : name.toCharArray())
      if (c < 0x20) throw new IllegalArgumentException("bad file name");
    return name;
  }

  /** Stores the upload as files/NAME; answers "URL SIZE TIMESTAMP", what a
   *  LocalResource of it needs. A node's key (keys/KEY) is created readable
   *  by its owner only: the NodeManager localises it as that user. */
  String put(String name, InputStream in) throws IOException {
    Path p = new Path(new Path(dir, "files"), checkName(name));
    FsPermission perm = name.startsWith("keys/") ? new FsPermission((short) 0600)
        : FsPermission.getFileDefault().applyUMask(FsPermission.getUMask(fs.getConf()));
    try (OutputStream o = fs.create(p, perm, true, 65536, fs.getDefaultReplication(p),
        fs.getDefaultBlockSize(p), null)) {
      copy(in, o);
    }
    FileStatus s = fs.getFileStatus(p);
    return s.getPath().toUri() + " " + s.getLen() + " " + s.getModificationTime();
  }

  private Path nodeFile(String key) { return new Path(new Path(dir, "nodes"), checkName(key)); }

  void saveNode(String key, String state, String body) {
    try (OutputStream o = fs.create(nodeFile(key), true)) {
      o.write((state.replace('\n', ' ') + "\n" + body).getBytes(StandardCharsets.UTF_8));
    } catch (IOException e) {
      System.err.println("DroverAM: cannot save " + key + ": " + e);
    }
  }

  void dropNode(String key) {
    try {
      fs.delete(nodeFile(key), false);
    } catch (IOException e) {
      System.err.println("DroverAM: cannot drop " + key + ": " + e);
    }
  }

  /** Every saved node as {key, state, body}. */
  List<String[]> nodes() throws IOException {
    List<String[]> out = new ArrayList<>();
    Path d = new Path(dir, "nodes");
    if (!fs.exists(d)) return out;
    for (FileStatus s : fs.listStatus(d)) {
      String text;
      try (FSDataInputStream in = fs.open(s.getPath())) {
        text = new String(readAll(in), StandardCharsets.UTF_8);
      }
      int nl = text.indexOf('\n');
      if (nl < 0) continue;
      out.add(new String[] {s.getPath().getName(), text.substring(0, nl), text.substring(nl + 1)});
    }
    return out;
  }

  void remove() {
    try {
      fs.delete(dir, true);
    } catch (IOException e) {
      System.err.println("DroverAM: cannot remove " + dir + ": " + e);
    }
  }
}
