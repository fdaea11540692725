-- predict.lua - predict throughput (run by tests/bench/run.sh): rows/s of
-- c:predict on 1 ps + 2 workers (one thread each) against in-process
-- forward passes of the same model over the same rows (exp:predict, one
-- thread: run with OPENBLAS_NUM_THREADS=1), measured in the same run,
-- best of three each. MLP 784-256-256-10, batch 1024, 60,000 synthetic
-- MNIST-shaped rows written to a .npy: files mode (the workers read the
-- rows), and the same rows as a tensor (the coordinator sends them).
local nn, optim, data = drover.nn, drover.optim, drover.data
local runs = os.getenv("BENCH_RUNS") or "/tmp/drover-bench-runs"
drover.seed(1)
local synth = data.synthetic { n = 60000, features = 784, classes = 10, seed = 1 }
local npy = os.tmpname() .. ".npy"
data.write_npy(npy, synth.x)
local ds = data.npy(npy) -- mapped: a file dataset
local exp = drover.experiment {
  name = "predict",
  model = nn.Sequential { nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                          nn.Linear(256, 10) },
  loss = nn.CrossEntropy(), optimizer = optim.SGD { lr = 0.01 },
  train = { data = synth, batch = 1024, epochs = 1 }, verbose = false,
}
local c <close> = drover.cluster { ps = 1, worker = 2, cpus = 1, runs = runs, name = "predict" }
local function best(f)
  local b = math.huge
  for _ = 1, 3 do
    local t0 = drover.clock()
    f()
    b = math.min(b, drover.clock() - t0)
  end
  return #ds / b
end
c:predict(exp, ds, { batch = 1024 }) -- warm-up: the workers build the model
local local_rate = best(function() exp:predict(ds, { batch = 1024 }) end)
local cluster_rate = best(function() c:predict(exp, ds, { batch = 1024 }) end)
local sent_rate = best(function() c:predict(exp, ds.x, { batch = 1024 }) end)
os.remove(npy)
print(string.format("predict_rows_per_sec_in_process %.0f", local_rate))
print(string.format("predict_rows_per_sec_2_workers %.0f", cluster_rate))
print(string.format("predict_rows_per_sec_2_workers_rows_sent %.0f", sent_rate))
print(string.format("predict_ratio_2_workers_vs_in_process %.2f", cluster_rate / local_rate))
print(string.format("predict_ratio_2_workers_rows_sent_vs_in_process %.2f", sent_rate / local_rate))
