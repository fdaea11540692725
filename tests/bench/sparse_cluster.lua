-- sparse_cluster.lua - a sparse table on a cluster against the same model
-- with the table as a dense parameter (run by tests/bench/run.sh):
-- 1 ps + 2 workers (async, one thread each), a 2^20 x 16 table read by 26
-- ids per example, batch 512: about 13,000 ids a step, some 1.2% of the
-- rows. Sparse: nn.EmbeddingBag (only the batch's rows are pulled and
-- pushed); dense: nn.Embedding, whose 64 MB weight every step pulls and
-- pushes whole. Both read the same file (26 integer columns: hashed as
-- categorical columns for the table, read as numbers for the dense one).
-- Prints steps/s of each and the ps's bytes per step (/proc/PID/io: what
-- it read and wrote, sockets included) against unique ids x dim x 4 x 2
-- per worker step (rows pulled, row gradients pushed).
local nn, data = drover.nn, drover.data
local path, seconds = arg[1], tonumber(arg[2] or "6")
local runs = os.getenv("BENCH_RUNS") or "/tmp/drover-bench-runs"
local ROWS, DIM, FIELDS, BATCH = 2 ^ 20, 16, 26, 512

if not io.open(path) then -- label, then 26 ids uniform over the table
  local f = assert(io.open(path, "w"))
  local r = 12345
  local function rnd() r = (r * 1103515245 + 12345) % 2147483648 return r end
  for _ = 1, 20000 do
    local line = { tostring(rnd() % 2) }
    for _ = 1, FIELDS do line[#line + 1] = tostring(rnd() % ROWS) end
    f:write(table.concat(line, ","), "\n")
  end
  f:close()
end
local cat = {}
for c = 2, FIELDS + 1 do cat[#cat + 1] = c end
local sparse_ds = data.csv(path, { label = 1, categorical = cat, buckets = ROWS, header = false })
local dense_ds = data.csv(path, { label = 1, header = false })

local function io_bytes(pid)
  local f = io.open("/proc/" .. pid .. "/io")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return tonumber(s:match("rchar: (%d+)")) + tonumber(s:match("wchar: (%d+)"))
end

-- Unique ids of a batch, averaged over the file's first batches.
local function unique_per_batch()
  local total, nb = 0, 0
  for b0 = 1, math.min(#sparse_ds, 20 * BATCH) - BATCH + 1, BATCH do
    local seen, u = {}, 0
    for i = b0, b0 + BATCH - 1 do
      for _, id in ipairs(sparse_ds:ids(i)) do
        if not seen[id] then seen[id], u = true, u + 1 end
      end
    end
    total, nb = total + u, nb + 1
  end
  return total / nb
end

local function run(sparse, steps)
  drover.seed(1)
  local model = sparse
    and nn.Sequential { nn.EmbeddingBag(ROWS, DIM, { std = 0.01 }), nn.Linear(FIELDS * DIM, 1) }
    or nn.Sequential { nn.Embedding(ROWS, DIM), nn.Flatten(), nn.Linear(FIELDS * DIM, 1) }
  -- TCP, so that the ps's bytes pass through its read and write calls (/proc/PID/io)
  local c = drover.cluster { ps = 1, worker = 2, cpus = 1, runs = runs, name = "sparse-bench",
    transport = "tcp" }
  local ps
  for _, n in ipairs(c:nodes()) do if n.role == "ps" then ps = n.pid end end
  local exp = drover.experiment { name = "sp", model = model, loss = nn.BCEWithLogits(),
    optimizer = drover.optim.Adagrad { lr = 0.05 },
    train = { data = sparse and sparse_ds or dense_ds, batch = BATCH, epochs = 1000,
              max_steps = steps }, verbose = false }
  local b0, t0 = io_bytes(ps), drover.clock()
  local r = c:fit(exp)
  local secs, bytes = drover.clock() - t0, io_bytes(ps) - b0
  c:shutdown { grace = 1 }
  return r.steps / secs, bytes / r.steps
end

-- a short run of each sizes the measured ones to about `seconds`
local sw = run(true, 20)
local dw = run(false, 4)
local s_rate, s_bytes = run(true, math.max(50, math.floor(sw * seconds)))
local d_rate, d_bytes = run(false, math.max(5, math.floor(dw * seconds)))
local u = unique_per_batch()
print(string.format("sparse_steps_per_sec %.2f", s_rate))
print(string.format("dense_steps_per_sec %.2f", d_rate))
print(string.format("unique_ids_per_step %.0f", u))
print(string.format("sparse_ps_bytes_per_step %.0f", s_bytes))
print(string.format("dense_ps_bytes_per_step %.0f", d_bytes))
print(string.format("rows_bytes_per_step %.0f", u * DIM * 4 * 2))
