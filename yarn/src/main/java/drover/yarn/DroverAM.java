package drover.yarn;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.lang.management.ManagementFactory;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.URISyntaxException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;

import org.apache.hadoop.yarn.api.ApplicationConstants;
import org.apache.hadoop.yarn.api.protocolrecords.RegisterApplicationMasterResponse;
import org.apache.hadoop.yarn.api.records.ApplicationAttemptId;
import org.apache.hadoop.yarn.api.records.Container;
import org.apache.hadoop.yarn.api.records.ContainerId;
import org.apache.hadoop.yarn.api.records.ContainerLaunchContext;
import org.apache.hadoop.yarn.api.records.ContainerStatus;
import org.apache.hadoop.yarn.api.records.FinalApplicationStatus;
import org.apache.hadoop.yarn.api.records.LocalResource;
import org.apache.hadoop.yarn.api.records.LocalResourceType;
import org.apache.hadoop.yarn.api.records.LocalResourceVisibility;
import org.apache.hadoop.yarn.api.records.NodeId;
import org.apache.hadoop.yarn.api.records.NodeReport;
import org.apache.hadoop.yarn.api.records.Priority;
import org.apache.hadoop.yarn.api.records.Resource;
import org.apache.hadoop.yarn.api.records.URL;
import org.apache.hadoop.yarn.api.records.UpdatedContainer;
import org.apache.hadoop.yarn.client.api.AMRMClient.ContainerRequest;
import org.apache.hadoop.yarn.client.api.NMClient;
import org.apache.hadoop.yarn.client.api.async.AMRMClientAsync;
import org.apache.hadoop.yarn.client.api.async.NMClientAsync;
import org.apache.hadoop.yarn.conf.YarnConfiguration;

/**
 * drover's ApplicationMaster: starts one container per drover node when
 * drover asks, and tells drover how each ended. drover (a C program with
 * no JVM) drives it over plain HTTP on the address it registers with the
 * RM (the application report's amRPCAddress), every request but GET /
 * carrying the token drover put in this AM's environment (DROVER_AM_TOKEN):
 *
 *   POST /put     header X-Drover-Name: NAME, body the file's bytes: stored
 *                 in the staging directory (Staging.java; a node's key file,
 *                 keys/KEY, readable by its owner only); answers "URL SIZE
 *                 TIMESTAMP" for the containers' local resources
 *   POST /start   body "KEY\nMEMORY_MB\nVCORES\nLABEL\nN\n" then N lines
 *                 "NAME\tURL\tSIZE\tTIMESTAMP" (local resources: NAME is
 *                 the link in the container's working directory) then
 *                 COMMAND: a container for node KEY ("worker-1") running
 *                 COMMAND under /bin/sh in that directory
 *   POST /kill    body "KEY": stops KEY's container (or its pending request)
 *   GET  /events  lines "exit KEY STATUS DIAG" / "error MESSAGE" since the
 *                 last call (DIAG and MESSAGE on one line)
 *   POST /finish  body "SUCCEEDED|FAILED\nMESSAGE": stops every container,
 *                 unregisters, removes the staging directory, exits
 *   GET  /        (no token) a page saying what runs where: the tracking
 *                 URL this AM registers, which the RM's proxy shows
 *
 * drover's heartbeat: drover polls GET /events every 250 ms from its event
 * loop, which runs while its script computes or waits (the loop is pumped)
 * and while its REPL waits for input. Every request with the token counts.
 * Without one for DROVER_AM_ORPHAN_TIMEOUT seconds (yarn.orphan_timeout,
 * 30 by default) and none in progress, drover is taken for dead (killed,
 * or its machine or network gone): the AM does what /finish does, with
 * FAILED and a diagnostic saying why, so that no application, container
 * or staging directory outlives it. The silence is counted from this
 * attempt's registration: a new attempt does not inherit the time drover
 * spent finding it.
 *
 * Recovery of nodes is drover's: a node whose container ended is started
 * again by drover with a new /start for the same KEY. Recovery of the AM
 * is YARN's: with max-app-attempts > 1 and containers kept across
 * attempts, a new attempt reads the nodes the last one saved in the
 * staging directory, adopts their running containers (the RM hands them
 * over at registration), asks again for those still pending, and keeps
 * the exits drover has not collected; drover finds it at its new address
 * in the RM's application report.
 */
