"""app.py - drover's Spark application: one drover node as a Spark task.

The spark launcher (src/launch/launch_spark.c) writes this file, which is compiled
into the drover binary, into the run directory and submits it, once per
node, in client mode:

  spark-submit --master URL [--conf K=V ...] --files EXE,SECRET[,FILES...]
      app.py NAME MASTER_UI FILES -- node --coord ... --run-dir DIR ...

The driver (run by spark-submit's JVM, the launcher's local handle of the
node) runs a stage of one task; the task copies the shipped drover binary, the
node's key file and the script's files into a fresh directory on the
executor, runs `drover node ...` there and returns its exit status.

Key files: the driver removes its own copy of the key file (Spark makes one
for the driver's SparkFiles), the task Spark's copy in the executor's
directory once it has its own, and the node its own once read (node.c).

The node's directory (drover-node-XXX in the executor's temporary
directory) is removed by its task at the end. A task killed outright (its
executor killed) cannot: so each task first sweeps the directories whose
owners are gone. The task holds an flock on the directory's .lock, and so
does the node (the descriptor is inherited): a lock that can be taken is a
directory nobody uses any more, whatever pids were reused since; a live
run's directories, locked, stay. The
driver exits with that status (128 + S when the node was killed by signal
S), so the node's end is the handle's end, as with ssh and srun.

Why one application per node, and no barrier stage: a barrier stage fails
and is retried as a whole when one of its tasks fails, which would restart
every node for the loss of one (TensorFlowOnSpark's broken job). With one application each, a
lost node is relaunched as a new application for that node alone while the
others run on; drover's own reservation makes the nodes start together.
spark.task.maxFailures is 1: drover, not Spark, decides about retries (and
when Spark retries a task on a lost executor anyway, the coordinator sees
the node lost and kills this driver, which ends the application).

While the task is not running yet, the driver prints every 2 s what Spark
says about it (its executors, and with MASTER_UI the master's JSON: the
application's state, the workers' free cores and memory), so a reservation
that times out quotes it from the node's log.

GPUs: a role's `gpus = G` is spark.executor.resource.gpu.amount and
spark.task.resource.gpu.amount G (src/launch/launch_spark.c); the task sets
CUDA_VISIBLE_DEVICES to the addresses Spark assigned it (its TaskContext's
resources), as srun does for Slurm's --gres, so the node uses those and
reports them in REGISTER (c:nodes(), nodes.tsv). A task asked for GPUs that
got none fails: the node would run on the CPU unnoticed.

The node runs with --log-forward: its log records and every line of its
stdout and stderr reach the coordinator, which appends them to
<run-dir>/logs/NAME.log, the file this driver's output goes to as well.
The node still copies its output to the executor's stderr (Spark's
executor log, whose host and directory the driver names at the end),
where what a crash leaves unforwarded ends up too. The
node's working directory is the fresh directory with the shipped files;
--run-dir is kept when it exists there, else replaced by that directory.
"""
import json
import os
import signal
import sys
import threading
import urllib.request


def node_task(_rows, args, names):
    """Runs on the executor: the node, to its end. Yields its status."""
    import ctypes
    import shutil
    import subprocess
    import tempfile
    from pyspark import SparkFiles

    import socket
    where = os.getcwd()  # the executor's directory, with its stderr (standalone)
    tmp = tempfile.gettempdir()
    sweep(tmp)
    d, lock = own_dir(tmp)
    try:
        exe = os.path.join(d, "drover")
        shutil.copyfile(SparkFiles.get(names[0]), exe)
        os.chmod(exe, 0o700)
        secret = os.path.join(d, ".secret")
        with open(secret, "wb", opener=lambda p, f: os.open(p, f, 0o600)) as out:
            with open(SparkFiles.get(names[1]), "rb") as src:
                shutil.copyfileobj(src, out)
        forget(SparkFiles.get(names[1]))  # Spark's copy: this task was its one reader
        for n in names[2:]:
            shutil.copyfile(SparkFiles.get(n), os.path.join(d, n))
        args = list(args)
        i = args.index("--run-dir") + 1
        run_dir = args[i]
        if not os.path.isdir(run_dir):
            args[i] = d
        env = dict(os.environ, DROVER_SECRET_FILE=secret)
        env.pop("DROVER_LAUNCH_EXE", None)
        app = os.path.basename(os.path.dirname(where))
        if app.startswith("app-"):  # standalone: the executor's directory is work/APP/EXEC
            env["DROVER_PLACE"] = "%s exec %s" % (app, os.path.basename(where))
        gpus = task_gpus()
        if gpus is not None:
            env["CUDA_VISIBLE_DEVICES"] = gpus
        if "--cpus" in args:
            env["OPENBLAS_NUM_THREADS"] = args[args.index("--cpus") + 1]
        libc = ctypes.CDLL(None, use_errno=True)

        def die_with_us():  # the node ends when this Python worker does
            libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG

        # the node holds the lock too (pass_fds): the directory is in use
        # while this task or the node lives
        p = subprocess.Popen([exe] + args, cwd=d, env=env, stdin=subprocess.DEVNULL,
                             stdout=sys.stderr, stderr=subprocess.STDOUT,
                             preexec_fn=die_with_us, pass_fds=(lock,))
        rc = p.wait()
        yield (rc if rc >= 0 else 128 - rc, socket.gethostname(), where)
    finally:
        shutil.rmtree(d, ignore_errors=True)
        os.close(lock)


def forget(path):
    """Removes a file holding keys; one already gone is fine."""
    try:
        os.unlink(path)
    except OSError:
        pass


