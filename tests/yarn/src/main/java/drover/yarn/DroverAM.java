package drover.yarn;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;

import org.apache.hadoop.yarn.api.protocolrecords.RegisterApplicationMasterResponse;
import org.apache.hadoop.yarn.api.records.Container;
import org.apache.hadoop.yarn.api.records.ContainerId;
import org.apache.hadoop.yarn.api.records.ContainerLaunchContext;
import org.apache.hadoop.yarn.api.records.ContainerStatus;
import org.apache.hadoop.yarn.api.records.FinalApplicationStatus;
import org.apache.hadoop.yarn.api.records.NodeReport;
import org.apache.hadoop.yarn.api.records.Priority;
import org.apache.hadoop.yarn.api.records.Resource;
import org.apache.hadoop.yarn.api.records.UpdatedContainer;
import org.apache.hadoop.yarn.client.api.AMRMClient.ContainerRequest;
import org.apache.hadoop.yarn.client.api.async.AMRMClientAsync;
import org.apache.hadoop.yarn.client.api.async.NMClientAsync;
import org.apache.hadoop.yarn.conf.YarnConfiguration;

/**
 * drover's ApplicationMaster: starts one container per drover node when
 * drover asks, and tells drover how each ended. drover (a C program with
 * no JVM) drives it over plain HTTP on the address it registers with the
 * RM (the application report's amRPCAddress), every request carrying the
 * token drover put in this AM's environment (DROVER_AM_TOKEN):
 *
 *   POST /start   body "KEY\nMEMORY_MB\nVCORES\nLABEL\nCOMMAND": a container
 *                 for node KEY ("worker-1") running COMMAND under /bin/sh
 *   POST /kill    body "KEY": stops KEY's container (or its pending request)
 *   GET  /events  lines "exit KEY STATUS DIAG" / "error MESSAGE" since the
 *                 last call (DIAG and MESSAGE on one line)
 *   POST /finish  body "SUCCEEDED|FAILED\nMESSAGE": stops every container,
 *                 unregisters, exits
 *
 * Recovery is drover's: a node whose container ended is started again by
 * drover with a new /start for the same KEY, so a failed container is
 * replaced for that node alone and the application goes on.
 */
public final class DroverAM {
  static final class Node {
    final String key, label, command;
    final Resource res;
    final long reqId;
    ContainerRequest req;
    ContainerId cid;
    boolean killed;
    Node(String key, Resource res, String label, String command, long reqId) {
      this.key = key; this.res = res; this.label = label; this.command = command; this.reqId = reqId;
    }
  }

  final Map<Long, Node> byReq = new HashMap<>();
  final Map<ContainerId, Node> byCid = new HashMap<>();
  final Map<String, Node> byKey = new HashMap<>();
  final List<String> events = new ArrayList<>();
  final AtomicLong nextReq = new AtomicLong(1);
  final String token = System.getenv().getOrDefault("DROVER_AM_TOKEN", "");
  AMRMClientAsync<ContainerRequest> rm;
  NMClientAsync nm;
  volatile Resource max; // set once registered: the RM shows our address a little before
  final Object done = new Object();
  volatile boolean finished;

  synchronized void event(String e) { events.add(e.replace('\n', ' ')); }

  public static void main(String[] args) throws Exception {
    new DroverAM().run();
  }

  void run() throws Exception {
    YarnConfiguration conf = new YarnConfiguration();
    nm = NMClientAsync.createNMClientAsync(new NMHandler());
    nm.init(conf);
    nm.start();
    rm = AMRMClientAsync.createAMRMClientAsync(500, new RMHandler());
    rm.init(conf);
    rm.start();

    String host = InetAddress.getLocalHost().getHostName();
    HttpServer http = HttpServer.create(new InetSocketAddress(0), 16);
    http.createContext("/", this::serve);
    http.start();
    int port = http.getAddress().getPort();
    RegisterApplicationMasterResponse r = rm.registerApplicationMaster(host, port, "");
    max = r.getMaximumResourceCapability();
    System.err.println("DroverAM: control at " + host + ":" + port + ", max " + max);
    synchronized (done) {
      while (!finished) done.wait();
    }
    http.stop(0);
    Thread.sleep(200); // let the last /finish answer go out
    System.exit(0);
  }

