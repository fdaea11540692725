package drover.yarn;

import java.io.File;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.URI;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.io.IOUtils;

/**
 * Hadoop's own HDFS client (RPC to the NameNode, the DataNode's transfer
 * protocol), so the tests check what drover writes over WebHDFS with a
 * reader that does not share its code, and the other way round.
 *
 * Usage: HdfsShell cat PATH         the file to stdout
 *        HdfsShell put PATH [MODE]  stdin into a new file (octal MODE)
 * PATH is on the default file system of $HADOOP_CONF_DIR's core-site.xml;
 * the user is $HADOOP_USER_NAME or the local one, as for `hadoop fs`.
 */
public final class HdfsShell {
  public static void main(String[] args) throws Exception {
    if (args.length < 2) {
      System.err.println("usage: HdfsShell cat PATH | put PATH [MODE]");
      System.exit(2);
    }
    Configuration conf = new Configuration();
    String dir = System.getenv("HADOOP_CONF_DIR");
    if (dir != null) {
      conf.addResource(new Path(new File(dir, "core-site.xml").toURI()));
      conf.addResource(new Path(new File(dir, "hdfs-site.xml").toURI()));
    }
    FileSystem fs = FileSystem.get(URI.create(conf.get("fs.defaultFS")), conf);
    Path p = new Path(args[1]);
    try {
      if (args[0].equals("cat")) {
        try (InputStream in = fs.open(p)) {
          IOUtils.copyBytes(in, System.out, 1 << 16, false);
        }
        System.out.flush();
      } else if (args[0].equals("put")) {
        FsPermission perm = args.length > 2 ? new FsPermission(Short.parseShort(args[2], 8))
                                            : FsPermission.getFileDefault();
        try (FSDataOutputStream out = fs.create(p, perm, false, 1 << 16, (short) 1, 1L << 20, null)) {
          IOUtils.copyBytes(System.in, out, 1 << 16, false);
        }
        // create() applies the umask: make MODE exact.
        if (args.length > 2) fs.setPermission(p, perm);
      } else {
        System.err.println("HdfsShell: unknown command " + args[0]);
        System.exit(2);
      }
    } catch (java.io.IOException e) {
      System.err.println("HdfsShell: " + e);
      System.exit(1);
    }
    fs.close();
  }
}
