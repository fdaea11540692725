package drover.yarn;

import java.io.File;
import java.io.IOException;
import java.net.BindException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.concurrent.ThreadLocalRandom;

import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.hdfs.HdfsConfiguration;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.security.UserGroupInformation;

/**
 * The test HDFS: Hadoop's MiniDFSCluster (a real NameNode and one DataNode
 * in this JVM) on loopback, WebHDFS on, permissions checked, for drover's
 * tests (tests/hdfs/start.sh).
 *
 * Usage: TestHdfs STATE_DIR
 * Writes STATE_DIR/conf/{core,hdfs}-site.xml (the client configuration a
 * cluster's HADOOP_CONF_DIR holds) and then STATE_DIR/nn ("RPCPORT
 * HTTPPORT") once the DataNode has registered, then runs until killed.
 * The blocks and the namespace live under STATE_DIR/work. The superuser
 * is the user running it; /tmp is 1777 and /user/USER is that user's, as
 * on a cluster.
 */
public final class TestHdfs {
  /** Ports are picked here, below the kernel's ephemeral range: a port the
   *  kernel hands out for outgoing connections could be taken between our
   *  check and the bind, and the NameNode's must stay put for its clients. */
  static int lowEphemeral() {
    // A reader, not Files.readString: /proc files report size 0, and
    // that reads a truncated line here.
    try (java.io.BufferedReader r = Files.newBufferedReader(
        Path.of("/proc/sys/net/ipv4/ip_local_port_range"))) {
      return Integer.parseInt(r.readLine().trim().split("\\s+")[0]);
    } catch (Exception e) {
      return 32768;
    }
  }

  static int freePort(int hi) throws IOException {
    InetAddress lo = InetAddress.getByName("127.0.0.1");
    for (int i = 0; i < 200; i++) {
      int p = ThreadLocalRandom.current().nextInt(10000, hi);
      try (ServerSocket s = new ServerSocket()) {
        s.setReuseAddress(false);
        s.bind(new java.net.InetSocketAddress(lo, p), 1);
        return p;
      } catch (IOException taken) {
        // try another
      }
    }
    throw new IOException("no free port in 10000.." + hi);
  }

  static MiniDFSCluster start(File work) throws Exception {
    int hi = Math.max(Math.min(lowEphemeral(), 32768), 20000);
    for (int attempt = 1; ; attempt++) {
      HdfsConfiguration conf = new HdfsConfiguration();
      conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, new File(work, "dfs").getPath());
      conf.setBoolean("dfs.webhdfs.enabled", true);
      conf.setBoolean("dfs.permissions.enabled", true);
      conf.setInt("dfs.replication", 1);
      // Small blocks: a file of a few MB spans several, as a big one does
      // on a cluster (reads with an offset cross block boundaries).
      conf.setLong("dfs.blocksize", 1L << 20);
      conf.set("dfs.datanode.hostname", "127.0.0.1");
      conf.set("dfs.namenode.rpc-address", "127.0.0.1:0");
      conf.set("dfs.datanode.address", "127.0.0.1:" + freePort(hi));
      conf.set("dfs.datanode.http.address", "127.0.0.1:" + freePort(hi));
      conf.set("dfs.datanode.ipc.address", "127.0.0.1:" + freePort(hi));
      try {
        MiniDFSCluster c = new MiniDFSCluster.Builder(conf)
            .nameNodePort(freePort(hi)).nameNodeHttpPort(freePort(hi))
            .numDataNodes(1).checkDataNodeAddrConfig(true).checkDataNodeHostConfig(true)
            .format(true).build();
        c.waitActive();
        return c;
      } catch (BindException e) {
        // another process took a port between our check and the bind
        if (attempt == 5) throw e;
        System.err.println("TestHdfs: " + e.getMessage() + ": new ports");
      }
    }
  }

  static void writeSite(File f, String... kv) throws IOException {
    StringBuilder b = new StringBuilder("<?xml version=\"1.0\"?>\n<configuration>\n");
    for (int i = 0; i + 1 < kv.length; i += 2)
      b.append("  <property><name>").append(kv[i]).append("</name><value>")
          .append(kv[i + 1]).append("</value></property>\n");
    b.append("</configuration>\n");
    Files.writeString(f.toPath(), b.toString());
  }

  public static void main(String[] args) throws Exception {
    if (args.length != 1) {
      System.err.println("usage: TestHdfs STATE_DIR");
      System.exit(2);
    }
    File dir = new File(args[0]).getAbsoluteFile();
    File work = new File(dir, "work");
    work.mkdirs();
    System.setProperty("test.build.data", work.getPath());
    MiniDFSCluster cluster = start(work);
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      Thread stop = new Thread(() -> cluster.shutdown());
      stop.setDaemon(true);
      stop.start();
      try {
        stop.join(8000);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      Runtime.getRuntime().halt(0);
    }));
    int rpc = cluster.getNameNodePort();
    int http = cluster.getNameNode().getHttpAddress().getPort();
    String user = UserGroupInformation.getCurrentUser().getShortUserName();
    FileSystem fs = cluster.getFileSystem();
    org.apache.hadoop.fs.Path tmp = new org.apache.hadoop.fs.Path("/tmp");
    fs.mkdirs(tmp);
    fs.setPermission(tmp, new FsPermission((short) 01777));
    fs.mkdirs(new org.apache.hadoop.fs.Path("/user/" + user));

    File conf = new File(dir, "conf");
    conf.mkdirs();
    writeSite(new File(conf, "core-site.xml"), "fs.defaultFS", "hdfs://127.0.0.1:" + rpc);
    writeSite(new File(conf, "hdfs-site.xml"),
        "dfs.namenode.http-address", "127.0.0.1:" + http,
        "dfs.replication", "1",
        "dfs.client.use.datanode.hostname", "true");
    File tmpf = new File(dir, "nn.tmp");
    Files.write(tmpf.toPath(), (rpc + " " + http + "\n").getBytes(StandardCharsets.UTF_8));
    Files.move(tmpf.toPath(), new File(dir, "nn").toPath(), StandardCopyOption.ATOMIC_MOVE);
    System.err.println("TestHdfs: NameNode RPC 127.0.0.1:" + rpc + ", WebHDFS http://127.0.0.1:" + http
        + ", superuser " + user);
    Thread.currentThread().join();
  }
}
