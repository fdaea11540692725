"""spark_feed_job.py - the PySpark side of test_spark_feed.sh and of the
Spark feed bench: an RDD of digits rows fed to a drover run with
drover_client.spark.feed (and, with --predict, its outputs back with
drover_client.spark.predict).

usage: spark_feed_job.py RUN_DIR TRAIN_CSV [--parts N] [--epochs N]
                         [--kill-executor-in P] [--predict TEST_CSV OUT]
                         [--serving FILE] [--kill-predict-in P]
--kill-executor-in P: partition P's first attempt SIGKILLs its executor's
JVM (the executor is lost, as when a machine goes) after 100 of its rows,
so Spark runs the partition again on a new executor.
--kill-worker-of P: partition P (once, whatever attempt) SIGKILLs, after
200 of its rows, the drover worker node its feeder feeds directly and
that node's executor (events.log: "feeder spark-pP@... feeds worker:N directly";
nodes.tsv: that node's pid), so the feeder goes back through the
coordinator mid-feed.
--predict: then the outputs for TEST_CSV's rows (drover_client.spark.predict,
once FILE exists: the script is about to serve) into OUT, one line each;
--kill-predict-in P: partition P's first attempt of the predict job
SIGKILLs its executor after 50 outputs. Prints "RESULT ..." lines; the
shell test checks them.
"""
import argparse
import os
import re
import signal
import sys
import time

import drover_client
from drover_client import spark as dspark
from pyspark import SparkConf, SparkContext, TaskContext


def parse(line):
    v = [float(t) for t in line.split(",")]
    return v[:-1], v[-1]


def executor_jvm():
    """The pid of this Python worker's executor JVM (an ancestor)."""
    pid = os.getppid()
    while pid > 1:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            if b"CoarseGrainedExecutorBackend" in f.read():
                return pid
        with open("/proc/%d/stat" % pid) as f:
            pid = int(f.read().rsplit(")", 1)[1].split()[1])
    return None


def killer(victim, mark, at=100):
    def wrap(index, rows, victim=victim):
        ctx = TaskContext.get()
        for i, row in enumerate(rows):
            if index == victim and ctx.attemptNumber() == 0 and i == at:
                try:  # once in the test, whatever Spark runs again
                    fd = os.open(mark, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                except FileExistsError:
                    victim = -1
                    yield row
                    continue
                os.write(fd, b"killed the executor of partition %d at row %d\n" % (index, i))
                os.close(fd)
                jvm = executor_jvm()
                if jvm:
                    os.kill(jvm, signal.SIGKILL)
                os._exit(1)  # this Python worker goes with its executor
            yield row
    return wrap


def executor_above(pid):
    """The executor JVM above process pid (a drover node run by a Spark task)."""
    while pid and pid > 1:
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                if b"CoarseGrainedExecutorBackend" in f.read():
                    return pid
            with open("/proc/%d/stat" % pid) as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            return None
    return None


def worker_killer(victim, run, mark, at=200):
    """Partition victim's rows; at row `at` its feeder's worker's executor dies."""
    def wrap(index, rows):
        for i, row in enumerate(rows):
            if index == victim and i == at:
                node = None
                with open(os.path.join(run, "events.log")) as f:
                    for line in f:
                        m = re.search(r"feeder spark-p%d@\S+ on \S+ feeds (worker:\d+) directly" % index,
                                      line)
                        node = m.group(1) if m else node
                pid = None
                with open(os.path.join(run, "nodes.tsv")) as f:
                    for line in f:
                        cols = line.split("\t")
                        if node and cols[0] == node:
                            pid = int(cols[1])
                jvm = executor_above(pid)
                try:
                    fd = os.open(mark, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                except FileExistsError:
                    jvm = None
                if jvm:
                    os.write(fd, b"%s node %d executor %d at row %d of partition %d\n"
                             % (node.encode(), pid, jvm, i, index))
                    os.close(fd)
                    # the node first: a JVM's death reaches it only once its
                    # Python worker notices, by which time a small fit has
                    # trained every batch it was sent
                    os.kill(pid, signal.SIGKILL)
                    os.kill(jvm, signal.SIGKILL)
            yield row
    return wrap


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    ap.add_argument("train")
    ap.add_argument("--parts", type=int, default=4)
    ap.add_argument("--epochs", type=int, default=None)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--kill-executor-in", type=int, default=-1)
    ap.add_argument("--kill-worker-of", type=int, default=-1)
    ap.add_argument("--predict", nargs=2, default=None)
    ap.add_argument("--serving", default=None)
    ap.add_argument("--kill-predict-in", type=int, default=-1)
    a = ap.parse_args()
    jvm = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:CICompilerCount=1"
    conf = (SparkConf().setAppName("drover-feed-test")
            .set("spark.executor.memory", "512m").set("spark.ui.enabled", "false")
            .set("spark.cores.max", "2").set("spark.executor.cores", "2")
            .set("spark.task.maxFailures", "4")
            .set("spark.executor.extraJavaOptions", jvm))
    sc = SparkContext(master=os.environ["DROVER_SPARK_MASTER"], conf=conf)
    sc.setLogLevel("WARN")
    try:
        rdd = sc.textFile(a.train, minPartitions=a.parts).map(parse)
        if a.kill_executor_in >= 0:
            mark = os.path.join(os.path.dirname(a.train), "killed")
            rdd = rdd.mapPartitionsWithIndex(killer(a.kill_executor_in, mark))
        if a.kill_worker_of >= 0:
            mark = os.path.join(os.path.dirname(a.train), "killed_worker")
            rdd = rdd.mapPartitionsWithIndex(worker_killer(a.kill_worker_of, a.run, mark))
        t0 = time.monotonic()
        r = dspark.feed(rdd, a.run, epochs=a.epochs, batch=a.batch)
        secs = time.monotonic() - t0
        print("RESULT feed partitions %d batches %d trained %d skipped %d direct %d" % r)
        print("RESULT feed_seconds %.3f" % secs)
        sys.stdout.flush()
        if a.predict:
            deadline = time.monotonic() + 120
            while a.serving and not os.path.exists(a.serving) and time.monotonic() < deadline:
                time.sleep(0.1)
            test = sc.textFile(a.predict[0], minPartitions=a.parts).map(parse)
            out = dspark.predict(test.map(lambda r: r[0]), a.run)
            if a.kill_predict_in >= 0:
                mark = os.path.join(os.path.dirname(a.predict[1]), "killed_predict")
                out = out.mapPartitionsWithIndex(killer(a.kill_predict_in, mark, 50))
            rows = out.collect()
            with open(a.predict[1], "w") as f:
                for row in rows:
                    f.write(",".join("%.6g" % v for v in row) + "\n")
            print("RESULT predicted %d rows in %d partitions" % (len(rows), test.getNumPartitions()))
    finally:
        sc.stop()
    print("RESULT stopped")


if __name__ == "__main__":
    main()
