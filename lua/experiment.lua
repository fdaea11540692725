-- experiment.lua - drover.experiment { ... }: checks an experiment's
-- description (errors name the field) and trains it in this process
-- through the C loop (drover.train): exp:fit(), exp:evaluate(ds).

local ctrain = require "drover.train"

local Experiment = { __name = "drover.Experiment" }
Experiment.__index = Experiment

-- "drover.Module" for drover userdata, else the Lua type.
local function kind(v)
  local mt = getmetatable(v)
  if type(v) == "userdata" and type(mt) == "table" and mt.__name then return mt.__name end
  return type(v)
end

local function show(v)
  if type(v) == "string" then return string.format("%q", v) end
  return kind(v) == type(v) and tostring(v) or kind(v)
end

-- Validation raises plain messages (level 0); experiment() re-raises them
-- at the caller's line.
local function fail(fmt, ...) error("experiment: " .. string.format(fmt, ...), 0) end

local function check_fields(t, allowed, where)
  for k in pairs(t) do
    if not allowed[k] then
      local names = {}
      for name in pairs(allowed) do names[#names + 1] = name end
      table.sort(names)
      fail("unknown field '%s%s' (valid: %s)", where, tostring(k), table.concat(names, ", "))
    end
  end
end

local function want(v, expected, field, article)
  if kind(v) ~= expected then
    fail("%s must be %s (got %s)", field, article, v == nil and "nothing" or show(v))
  end
end

local COUNT_MAX = 1 << 40

local function int_field(v, field, default, min)
  if v == nil then return default end
  local n = math.tointeger(v) -- integral floats (2.0) count as integers
  if n == nil or n < min then
    fail("%s must be a %s integer (got %s)", field, min > 0 and "positive" or "non-negative",
      show(v))
  end
  -- A count of steps, epochs or rows beyond 2^40 is a mistake (and its
  -- products would overflow); a seed is any integer.
  if field ~= "seed" and n > COUNT_MAX then
    fail("%s = %s is too large (at most %d)", field, show(v), COUNT_MAX)
  end
  return n
end

local function bool_field(v, field, default)
  if v == nil then return default end
  if type(v) ~= "boolean" then fail("%s must be true or false (got %s)", field, show(v)) end
  return v
end

-- A sub-table such as train = { ... }: a table with known fields only.
local function table_field(v, field, example, allowed)
  if type(v) ~= "table" then fail("%s must be a table %s (got %s)", field, example, show(v)) end
  check_fields(v, allowed, field .. ".")
end

local function set_of(list)
  local s = {}
  for _, v in ipairs(list) do s[v] = true end
  return s
end

local top_fields = set_of { "name", "model", "loss", "optimizer", "train", "eval", "seed",
  "verbose", "progress", "mode", "backup_workers", "checkpoint", "runs", "stop" }
local train_fields = set_of { "data", "batch", "epochs", "shuffle", "max_steps", "feed",
  "feed_timeout", "feeders" }
local eval_fields = set_of { "data", "every", "batch" }
local checkpoint_fields = set_of { "every", "every_seconds", "keep", "keep_best" }
local keep_best_fields = set_of { "metric", "mode" }
local stop_fields = set_of { "metric", "mode", "patience", "min_delta" }

-- train.feed: a dataset, a function returning the next x, y (nil at the
-- end), a stream (data.stream), a path or "-" (a stream of its lines), or
-- "external" (feeders on the control port).
local function validate_feed(t)
  local f = t.feed
  if t.feeders ~= nil and f ~= "external" then
    fail("train.feeders counts external feeders: it needs train.feed = \"external\"")
  end
  if f == nil then
    if t.feed_timeout ~= nil then fail("train.feed_timeout needs train.feed") end
    want(t.data, "drover.Dataset", "train.data", "a dataset")
    return
  end
  local k = kind(f)
  if not (k == "drover.Dataset" or k == "function" or k == "drover.Stream" or
      (k == "string" and f ~= "")) then
    fail("train.feed must be a dataset, a function returning x, y, a stream (data.stream), a " ..
      "path, \"-\" (stdin) or \"external\" (got %s)", show(f))
  end
  if t.data ~= nil then
    fail("train.data and train.feed are two sources: give one (a dataset can be the feed)")
  end
  if t.feed_timeout ~= nil and (type(t.feed_timeout) ~= "number" or not (t.feed_timeout > 0)) then
    fail("train.feed_timeout must be a positive number of seconds (got %s)", show(t.feed_timeout))
  end
end

local function validate_train(t)
  table_field(t, "train", "{ data = ..., batch = ..., epochs = ... }", train_fields)
  validate_feed(t)
  return {
    feed = t.feed,
    feed_timeout = t.feed_timeout,
    feeders = int_field(t.feeders, "train.feeders", nil, 1),
    data = t.data,
    batch = int_field(t.batch, "train.batch", 32, 1),
    epochs = int_field(t.epochs, "train.epochs", 1, 1),
    shuffle = bool_field(t.shuffle, "train.shuffle", true),
    max_steps = int_field(t.max_steps, "train.max_steps", 0, 0),
  }
end

local function validate_eval(t, train)
  if t == nil then return nil end
  table_field(t, "eval", "{ data = ..., every = ... }", eval_fields)
  want(t.data, "drover.Dataset", "eval.data", "a dataset")
  local tdata = train.data or (kind(train.feed) == "drover.Dataset" and train.feed)
  if tdata and t.data.features ~= tdata.features then
    fail("eval.data has %d features but train.data has %d", t.data.features, tdata.features)
  end
  return {
    data = t.data,
    every = int_field(t.every, "eval.every", 0, 0),
    batch = int_field(t.batch, "eval.batch", train.batch, 1),
  }
end

local function validate_keep_best(t)
  if t == nil then return nil end
  table_field(t, "checkpoint.keep_best", '{ metric = "eval_accuracy", mode = "max" }',
    keep_best_fields)
  if type(t.metric) ~= "string" or t.metric == "" then
    fail("checkpoint.keep_best.metric must be a metric's name, e.g. \"eval_accuracy\" (got %s)",
      show(t.metric))
  end
  local mode = t.mode == nil and "max" or t.mode
  if mode ~= "max" and mode ~= "min" then
    fail('checkpoint.keep_best.mode must be "max" or "min" (got %s)', show(t.mode))
  end
  return { metric = t.metric, mode = mode }
end

-- checkpoint = { every = STEPS, every_seconds = S, keep = N, keep_best = {...} }
local function validate_checkpoint(t)
  if t == nil then return nil end
  table_field(t, "checkpoint", "{ every = ..., every_seconds = ..., keep = ..., keep_best = ... }",
    checkpoint_fields)
  local c = {
    every = int_field(t.every, "checkpoint.every", 0, 0),
    keep = int_field(t.keep, "checkpoint.keep", 0, 0),
    keep_best = validate_keep_best(t.keep_best),
  }
  c.every_seconds = t.every_seconds == nil and 0 or t.every_seconds
  if type(c.every_seconds) ~= "number" or c.every_seconds < 0 then
    fail("checkpoint.every_seconds must be a non-negative number (got %s)", show(t.every_seconds))
  end
  if c.every == 0 and c.every_seconds == 0 and t.every == nil and t.every_seconds == nil then
    fail("checkpoint needs every = STEPS or every_seconds = S")
  end
  return c
end

-- stop = { metric = "eval_loss", mode = "min", patience = N, min_delta = 0 }:
-- early stopping on the periodic evals.
local function validate_stop(t, eval)
  if t == nil then return nil end
  table_field(t, "stop", '{ metric = "eval_loss", mode = "min", patience = 3 }', stop_fields)
  if t.metric ~= "eval_loss" and t.metric ~= "eval_accuracy" then
    fail('stop.metric must be "eval_loss" or "eval_accuracy" (got %s)', show(t.metric))
  end
  local mode = t.mode == nil and (t.metric == "eval_accuracy" and "max" or "min") or t.mode
  if mode ~= "max" and mode ~= "min" then
    fail('stop.mode must be "max" or "min" (got %s)', show(t.mode))
  end
  if not eval or eval.every == 0 then
    fail("stop needs periodic evals: eval = { data = ..., every = STEPS }")
  end
  local d = t.min_delta == nil and 0 or t.min_delta
  if type(d) ~= "number" or not (d >= 0) then
    fail("stop.min_delta must be a non-negative number (got %s)", show(t.min_delta))
  end
  return { metric = t.metric, mode = mode, patience = int_field(t.patience, "stop.patience", 0, 0),
    min_delta = d }
end

-- Fields for later cluster runs, checked now so that typos surface early.
local function validate_cluster(cfg, e)
  e.mode = cfg.mode == nil and "async" or cfg.mode
  if e.mode ~= "async" and e.mode ~= "sync" then
    fail('mode must be "async" or "sync" (got %s)', show(cfg.mode))
  end
  -- Sync only: gradients a step may go without (checked against the
  -- cluster's trainers when it fits).
  e.backup_workers = int_field(cfg.backup_workers, "backup_workers", 0, 0)
  -- Not e.checkpoint: that is the method exp:checkpoint().
  e.checkpointing = validate_checkpoint(cfg.checkpoint)
end

local function validate(cfg)
  if type(cfg) ~= "table" then
    fail("expected a table { name = ..., model = ..., ... } (got %s)", show(cfg))
  end
  check_fields(cfg, top_fields, "")
  local e = {}
  e.name = cfg.name == nil and "experiment" or cfg.name
  if type(e.name) ~= "string" or e.name == "" then
    fail("name must be a non-empty string (got %s)", show(cfg.name))
  end
  want(cfg.model, "drover.Module", "model", "an nn module, e.g. nn.Sequential { ... }")
  want(cfg.loss, "drover.Loss", "loss", "an nn loss, e.g. nn.CrossEntropy()")
  want(cfg.optimizer, "drover.Optimizer", "optimizer", "an optimizer, e.g. optim.SGD { lr = 0.1 }")
  e.model, e.loss, e.optimizer = cfg.model, cfg.loss, cfg.optimizer
  e.train = validate_train(cfg.train)
  e.eval = validate_eval(cfg.eval, e.train)
  e.stop = validate_stop(cfg.stop, e.eval)
  e.seed = int_field(cfg.seed, "seed", 0, 0)
  e.verbose = bool_field(cfg.verbose, "verbose", true)
  if cfg.progress ~= nil and type(cfg.progress) ~= "function" then
    fail("progress must be a function (got %s)", show(cfg.progress))
  end
  e.progress = cfg.progress
  if cfg.runs ~= nil and cfg.runs ~= false and (type(cfg.runs) ~= "string" or cfg.runs == "") then
    fail("runs must be a directory or false (got %s)", show(cfg.runs))
  end
  e.runs = cfg.runs == nil and "runs" or cfg.runs
  validate_cluster(cfg, e)
  return e
end

-- Private state per experiment: its trainer (model + optimizer state)
-- and how many fits it ran.
local state = setmetatable({}, { __mode = "k" })

-- Removes the "[drover]/lua/x.lua:12: " position that C errors raised on
-- our behalf carry, so that the re-raised error names the user's line.
local function strip(msg)
  if type(msg) ~= "string" then return msg end
  return (msg:gsub("^%[drover%][^:]*:%d+: ", ""))
end

local function call(level, f, ...)
  local ok, res = pcall(f, ...)
  if not ok then error(strip(res), level + 1) end
  return res
end

local function trainer(self)
  local s = state[self]
  if not s.trainer then s.trainer = call(3, ctrain.new, self.model, self.loss, self.optimizer) end
  return s.trainer
end

-- The run directory, made by the first fit (or the resumed one of
-- `drover run --resume`): run.lua and run.json, metrics, events, checkpoints.
local function open_run(self, tr)
  local s = state[self]
  if s.run ~= nil or self.runs == false then return end
  local resume = ctrain.resume_dir()
  local script = type(arg) == "table" and type(arg[0]) == "string" and arg[0] or nil
  s.run = call(3, tr.open_run, tr, self.runs, self.name, resume, script, arg)
  local c = self.checkpointing
  if c then
    local best = c.keep_best
    call(3, tr.set_checkpoint, tr, c.every, c.every_seconds, c.keep, best and best.metric,
      best and best.mode == "max")
  end
end

--- exp:fit() -> { loss, accuracy, steps, epochs, examples_per_sec,
--- eval_loss, eval_accuracy, seconds, evals }
function Experiment:fit(...)
  if getmetatable(self) ~= Experiment then error("experiment: call fit as exp:fit()", 2) end
  -- exp:fit { epochs = ... } was taken and its settings ignored
  if select("#", ...) > 0 then
    error("experiment: fit takes no arguments; its settings are the experiment's " ..
      "(train = { epochs = ..., batch = ... } in drover.experiment { ... }, or exp.train.epochs = n)", 2)
  end
  if self.train.feed ~= nil then
    error("experiment: train.feed streams batches to a cluster's workers: train it with " ..
      "c:fit(exp) (in this process, give train.data)", 2)
  end
  local s, tr = state[self], trainer(self)
  open_run(self, tr)
  -- A later fit continues training: new shuffles, same optimizer state.
  local seed = self.seed + 7919 * s.fits
  s.fits = s.fits + 1
  local res = call(2, tr.fit, tr, self, seed, s.fits - 1) -- the settings: read in C, as c:fit does
  self.result = res
  return res
end

--- exp:checkpoint() -> the checkpoint's directory (during a fit, from its
--- progress function: true, and it is taken at the end of the step)
function Experiment:checkpoint()
  if getmetatable(self) ~= Experiment then error("experiment: call checkpoint as exp:checkpoint()", 2) end
  local tr = trainer(self)
  open_run(self, tr)
  return call(2, tr.checkpoint, tr)
end

--- exp:run_dir() -> the run directory (nil before the first fit)
function Experiment:run_dir() return state[self].run end

--- exp:evaluate([dataset]) -> { loss = ..., accuracy = ... }
function Experiment:evaluate(ds)
  if getmetatable(self) ~= Experiment then
    error("experiment: call evaluate as exp:evaluate(ds)", 2)
  end
  ds = ds or (self.eval and self.eval.data)
  if ds == nil then
    error("experiment: evaluate needs a dataset (or an eval = { data = ... } field)", 2)
  end
  if kind(ds) ~= "drover.Dataset" then
    error("experiment: evaluate expects a dataset (got " .. show(ds) .. ")", 2)
  end
  local tr = trainer(self)
  return call(2, tr.evaluate, tr, ds, self.eval and self.eval.batch or self.train.batch)
end

--- exp:classes() -> the class names of the training data (data.csv with
--- classes = "names"; id i is names[i + 1]), kept by exp:save; nil when the
--- labels were numbers
function Experiment:classes()
  local saved = state[self] and state[self].classes
  if saved then return saved end
  local d = self.train and self.train.data
  return d and d.names
end

--- exp:predict(data [, { batch = n }]) -> tensor [n, k]: the model's
--- outputs, one row per input row (a dataset's x, or a tensor), in order
function Experiment:predict(data, opts)
  if getmetatable(self) ~= Experiment then
    error("experiment: call predict as exp:predict(data)", 2)
  end
  local k = kind(data)
  if k ~= "drover.Dataset" and k ~= "drover.Tensor" then
    error("experiment: predict expects a dataset or a tensor of inputs (got " .. show(data) .. ")", 2)
  end
  local batch = opts and opts.batch or (self.eval and self.eval.batch) or self.train.batch
  local tr = trainer(self)
  return call(2, tr.predict, tr, data, batch)
end

function Experiment:__tostring()
  local function indent(s) return (tostring(s):gsub("\n", "\n            ")) end
  local t = self.train
  local lines = {
    "drover.experiment " .. self.name,
    "  model     " .. indent(self.model),
    "  loss      " .. tostring(self.loss),
    "  optimizer " .. tostring(self.optimizer),
    string.format("  train     %s; batch %d, %d epoch%s%s",
      t.feed ~= nil and ("feed " .. show(t.feed)) or tostring(t.data), t.batch, t.epochs,
      t.epochs == 1 and "" or "s", t.shuffle and ", shuffled" or ""),
  }
  if self.eval then
    lines[#lines + 1] = "  eval      " .. tostring(self.eval.data) ..
      (self.eval.every > 0 and ("; every " .. self.eval.every .. " steps") or "; at the end")
  end
  lines[#lines + 1] = "  seed      " .. self.seed
  return table.concat(lines, "\n")
end

-- ============================== save and load ==============================

-- The experiment's description as flat string keys and values, for the
-- manifest of exp:save: everything but the data (named, not stored) and
-- the progress function. Floats go as C99 hex ("%a") so they come back bit
-- for bit; Lua 5.4's tonumber reads them.
local function hex(x) return string.format("%a", x) end

local function describe(self)
  local d = { format = "drover-experiment-1", name = self.name, seed = tostring(self.seed),
    verbose = tostring(self.verbose), mode = self.mode,
    backup_workers = tostring(self.backup_workers), runs = tostring(self.runs),
    fits = tostring(state[self].fits) }
  d.loss = tostring(self.loss):match("^nn%.(%w+)%(%)$")
  for k, v in pairs(self.optimizer:config()) do
    d["optimizer." .. k] = type(v) == "number" and hex(v) or tostring(v)
  end
  local t = self.train
  d["train.data"] = tostring(t.data)
  local names = self:classes()
  if names then d["classes.names"] = table.concat(names, "\n") end
  for _, k in ipairs { "batch", "epochs", "shuffle", "max_steps" } do
    d["train." .. k] = tostring(t[k])
  end
  if self.eval then
    d["eval.data"], d["eval.every"] = tostring(self.eval.data), tostring(self.eval.every)
    d["eval.batch"] = tostring(self.eval.batch)
  end
  if self.stop then
    d["stop.metric"], d["stop.mode"] = self.stop.metric, self.stop.mode
    d["stop.patience"], d["stop.min_delta"] = tostring(self.stop.patience), hex(self.stop.min_delta)
  end
  local c = self.checkpointing
  if c then
    d["checkpoint.every"], d["checkpoint.keep"] = tostring(c.every), tostring(c.keep)
    d["checkpoint.every_seconds"] = hex(c.every_seconds)
    if c.keep_best then
      d["checkpoint.keep_best.metric"] = c.keep_best.metric
      d["checkpoint.keep_best.mode"] = c.keep_best.mode
    end
  end
  return d
end

--- exp:save(dir): the model (dir/model.safetensors, which drover.nn.load
--- and PyTorch read), the optimizer's state (dir/state.safetensors) and
--- the experiment's description, committed by dir/manifest.json.
--- drover.experiment.load(dir) continues from it exactly.
function Experiment:save(dir)
  if getmetatable(self) ~= Experiment then error("experiment: call save as exp:save(dir)", 2) end
  if type(dir) ~= "string" or dir == "" then
    error("experiment: save needs a directory (got " .. show(dir) .. ")", 2)
  end
  call(2, trainer(self).save, trainer(self), dir, describe(self))
  return dir
end

-- The saved description back into drover.experiment's fields.
local function num(d, k) return d[k] and tonumber(d[k]) end
local function flag(d, k) if d[k] ~= nil then return d[k] == "true" end end

local function rebuild_optimizer(d)
  local kind, opts = d["optimizer.kind"], {}
  for k, v in pairs(d) do
    local name = k:match("^optimizer%.(.+)$")
    if name == "schedule" then -- its description is optim.schedule Lua
      local f = load("return " .. v, "=schedule", "t", { optim = drover.optim })
      local ok, sched = pcall(f or error)
      if not (f and ok) then fail("the saved schedule %s does not read back", show(v)) end
      opts.schedule = sched
    elseif name and name ~= "kind" then
      if v == "true" or v == "false" then opts[name] = v == "true" else opts[name] = tonumber(v) end
    end
  end
  local make = kind and drover.optim[kind]
  if not make then fail("the saved optimizer %s is unknown", show(kind)) end
  return make(opts)
end

local function rebuild(dir, d)
  local nn = drover.nn
  if d.format ~= "drover-experiment-1" then
    fail("'%s' is not a saved experiment (a checkpoint? read its model with drover.nn.load)", dir)
  end
  if not (d.loss and nn[d.loss]) then fail("the saved loss %s is unknown", show(d.loss)) end
  local cfg = { name = d.name, model = nn.load(dir .. "/model.safetensors"), loss = nn[d.loss](),
    optimizer = rebuild_optimizer(d), seed = num(d, "seed"), verbose = flag(d, "verbose"),
    mode = d.mode, backup_workers = num(d, "backup_workers"),
    train = { batch = num(d, "train.batch"), epochs = num(d, "train.epochs"),
      shuffle = flag(d, "train.shuffle"), max_steps = num(d, "train.max_steps") } }
  if d.runs == "false" then cfg.runs = false else cfg.runs = d.runs end
  if d["eval.every"] then
    cfg.eval = { every = num(d, "eval.every"), batch = num(d, "eval.batch") }
  end
  if d["stop.metric"] then
    cfg.stop = { metric = d["stop.metric"], mode = d["stop.mode"],
      patience = num(d, "stop.patience"), min_delta = num(d, "stop.min_delta") }
  end
  if d["checkpoint.every"] then
    cfg.checkpoint = { every = num(d, "checkpoint.every"), keep = num(d, "checkpoint.keep"),
      every_seconds = num(d, "checkpoint.every_seconds") }
    if d["checkpoint.keep_best.metric"] then
      cfg.checkpoint.keep_best = { metric = d["checkpoint.keep_best.metric"],
        mode = d["checkpoint.keep_best.mode"] }
    end
  end
  return cfg
end

-- with's fields replace cfg's (train and eval field by field).
local function merge(cfg, with, dir, d)
  for k, v in pairs(with or {}) do
    if (k == "train" or k == "eval") and type(v) == "table" and cfg[k] then
      for k2, v2 in pairs(v) do cfg[k][k2] = v2 end
    else
      cfg[k] = v
    end
  end
  if cfg.train.data == nil then
    fail("'%s' was trained on %s, which a save does not hold: pass it, as in "
      .. "drover.experiment.load(dir, { train = { data = ds } })", dir, d["train.data"] or "?")
  end
  if cfg.eval and cfg.eval.data == nil then
    fail("'%s' was evaluated on %s: pass it as { eval = { data = ds } } (or eval = false)", dir,
      d["eval.data"] or "?")
  end
  if cfg.eval == false then cfg.eval = nil end
end

local function new(cfg)
  local e = validate(cfg)
  state[e] = { fits = 0 }
  return setmetatable(e, Experiment)
end

-- f(...), its error re-raised without a position (load adds the caller's).
local function try(f, ...)
  local ok, res = pcall(f, ...)
  if not ok then error("experiment: " .. strip(res), 0) end
  return res
end

local function load_saved(dir, with)
  if type(dir) ~= "string" or dir == "" then fail("load needs a directory (got %s)", show(dir)) end
  if with ~= nil and type(with) ~= "table" then
    fail("load's second argument must be a table of fields (got %s)", show(with))
  end
  local d = try(ctrain.read_saved, dir)
  local cfg = rebuild(dir, d)
  merge(cfg, with, dir, d)
  local e = new(cfg)
  local tr = trainer(e)
  try(tr.restore, tr, dir)
  state[e].fits = math.tointeger(num(d, "fits")) or 0
  if d["classes.names"] then
    local names = {}
    for name in (d["classes.names"] .. "\n"):gmatch("(.-)\n") do names[#names + 1] = name end
    state[e].classes = names
  end
  return e
end

--- drover.experiment { name, model, loss, optimizer, train = { data, batch,
--- epochs, shuffle }, eval = { data, every }, seed } -> experiment
--- drover.experiment.load(dir [, fields]) -> the experiment exp:save(dir)
--- wrote; `fields` (train = { data = ds } at least) replace saved ones.
return setmetatable({
  load = function(dir, with)
    local ok, e = pcall(load_saved, dir, with)
    if not ok then error(strip(e), 2) end
    return e
  end,
}, {
  __call = function(_, cfg)
    local ok, e = pcall(new, cfg)
    if not ok then error(e, 2) end
    return e
  end,
  __name = "drover.experiment",
})