  void serve(HttpExchange x) throws IOException {
    String body;
    try (InputStream in = x.getRequestBody()) {
      body = new String(in.readAllBytes(), StandardCharsets.UTF_8);
    }
    int code = 200;
    String out;
    try {
      if (!token.equals(x.getRequestHeaders().getFirst("X-Drover-Token"))) {
        code = 403; out = "bad token\n";
      } else {
        switch (x.getRequestURI().getPath()) {
          case "/start": out = start(body); break;
          case "/kill": out = kill(body.trim()); break;
          case "/events": out = drain(); break;
          case "/finish": out = finish(body); break;
          default: code = 404; out = "no such path\n";
        }
      }
    } catch (Exception e) {
      code = 400; out = e.toString().replace('\n', ' ') + "\n";
    }
    if (out.startsWith("refused ")) code = 409;
    byte[] b = out.getBytes(StandardCharsets.UTF_8);
    x.sendResponseHeaders(code, b.length);
    try (OutputStream o = x.getResponseBody()) { o.write(b); }
  }

  String start(String body) throws InterruptedException {
    for (int i = 0; i < 200 && max == null; i++) Thread.sleep(50);
    if (max == null) throw new IllegalStateException("the AM has not registered yet");
    return startNode(body);
  }

  synchronized String startNode(String body) {
    String[] f = body.split("\n", 5);
    if (f.length != 5) throw new IllegalArgumentException("start: want 5 lines");
    String key = f[0];
    int mem = Integer.parseInt(f[1]), vcores = Integer.parseInt(f[2]);
    if (byKey.containsKey(key)) throw new IllegalArgumentException(key + " is running");
    if (mem > max.getMemorySize() || vcores > max.getVirtualCores())
      return "refused " + key + " asks <memory:" + mem + ", vCores:" + vcores
          + "> but YARN's maximum allocation is " + max + "\n";
    Node n = new Node(key, Resource.newInstance(mem, vcores), f[3], f[4], nextReq.getAndIncrement());
    n.req = ContainerRequest.newBuilder().capability(n.res).priority(Priority.newInstance(1))
        .allocationRequestId(n.reqId).relaxLocality(true)
        .nodeLabelsExpression(n.label.isEmpty() ? null : n.label).build();
    byReq.put(n.reqId, n);
    byKey.put(key, n);
    rm.addContainerRequest(n.req);
    return "ok\n";
  }

  synchronized String kill(String key) {
    Node n = byKey.get(key);
    if (n == null) return "ok\n";
    n.killed = true;
    if (n.cid == null) { // still pending: nothing ran, the node ended
      rm.removeContainerRequest(n.req);
      byReq.remove(n.reqId);
      byKey.remove(key);
      event("exit " + key + " -1 killed before its container started");
    } else {
      nm.stopContainerAsync(n.cid, null);
    }
    return "ok\n";
  }

  synchronized String drain() {
    StringBuilder b = new StringBuilder();
    for (String e : events) b.append(e).append('\n');
    events.clear();
    return b.toString();
  }

  String finish(String body) {
    String[] f = body.split("\n", 2);
    FinalApplicationStatus st = "FAILED".equals(f[0]) ? FinalApplicationStatus.FAILED
        : FinalApplicationStatus.SUCCEEDED;
    synchronized (this) {
      for (Node n : byKey.values()) if (n.cid != null) nm.stopContainerAsync(n.cid, null);
    }
    try {
      rm.unregisterApplicationMaster(st, f.length > 1 ? f[1] : "", "");
    } catch (Exception e) {
      System.err.println("DroverAM: unregister: " + e);
    }
    rm.stop();
    nm.stop();
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
          byCid.put(c.getId(), n);
          ContainerLaunchContext ctx = ContainerLaunchContext.newInstance(
              Collections.emptyMap(), Collections.emptyMap(),
              List.of(n.command), null, null, null);
          nm.startContainerAsync(c, ctx);
        }
      }
    }
    @Override public void onContainersCompleted(List<ContainerStatus> ss) {
      synchronized (DroverAM.this) {
        for (ContainerStatus s : ss) {
          Node n = byCid.remove(s.getContainerId());
          if (n == null) continue;
          byKey.remove(n.key);
          event("exit " + n.key + " " + s.getExitStatus() + " " + s.getContainerId() + ": "
              + s.getDiagnostics().trim());
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
            byKey.remove(n.key);
            byReq.remove(n.reqId);
            event("exit " + n.key + " -1 YARN refused its container: " + e.getMessage());
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
        Node n = byCid.remove(id);
        if (n != null) { byKey.remove(n.key); event("exit " + n.key + " -1 could not start: " + t); }
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
