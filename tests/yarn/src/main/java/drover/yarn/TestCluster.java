package drover.yarn;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.StandardCopyOption;

import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.hadoop.yarn.api.records.NodeId;
import org.apache.hadoop.yarn.api.records.NodeLabel;
import org.apache.hadoop.yarn.conf.YarnConfiguration;
import org.apache.hadoop.yarn.server.resourcemanager.RMContext;
import org.apache.hadoop.yarn.server.MiniYARNCluster;

/**
 * The test YARN: Hadoop's MiniYARNCluster (a real ResourceManager and one
 * NodeManagers in this JVM, the second labelled "gpu") on loopback, for drover's tests.
 *
 * Usage: TestCluster STATE_DIR [NM_MEMORY_MB NM_VCORES]
 * Writes STATE_DIR/rm (the RM's REST address, host:port) once both node
 * managers have registered, then runs until killed. Everything the cluster
 * keeps (local dirs, container logs) lives under STATE_DIR/work, and its
 * configuration in STATE_DIR/conf/yarn-site.xml.
 */
public final class TestCluster {
  /** The node label the second node manager carries (non-exclusive, so
   *  requests without a label may run there too). The first has none: an
   *  ApplicationMaster runs only in the default partition. */
  static final String LABEL = "gpu";

  static void labelNode(MiniYARNCluster cluster) throws Exception {
    RMContext ctx = cluster.getResourceManager().getRMContext();
    ctx.getNodeLabelManager().addToCluserNodeLabels(
        List.of(NodeLabel.newInstance(LABEL, false)));
    NodeId id = cluster.getNodeManager(1).getNMContext().getNodeId();
    ctx.getNodeLabelManager().replaceLabelsOnNode(Map.of(id, Set.of(LABEL)));
  }

  static int freePort() throws java.io.IOException {
    try (java.net.ServerSocket s = new java.net.ServerSocket(0, 1,
        java.net.InetAddress.getByName("127.0.0.1"))) {
      return s.getLocalPort();
    }
  }