public final class DroverAM {
  static final class Node {
    final String key, label, command, body;
    final Resource res;
    final Map<String, LocalResource> files = new HashMap<>();
    long reqId;
    ContainerRequest req;
    ContainerId cid;
    NodeId nodeId;
    boolean killed;
    Node(String body) throws URISyntaxException {
      this.body = body;
      String[] f = body.split("\n", 6);
      if (f.length != 6) throw new IllegalArgumentException("start: want at least 6 lines");
      key = Staging.checkName(f[0]);
      res = Resource.newInstance(Integer.parseInt(f[1]), Integer.parseInt(f[2]));
      label = f[3];
      int n = Integer.parseInt(f[4]);
      String rest = f[5];
      for (int i = 0; i < n; i++) {
        int nl = rest.indexOf('\n');
        if (nl < 0) throw new IllegalArgumentException("start: want " + n + " resource lines");
        String[] r = rest.substring(0, nl).split("\t");
        if (r.length != 4) throw new IllegalArgumentException("start: bad resource line");
        files.put(Staging.checkName(r[0]), LocalResource.newInstance(URL.fromURI(new URI(r[1])),
            LocalResourceType.FILE, LocalResourceVisibility.APPLICATION,
            Long.parseLong(r[2]), Long.parseLong(r[3])));
        rest = rest.substring(nl + 1);
      }
      command = rest;
    }
  }

  final Map<Long, Node> byReq = new HashMap<>();
  final Map<ContainerId, Node> byCid = new HashMap<>();
  final Map<String, Node> byKey = new HashMap<>();
  final List<String> events = new ArrayList<>();
  final List<String> exited = new ArrayList<>(); // keys whose exit is in events
  final AtomicLong nextReq = new AtomicLong(1);
  final String token = System.getenv().getOrDefault("DROVER_AM_TOKEN", "");
  AMRMClientAsync<ContainerRequest> rm;
  NMClientAsync nm;
  NMClient nmSync; // stops containers, adopted ones too (the async client knows only its own)
  final ExecutorService stopper = Executors.newSingleThreadExecutor();
  Staging staging;
  ApplicationAttemptId attempt;
  volatile Resource max; // set once registered and recovered: requests wait for it
  final Object done = new Object();
  volatile boolean finished;
  final AtomicBoolean finishing = new AtomicBoolean();
  final long orphanNanos = orphanNanos(System.getenv("DROVER_AM_ORPHAN_TIMEOUT"));
  volatile long heard = System.nanoTime(); // drover's last request (set again at registration)
  final AtomicInteger inFlight = new AtomicInteger(); // drover's requests being served

  synchronized void event(String e) { events.add(e.replace('\n', ' ')); }

  /** This JVM's pid ("PID@HOST" is the runtime's name on every JVM the AM
   *  runs on; ProcessHandle is Java 9's). */
  static String pid() {
    return ManagementFactory.getRuntimeMXBean().getName().split("@", 2)[0];
  }

  /** yarn.orphan_timeout in nanoseconds: drover checks it is a positive
   *  number; anything else here (an AM run by hand) is the default, 30 s. */
  static long orphanNanos(String s) {
    double sec = 30;
    try {
      if (s != null) sec = Double.parseDouble(s);
    } catch (NumberFormatException e) {
      sec = 30;
    }
    return (long) ((sec > 0 && sec < 1e9 ? sec : 30) * 1e9);
  }

  public static void main(String[] args) throws Exception {
    new DroverAM().run();
  }