def own_dir(tmp):
    """A fresh node directory drover-node-XXX in tmp, with its .lock held
    (flock) by us: made under a staging name, locked, then renamed, so a
    sweeping task never sees it unlocked. Returns (path, lock fd)."""
    import fcntl
    import tempfile
    for _ in range(100):
        stage = tempfile.mkdtemp(prefix=".drover-new-", dir=tmp)
        fd = os.open(os.path.join(stage, ".lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        d = os.path.join(tmp, "drover-node-" + os.path.basename(stage)[len(".drover-new-"):])
        if not os.path.lexists(d):
            try:
                os.rename(stage, d)
                return d, fd
            except OSError:
                pass
        os.close(fd)
        os.unlink(os.path.join(stage, ".lock"))
        os.rmdir(stage)
    raise RuntimeError("no fresh drover-node directory in %s" % tmp)


def sweep(tmp):
    """Removes the drover-node-* directories in tmp whose owners died: an
    executor killed mid-run leaves its node's directory, with a copy of the
    binary and the files. Owned means its .lock is flocked (by the task
    that made it, and by its node); a free lock is a dead owner. A
    directory without a lock, or one we may not open (another user's), is
    not ours to judge."""
    import fcntl
    import shutil
    try:
        names = os.listdir(tmp)
    except OSError:
        return
    for name in names:
        if not name.startswith("drover-node-"):
            continue
        path = os.path.join(tmp, name)
        try:
            fd = os.open(os.path.join(path, ".lock"), os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)  # its owner lives
            continue
        try:
            shutil.rmtree(path, ignore_errors=True)
            print("drover-spark: removed %s, left by a node whose task died" % path,
                  file=sys.stderr, flush=True)
        finally:
            os.close(fd)


def task_gpus():
    """The GPU addresses Spark assigned this task ("0,1"), or None when it
    asked for none. Raises when it asked for some and got none."""
    from pyspark import TaskContext
    ctx = TaskContext.get()
    want = ctx.getLocalProperty("drover.gpus") if ctx else None
    res = ctx.resources() if ctx else {}
    got = res.get("gpu")
    addrs = list(got.addresses) if got is not None else []
    if want and int(want) > 0 and len(addrs) < int(want):
        raise RuntimeError("asked Spark for %s gpu(s), got %s" % (want, addrs or "none"))
    return ",".join(addrs) if got is not None else None


def master_status(url, app_id, asks):
    """One line from the master's JSON about this application, or why not."""
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/json/", timeout=2) as r:
            m = json.load(r)
    except Exception as e:  # the line says so; the driver goes on
        return "master %s: no status (%s)" % (url, e)
    app = [a for a in m.get("activeapps", []) if a.get("id") == app_id]
    workers = [w for w in m.get("workers", []) if w.get("state") == "ALIVE"]
    free = sum(w.get("coresfree", 0) for w in workers)
    mem = sum(w.get("memoryfree", 0) for w in workers)
    what = ("%s %s" % (app_id, app[0].get("state"))) if app else "%s not active" % app_id
    if app:
        what += " (%s; granted %s)" % (asks, app[0].get("cores"))
    return "master %s: %s; %d worker(s) alive, %d cores %d MB free" % (
        m.get("status", "?"), what, len(workers), free, mem)


def watch(sc, ui, stop):
    """Says what Spark says, when it changes, until the task runs (then
    once that it does)."""
    st = sc.statusTracker()
    last = None
    conf = sc.getConf()
    asks = "asks %s cores %s" % (
        conf.get("spark.executor.cores", "1"), conf.get("spark.executor.memory", "1g"))
    if conf.get("spark.executor.resource.gpu.amount", ""):
        asks += " %s gpu" % conf.get("spark.executor.resource.gpu.amount")
    while not stop.wait(2):
        running = 0
        for s in st.getActiveStageIds():
            info = st.getStageInfo(s)
            running += info.numActiveTasks if info else 0
        execs = [e for e in st.getExecutorInfos() if e.host != sc.getConf().get("spark.driver.host")]
        if running:
            print("drover-spark: task running (app %s)" % sc.applicationId, file=sys.stderr, flush=True)
            return
        line = "drover-spark: waiting: %d executors" % len(execs)
        if ui:
            line += "; " + master_status(ui, sc.applicationId, asks)
        if line != last:
            print(line, file=sys.stderr, flush=True)
        last = line


def main(argv):
    sep = argv.index("--")
    name, ui, node_args = argv[1], argv[2], argv[sep + 1:]
    files = argv[3].split(",")
    from pyspark import SparkContext

    sc = SparkContext(appName="drover-" + name)
    sc.setLogLevel("WARN")
    if not sc.master.startswith("local"):
        # the driver's own copy of the key file: its file server serves the
        # coordinator's, and local executors (local[N]) would read this one
        from pyspark import SparkFiles
        forget(SparkFiles.get(files[1]))
    print("drover-spark: %s is application %s" % (name, sc.applicationId), file=sys.stderr, flush=True)
    stop = threading.Event()
    threading.Thread(target=watch, args=(sc, ui, stop), daemon=True).start()
    gpus = sc.getConf().get("spark.task.resource.gpu.amount", "")
    if gpus:
        sc.setLocalProperty("drover.gpus", gpus)
    try:
        rdd = sc.parallelize([0], 1)
        status, host, where = rdd.mapPartitions(lambda it: node_task(it, node_args, files)).collect()[0]
        print("drover-spark: %s ended with status %d; its raw output is in the executor's stderr "
              "on %s in %s" % (name, status, host, where), file=sys.stderr, flush=True)
    except Exception as e:
        print("drover-spark: the task failed: %s" % e, file=sys.stderr, flush=True)
        status = 1
    finally:
        stop.set()
    sc.stop()
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