  public static void main(String[] args) throws Exception {
    if (args.length < 1) {
      System.err.println("usage: TestCluster STATE_DIR [NM_MEMORY_MB NM_VCORES]");
      System.exit(2);
    }
    File dir = new File(args[0]).getAbsoluteFile();
    int mem = args.length > 1 ? Integer.parseInt(args[1]) : 4096;
    int vcores = args.length > 2 ? Integer.parseInt(args[2]) : 8;
    // MiniYARNCluster puts its directories (and wipes them) under the test
    // data dir: keep that apart from the state dir's files.
    File work = new File(dir, "work");
    work.mkdirs();
    System.setProperty("test.build.data", work.getPath());

    YarnConfiguration conf = new YarnConfiguration();
    conf.set(YarnConfiguration.RM_HOSTNAME, "127.0.0.1");
    conf.set(YarnConfiguration.NM_ADDRESS, "127.0.0.1:0");
    conf.set("yarn.nodemanager.hostname", "127.0.0.1");
    conf.setInt(YarnConfiguration.NM_PMEM_MB, mem);
    conf.setInt(YarnConfiguration.NM_VCORES, vcores);
    conf.setInt(YarnConfiguration.RM_SCHEDULER_MINIMUM_ALLOCATION_MB, 64);
    conf.setInt(YarnConfiguration.RM_SCHEDULER_MAXIMUM_ALLOCATION_MB, mem);
    conf.setInt(YarnConfiguration.RM_SCHEDULER_MAXIMUM_ALLOCATION_VCORES, vcores);
    // A node's memory is drover's to bound (its --mem), not the NM's monitor.
    conf.setBoolean(YarnConfiguration.NM_PMEM_CHECK_ENABLED, false);
    conf.setBoolean(YarnConfiguration.NM_VMEM_CHECK_ENABLED, false);
    // Keep finished containers' logs where tests can read them.
    conf.setInt(YarnConfiguration.DEBUG_NM_DELETE_DELAY_SEC, 600);
    // Ports chosen by the kernel: tests and other users may run beside us.
    // MiniYARNCluster would bind the RM to port 0 itself, but the RM then
    // makes every application's tracking URL (its web proxy) from the
    // port-0 address it was configured with ("localhost:0/proxy/..."): so
    // the RM's ports are picked here, free ones the kernel gives, and
    // MiniYARNCluster is told to keep them; the NMs' stay 0.
    conf.setBoolean(YarnConfiguration.YARN_MINICLUSTER_FIXED_PORTS, true);
    for (String k : List.of(YarnConfiguration.RM_ADDRESS, YarnConfiguration.RM_SCHEDULER_ADDRESS,
        YarnConfiguration.RM_RESOURCE_TRACKER_ADDRESS, YarnConfiguration.RM_ADMIN_ADDRESS,
        YarnConfiguration.RM_WEBAPP_ADDRESS))
      conf.set(k, "127.0.0.1:" + freePort());
    conf.set(YarnConfiguration.NM_LOCALIZER_ADDRESS, "127.0.0.1:0");
    conf.set(YarnConfiguration.NM_WEBAPP_ADDRESS, "127.0.0.1:0");
    conf.set(YarnConfiguration.NM_COLLECTOR_SERVICE_ADDRESS, "127.0.0.1:0");

    // One queue, "default", that may use the labelled node too.
    conf.set("yarn.scheduler.capacity.root.queues", "default");
    conf.set("yarn.scheduler.capacity.root.default.capacity", "100");
    conf.set("yarn.scheduler.capacity.root.default.maximum-capacity", "100");
    // Tests run one application at a time, but a leftover one must not
    // keep the next one's AM waiting (the default allows 10% of memory).
    conf.set("yarn.scheduler.capacity.maximum-am-resource-percent", "0.5");
    conf.set("yarn.scheduler.capacity.root.accessible-node-labels", "*");
    conf.set("yarn.scheduler.capacity.root.default.accessible-node-labels", "*");
    conf.set("yarn.scheduler.capacity.root.accessible-node-labels." + LABEL + ".capacity", "100");
    conf.set("yarn.scheduler.capacity.root.default.accessible-node-labels." + LABEL + ".capacity", "100");
    conf.setBoolean(YarnConfiguration.NODE_LABELS_ENABLED, true);
    conf.set(YarnConfiguration.FS_NODE_LABELS_STORE_ROOT_DIR, new File(work, "labels").toURI().toString());

    // The RM's REST API as a cluster with simple authentication has it: the
    // caller's user.name is the application's user (Hadoop's default web
    // filter alone makes every caller its static user, dr.who, which it
    // still is for requests without user.name).
    conf.set("hadoop.http.filter.initializers",
        "org.apache.hadoop.security.AuthenticationFilterInitializer,"
        + "org.apache.hadoop.http.lib.StaticUserWebFilter");
    conf.set("hadoop.http.authentication.type", "simple");
    conf.setBoolean("hadoop.http.authentication.simple.anonymous.allowed", true);
    if ("1".equals(System.getenv("DROVER_YARN_KERBEROS"))) Kdc.secure(conf, new File(dir, "kdc"));

    MiniYARNCluster cluster = new MiniYARNCluster("drover", 2, 1, 1);
    cluster.init(conf);
    cluster.start();
    if (!cluster.waitForNodeManagersToConnect(60000)) {
      System.err.println("TestCluster: the node managers did not register in 60 s");
      System.exit(1);
    }
    labelNode(cluster);
    // The cluster's configuration, as HADOOP_CONF_DIR holds it on a real
    // cluster: an ApplicationMaster finds the RM's scheduler through it.
    File confDir = new File(dir, "conf");
    confDir.mkdirs();
    try (java.io.OutputStream o = new java.io.FileOutputStream(new File(confDir, "yarn-site.xml"))) {
      cluster.getConfig().writeXml(o);
    }
    String web = cluster.getConfig().get(YarnConfiguration.RM_WEBAPP_ADDRESS);
    File tmp = new File(dir, "rm.tmp");
    Files.write(tmp.toPath(), (web + "\n").getBytes(StandardCharsets.UTF_8));
    Files.move(tmp.toPath(), new File(dir, "rm").toPath(), StandardCopyOption.ATOMIC_MOVE);
    System.err.println("TestCluster: ResourceManager REST at http://" + web);
    // On SIGTERM: stop the cluster (the NodeManagers kill their containers),
    // but at most 8 s: MiniYARNCluster's stop can hang on its services'
    // threads, and tests check that nothing was left running before this.
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      Thread stop = new Thread(cluster::stop);
      stop.setDaemon(true);
      stop.start();
      try {
        stop.join(8000);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      Runtime.getRuntime().halt(0);
    }));
    Thread.currentThread().join();
  }
}