  void run() throws Exception {
    YarnConfiguration conf = new YarnConfiguration();
    attempt = ContainerId.fromString(System.getenv(ApplicationConstants.Environment.CONTAINER_ID.name()))
        .getApplicationAttemptId();
    staging = new Staging(conf, attempt.getApplicationId());
    nm = NMClientAsync.createNMClientAsync(new NMHandler());
    nm.init(conf);
    nm.start();
    nmSync = NMClient.createNMClient();
    nmSync.init(conf);
    nmSync.start();
    rm = AMRMClientAsync.createAMRMClientAsync(500, new RMHandler());
    rm.init(conf);
    rm.start();

    String host = InetAddress.getLocalHost().getHostName();
    HttpServer http = HttpServer.create(new InetSocketAddress(0), 16);
    http.createContext("/", this::serve);
    http.start();
    int port = http.getAddress().getPort();
    // The tracking URL is our own page: the RM's proxy fetches it from here.
    RegisterApplicationMasterResponse r = rm.registerApplicationMaster(host, port,
        "http://" + host + ":" + port + "/");
    heard = System.nanoTime();
    recover(r.getContainersFromPreviousAttempts());
    max = r.getMaximumResourceCapability();
    System.err.println("DroverAM: " + attempt + " (pid " + pid()
        + ") control at " + host + ":" + port + ", max " + max + ", orphan timeout "
        + orphanNanos / 1e9 + " s");
    watchdog();
    synchronized (done) {
      while (!finished) done.wait();
    }
    http.stop(0);
    Thread.sleep(200); // let the last /finish answer go out
    System.exit(0);
  }

  /** A new attempt takes over what the last one saved (see the top). */
  synchronized void recover(List<Container> previous) throws IOException {
    Map<ContainerId, Container> prev = new HashMap<>();
    for (Container c : previous) prev.put(c.getId(), c);
    for (String[] s : staging.nodes()) {
      String key = s[0], state = s[1];
      if (state.startsWith("exit ")) { // ended, drover not told yet
        event("exit " + key + " " + state.substring(5));
        exited.add(key);
        continue;
      }
      Node n;
      try {
        n = new Node(s[2]);
      } catch (Exception e) {
        event("exit " + key + " -100 lost while the ApplicationMaster restarted: " + e);
        exited.add(key);
        continue;
      }
      Container c = state.startsWith("running ")
          ? prev.remove(ContainerId.fromString(state.substring(8))) : null;
      if (c != null) { // still running: ours again
        n.cid = c.getId();
        n.nodeId = c.getNodeId();
        byCid.put(n.cid, n);
        byKey.put(key, n);
      } else if (state.startsWith("running ")) { // ended while no AM ran
        exitOf(n, "-100 " + state.substring(8) + " ended while the ApplicationMaster restarted");
      } else { // never got a container: ask again
        request(n);
      }
    }
    for (Container c : prev.values()) stop(c.getId(), c.getNodeId()); // no node claims it
    if (!previous.isEmpty() || !byKey.isEmpty())
      System.err.println("DroverAM: attempt " + attempt + " adopted " + byCid.size()
          + " containers, asked again for " + byReq.size());
  }

  void stop(ContainerId cid, NodeId node) {
    stopper.submit(() -> {
      try {
        nmSync.stopContainer(cid, node);
      } catch (Exception e) {
        System.err.println("DroverAM: stop " + cid + ": " + e);
      }
    });
  }

  /** The node's exit: drover hears of it at its next /events; the state
   *  stays saved until then, for a new attempt to repeat. */
  synchronized void exitOf(Node n, String statusDiag) {
    byKey.remove(n.key);
    if (n.cid != null) byCid.remove(n.cid);
    event("exit " + n.key + " " + statusDiag);
    exited.add(n.key);
    staging.saveNode(n.key, "exit " + statusDiag, n.body);
  }

  /** Checks drover's heartbeat every second (see the top). */
  void watchdog() {
    ScheduledExecutorService w = Executors.newSingleThreadScheduledExecutor(t -> {
      Thread th = new Thread(t, "drover-watchdog");
      th.setDaemon(true);
      return th;
    });
    w.scheduleWithFixedDelay(() -> {
      long silent = System.nanoTime() - heard;
      if (finishing.get() || inFlight.get() > 0 || silent <= orphanNanos) return;
      String why = String.format("drover (the coordinator) stopped answering for %s s "
          + "(yarn.orphan_timeout): its last request came at %s; it was killed, or its "
          + "machine or network was lost. The ApplicationMaster stopped every container, "
          + "removed the staging directory and ended the application",
          new java.math.BigDecimal(orphanNanos / 1e9).stripTrailingZeros().toPlainString(),
          new java.util.Date(System.currentTimeMillis() - silent / 1000000));
      System.err.println("DroverAM: " + why);
      finish("FAILED\n" + why);
    }, 1, 1, TimeUnit.SECONDS);
  }

