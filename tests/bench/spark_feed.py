"""spark_feed.py - the Spark feed bench's PySpark side (spark_feed.sh):
an RDD of the bench's rows (each of 4 partitions reads its slice of the
.npy files on an executor, then cached in Spark: data already in Spark,
as a TFoS user's was) and one of the same rows in blocks of 512, fed to
the run's fed fits with drover_client.spark.feed (rows, then blocks),
PAIRS times (each feed waits for its fit).

usage: spark_feed.py DIR PAIRS EPOCHS
The job starts as soon as feed() is called (epochs given): its tasks
connect while the previous fit runs and wait for the fed fit's credit,
as a PySpark job started beside the drover script would.
"""
import os
import sys
import time

import numpy as np
from drover_client import spark as dspark
from pyspark import SparkConf, SparkContext


def main():
    d, pairs, epochs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    jvm = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:CICompilerCount=1"
    conf = (SparkConf().setAppName("drover-feed-bench")
            .set("spark.executor.memory", "1g").set("spark.ui.enabled", "false")
            .set("spark.cores.max", "2").set("spark.executor.cores", "2")
            .set("spark.executor.extraJavaOptions", jvm))
    sc = SparkContext(master=os.environ["DROVER_SPARK_MASTER"], conf=conf)
    sc.setLogLevel("WARN")
    n = len(np.load(d + "/y.npy", mmap_mode="r"))
    parts = 4

    def rows(i):
        x = np.load(d + "/x.npy", mmap_mode="r")
        y = np.load(d + "/y.npy", mmap_mode="r")
        lo, hi = i * n // parts, (i + 1) * n // parts
        return [(np.array(x[j]), float(y[j])) for j in range(lo, hi)]

    def blocks(i):
        x = np.load(d + "/x.npy", mmap_mode="r")
        y = np.load(d + "/y.npy", mmap_mode="r")
        lo, hi = i * n // parts, (i + 1) * n // parts
        return [(np.array(x[j:min(j + 512, hi)]), np.array(y[j:min(j + 512, hi)]))
                for j in range(lo, hi, 512)]

    try:
        rdd = sc.parallelize(range(parts), parts).flatMap(rows).cache()
        print("rows %d" % rdd.count())
        brdd = sc.parallelize(range(parts), parts).flatMap(blocks).cache()
        print("blocks %d" % brdd.count())
        for w in sc.parallelize(range(4), 2).map(lambda i: i).collect():  # executors warm
            pass
        while not os.path.exists(d + "/run"):
            time.sleep(0.2)
        with open(d + "/run") as f:
            run = f.readline().strip()
        for _ in range(pairs):
            for what, data, b in (("rows", rdd, False), ("blocks", brdd, True)):
                r = dspark.feed(data, run, epochs=epochs, batch=128, blocks=b, stall=600)
                print("%s: fed %d batches, %d trained, %d partitions"
                      % (what, r.batches, r.trained, r.partitions))
                sys.stdout.flush()
    finally:
        sc.stop()


if __name__ == "__main__":
    main()
