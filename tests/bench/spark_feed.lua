-- spark_feed.lua - the Spark feed bench's drover side (tests/bench/spark_feed.sh):
-- one cluster launched on Spark (launcher = "spark": 1 ps + 2 workers, a
-- core each), the MLP 784-256-256-10 (batch 128, SGD with momentum)
-- trained alternately from files (each worker maps its shard of the
-- .npy: files mode) and from an RDD that a PySpark program feeds
-- (train = { feed = "external" }: spark_feed.py), first an RDD of rows,
-- then one of blocks of rows, PAIRS times.
-- args: DIR (x.npy, y.npy; the run directory's path goes to DIR/run)
--       PAIRS EPOCHS SPARK_MASTER SPARK_UI
local nn, optim, data = drover.nn, drover.optim, drover.data
local dir, pairs, epochs, master, ui = arg[1], tonumber(arg[2]), tonumber(arg[3]), arg[4], arg[5]
local ds = data.npy(dir .. "/x.npy", dir .. "/y.npy")
assert(ds.files, "the .npy dataset should be files mode")
local jvm = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:CICompilerCount=1"
local c = drover.cluster { launcher = "spark", ps = 1, worker = 2, cpus = 1, runs = dir .. "/runs",
  name = "sparkbench", bind = "127.0.0.1", reservation_timeout = 240,
  spark = { master = master, master_ui = ui,
    conf = { ["spark.executor.memory"] = "512m", ["spark.ui.enabled"] = "false",
             ["spark.driver.extraJavaOptions"] = jvm, ["spark.executor.extraJavaOptions"] = jvm } } }
local f = io.open(dir .. "/run", "w"); f:write(c.run_dir, "\n"); f:close()
local function fit(fed)
  local train = { batch = 128, epochs = epochs }
  if fed then train.feed, train.feed_timeout = "external", 300 else train.data = ds end
  drover.seed(1)
  return c:fit(drover.experiment {
    name = "mlp",
    model = nn.Sequential { nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                            nn.Linear(256, 10) },
    loss = nn.CrossEntropy(), optimizer = optim.SGD { lr = 0.01, momentum = 0.9 },
    train = train, verbose = false,
  })
end
fit(false) -- warm: the workers map the file, the first steps
for i = 1, pairs do
  local a = fit(false)
  local b = fit(true)
  local k = fit(true)
  print(string.format("pair %d files_samples_per_sec %.0f rows_samples_per_sec %.0f ratio %.4f "
                      .. "blocks_samples_per_sec %.0f ratio %.4f fed %d %d",
                      i, a.examples_per_sec, b.examples_per_sec,
                      b.examples_per_sec / a.examples_per_sec, k.examples_per_sec,
                      k.examples_per_sec / a.examples_per_sec, b.fed, k.fed))
  io.stdout:flush()
end
c:shutdown()