  void serve(HttpExchange x) throws IOException {
    int code = 200;
    String out;
    String path = x.getRequestURI().getPath();
    boolean ours = token.equals(x.getRequestHeaders().getFirst("X-Drover-Token"));
    if (ours) {
      inFlight.incrementAndGet();
      heard = System.nanoTime();
    }
    try (InputStream in = x.getRequestBody()) {
      if (path.equals("/")) {
        out = page();
      } else if (!ours) {
        code = 403; out = "bad token\n";
      } else if (path.equals("/put")) {
        out = staging.put(x.getRequestHeaders().getFirst("X-Drover-Name"), in) + "\n";
      } else {
        String body = new String(Staging.readAll(in), StandardCharsets.UTF_8);
        switch (path) {
          case "/start": out = start(body); break;
          case "/kill": out = kill(body.trim()); break;
          case "/events": out = drain(); break;
          case "/finish": out = finish(body); break;
          default: code = 404; out = "no such path\n";
        }
      }
    } catch (Exception e) {
      code = 400; out = e.toString().replace('\n', ' ') + "\n";
    } finally {
      if (ours) {
        heard = System.nanoTime();
        inFlight.decrementAndGet();
      }
    }
    if (out.startsWith("refused ")) code = 409;
    byte[] b = out.getBytes(StandardCharsets.UTF_8);
    x.getResponseHeaders().set("Content-Type", "text/plain; charset=utf-8");
    x.sendResponseHeaders(code, b.length);
    try (OutputStream o = x.getResponseBody()) { o.write(b); }
  }

  /** The tracking page: read-only, no token (the RM's proxy has none). */
  synchronized String page() {
    StringBuilder b = new StringBuilder();
    b.append("drover ApplicationMaster\napplication ").append(attempt.getApplicationId())
        .append("\nattempt ").append(attempt.getAttemptId())
        .append("\npid ").append(pid()).append("\nnodes\n");
    List<String> keys = new ArrayList<>(byKey.keySet());
    Collections.sort(keys);
    for (String k : keys) {
      Node n = byKey.get(k);
      b.append(k).append(' ').append(n.cid == null ? "pending" : n.cid + " on " + n.nodeId)
          .append('\n');
    }
    return b.toString();
  }

  String start(String body) throws Exception {
    for (int i = 0; i < 200 && max == null; i++) Thread.sleep(50);
    if (max == null) throw new IllegalStateException("the AM has not registered yet");
    return startNode(new Node(body));
  }

  synchronized String startNode(Node n) {
    Node old = byKey.get(n.key);
    // The same request again: drover sent it to a dying attempt, got no
    // answer, and sends it to this one, which already has it from the
    // staging directory.
    if (old != null && old.body.equals(n.body)) return "ok\n";
    if (old != null) throw new IllegalArgumentException(n.key + " is running");
    if (n.res.getMemorySize() > max.getMemorySize() || n.res.getVirtualCores() > max.getVirtualCores())
      return "refused " + n.key + " asks " + n.res + " but YARN's maximum allocation is " + max + "\n";
    staging.saveNode(n.key, "pending", n.body);
    request(n);
    return "ok\n";
  }

  synchronized void request(Node n) {
    n.reqId = nextReq.getAndIncrement();
    n.req = ContainerRequest.newBuilder().capability(n.res).priority(Priority.newInstance(1))
        .allocationRequestId(n.reqId).relaxLocality(true)
        .nodeLabelsExpression(n.label.isEmpty() ? null : n.label).build();
    byReq.put(n.reqId, n);
    byKey.put(n.key, n);
    rm.addContainerRequest(n.req);
  }

  synchronized String kill(String key) {
    Node n = byKey.get(key);
    if (n == null) return "ok\n";
    n.killed = true;
    if (n.cid == null) { // still pending: nothing ran, the node ended
      rm.removeContainerRequest(n.req);
      byReq.remove(n.reqId);
      exitOf(n, "-1 killed before its container started");
    } else {
      stop(n.cid, n.nodeId);
    }
    return "ok\n";
  }

  synchronized String drain() {
    StringBuilder b = new StringBuilder();
    for (String e : events) b.append(e).append('\n');
    events.clear();
    for (String k : exited) if (!byKey.containsKey(k)) staging.dropNode(k);
    exited.clear();
    return b.toString();
  }

  /** Once: drover's /finish and the watchdog may meet. */
  String finish(String body) {
    if (!finishing.compareAndSet(false, true)) return "ok\n";
    String[] f = body.split("\n", 2);
    FinalApplicationStatus st = "FAILED".equals(f[0]) ? FinalApplicationStatus.FAILED
        : FinalApplicationStatus.SUCCEEDED;
    synchronized (this) {
      for (Node n : byKey.values()) if (n.cid != null) stop(n.cid, n.nodeId);
    }
    // Bounded well inside drover's 5 s for this request: what is not
    // stopped by then ends with the application when we unregister.
    stopper.shutdown();
    try {
      stopper.awaitTermination(2, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    try {
      rm.unregisterApplicationMaster(st, f.length > 1 ? f[1] : "", "");
    } catch (Exception e) {
      System.err.println("DroverAM: unregister: " + e);
    }
    staging.remove();
    rm.stop();
    nm.stop();
    nmSync.stop();
    synchronized (done) { finished = true; done.notifyAll(); }
    return "ok\n";
  }

  final class RMHandler extends AMRMClientAsync.AbstractCallbackHandler {
    @Override public void onContainersAllocated(List<Container> cs) {
      synchronized (DroverAM.this) {
        for (Container c : cs) {
          Node n = byReq.remove(c.getAllocationRequestId());
          if (n == null || n.cid != null) { rm.releaseAssignedContainer(c.getId()); continue; }
          rm.removeContainerRequest(n.req);
          n.cid = c.getId();
          n.nodeId = c.getNodeId();
          byCid.put(c.getId(), n);
          // Saved before it starts: a new attempt then adopts it, or stops it.
          staging.saveNode(n.key, "running " + n.cid, n.body);
          ContainerLaunchContext ctx = ContainerLaunchContext.newInstance(
              n.files, Collections.emptyMap(), Collections.singletonList(n.command), null, null, null);
          nm.startContainerAsync(c, ctx);
        }
      }
    }
    @Override public void onContainersCompleted(List<ContainerStatus> ss) {
      synchronized (DroverAM.this) {
        for (ContainerStatus s : ss) {
          Node n = byCid.get(s.getContainerId());
          if (n == null) continue;
          exitOf(n, s.getExitStatus() + " " + s.getContainerId() + ": " + s.getDiagnostics().trim());
        }
      }
    }
    @Override public void onContainersUpdated(List<UpdatedContainer> cs) {}
    @Override public void onShutdownRequest() { event("error the ResourceManager asked the AM to shut down"); }
    @Override public void onNodesUpdated(List<NodeReport> rs) {}
    @Override public float getProgress() { return 0; }
    @Override public void onError(Throwable e) {
      // The RM refused our requests (an unknown node label, resources over
      // the queue's limit): the nodes still waiting for a container will
      // not get one, so each ends with YARN's words.
      synchronized (DroverAM.this) {
        for (Node n : new ArrayList<>(byKey.values()))
          if (n.cid == null) {
            byReq.remove(n.reqId);
            exitOf(n, "-1 YARN refused its container: " + e.getMessage());
          }
      }
      event("error " + e.toString());
      System.err.println("DroverAM: " + e);
    }
  }

  final class NMHandler extends NMClientAsync.AbstractCallbackHandler {
    @Override public void onContainerStarted(ContainerId id, Map<String, java.nio.ByteBuffer> m) {}
    @Override public void onContainerStatusReceived(ContainerId id, ContainerStatus s) {}
    @Override public void onContainerStopped(ContainerId id) {}
    @Override public void onStartContainerError(ContainerId id, Throwable t) {
      synchronized (DroverAM.this) {
        Node n = byCid.get(id);
        if (n != null) exitOf(n, "-1 could not start: " + t);
      }
    }
    @Override public void onContainerResourceIncreased(ContainerId id, Resource r) {}
    @Override public void onContainerResourceUpdated(ContainerId id, Resource r) {}
    @Override public void onGetContainerStatusError(ContainerId id, Throwable t) {}
    @Override public void onIncreaseContainerResourceError(ContainerId id, Throwable t) {}
    @Override public void onUpdateContainerResourceError(ContainerId id, Throwable t) {}
    @Override public void onStopContainerError(ContainerId id, Throwable t) {}
  }
}
