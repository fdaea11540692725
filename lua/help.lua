-- help.lua - help() and help(obj): short texts on drover, its modules and
-- its objects. help(x) finds the text by x's value (drover.nn.Linear), by
-- the kind of object x is (a model, a dataset...) or by name ("nn.Linear").

local M = {}

local T = {}

T.drover = [[
drover - define and train models from Lua; the math runs in C (OpenBLAS).

  drover.tensor    float32 tensors          help(drover.tensor)
  drover.nn        layers and losses        help(drover.nn)
  drover.optim     optimizers               help(drover.optim)
  drover.data      datasets                 help(drover.data)
  drover.experiment { ... }                 help(drover.experiment)
  drover.cluster { ps = 1, worker = 2 }     help(drover.cluster)
  dash()           the live dashboard of the newest cluster (q leaves)
  drover.pretty(x) print x as the REPL shows it  help(drover.pretty)
  drover.seed(n)   seed layer initialisation (and rand/randn, dropout)

A first model (type it line by line, or run it as a script):
  nn, optim, data = drover.nn, drover.optim, drover.data
  train, test = data.csv("examples/data/digits.csv", { label = -1 }):split(0.8, { seed = 1 })
  exp = drover.experiment {
    name = "digits", model = nn.Sequential { nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10) },
    loss = nn.CrossEntropy(), optimizer = optim.Adam { lr = 1e-3 },
    train = { data = train, batch = 64, epochs = 10 }, eval = { data = test },
  }
  print(exp:fit())
  print(exp:evaluate(test).accuracy)

help(obj) explains any drover value: help(model), help(drover.nn.Linear), help("Dataset").]]

T["drover.tensor"] = [[
drover.tensor - float32 tensors (up to 4-D); the math runs in C.

  drover.tensor{ {1, 2}, {3, 4} }     from nested tables (also drover.tensor.new)
  drover.tensor.zeros(r, c)           also ones(...), full(v, ...)
  drover.tensor.rand(r, c)            uniform [0, 1); randn(...) normal; both follow drover.seed
  drover.tensor.is_tensor(x)
  drover.tensor.cat({a, b, ...}, dim)   join along dim (default 1); stack(...) adds a new dim

Methods: help("Tensor").]]

T.Tensor = [[
drover tensor - a float32 array over shared storage (views share memory).

  t:shape()          { rows, cols }          t:numel()     number of elements
  t:size([d])        the shape too (Torch7's, PyTorch's); with d, the size of dimension d
  t:dim()            number of dimensions    #t            size of the first dimension
  t[i]               element i (1-D) or a view of row i; t[i] = v assigns
  t:get(i, j) / t:set(i, j, v)               1-based indices
  t:totable()        nested Lua tables       t:clone()     a copy
  t:reshape(r, c)    a view (one size may be -1)           t:t()  transposed view
  t:fill(v)          in place
  a + b  a - b  a * b  a / b  -a              numbers, or tensors of one rank broadcast
                                              where a size is 1 ([4, 1] + [1, 3] -> [4, 3])
  t:gt(x) ge lt le eq ne                      0/1 masks;  t:maximum(x) t:minimum(x)
  t:exp() log sqrt abs  t:clamp(lo, hi)       new tensors (either bound may be nil)
  t:mm(u)            [n, k] @ [k, m] -> [n, m]
  t:sum()  t:mean()  t:min()                 a number
  t:sum(d, keep)     also mean, min: dimension d reduced (kept with size 1 when keep)
  t:max(d)           values and 0-based positions; t:max() a number
  t:argmax([d])      0-based positions along d; without d, the class id of each row
  t:narrow(d, i, n)  a view of positions i..i+n-1 of dimension d
  t:index([d,] ids)  a copy of the slices at 1-based ids (table or 1-D tensor)
  t:close()          free it now (also `local t <close> = ...`)]]

T["drover.nn"] = [==[
drover.nn - layers and losses. Models print like Torch7.

Layers:  Linear(in, out)  ReLU()  Tanh()  Sigmoid()  Softmax()  Dropout(p = 0.5)
         GELU()  LeakyReLU(slope = 0.01)  Identity()  Flatten()  Unflatten(c, h, w)
         Conv2d(in, out, k, { stride, padding, dilation, bias, init })   [N, C, H, W]
         MaxPool2d(k [, stride [, padding]])  AvgPool2d(k [, stride [, padding]])
         Embedding(n, dim)  LayerNorm(dim)  BatchNorm1d(C)  BatchNorm2d(C)
Containers: Sequential { layer, ... }  Residual(m)  Concat { m1, m2, ... }
Crosses: DotInteraction(F, { keep_first = false })  DLRM's pairwise dot products
Losses:  CrossEntropy()   logits [N, C], class ids 0..C-1
         NLL()            log-probabilities [N, C], class ids 0..C-1
         MSE()  L1()  Huber(delta = 1)   predictions and targets of the same shape
         BCEWithLogits()  logits and targets in [0, 1]
Init:    Linear and Conv2d take { init = "uniform" (default) | "kaiming" | "xavier" }; m:init(how)

Files:   m:save(path)     the parameters in safetensors, PyTorch's names, the spec beside
         load(path)       the model m:save wrote, rebuilt from the file alone
         m:load(path)     values into a model of the same architecture (also PyTorch's files)

Layers are initialised from the generator drover.seed(n) sets.
Methods: help("Module"), help("Loss").]==]

T.Module = [[
nn module - a layer or a container; m(x) is m:forward(x).

  m:forward(x)       x [batch, features] (or one example [features]) -> new tensor
  m:backward(x, dy)  gradient w.r.t. x; parameter gradients accumulate
  m:zero_grad()      m:parameters()  { { name = "1.weight", value = t, grad = g }, ... }
  m:num_params()     m:type()        "Linear", "Sequential", ...
  m:training([on])   m:evaluate()    dropout and batch statistics on / off (both return m)
  m:init(how)        "uniform", "kaiming" or "xavier" for every Linear and Conv2d
  #seq, seq[i]       the layers of a Sequential; seq:add(layer) appends one
  m:save(path)       safetensors file PyTorch loads (names "0.weight", ...); drover.nn.load(path)
  m:load(path)       values from a file of the same architecture (drover's or PyTorch's)]]

T.Loss = [[
nn loss - reduces a batch to its mean loss; loss(pred, target) is loss:forward(...).

  loss:forward(pred, target)   -> number
  loss:backward(pred, target)  -> d(loss)/d(pred)
  loss:type()                  "CrossEntropy", "MSE", "BCEWithLogits", "L1", "Huber", "NLL"]]

T["nn.Sequential"] = [[
nn.Sequential { layer, ... } - applies its layers in order.
  seq:add(layer) appends; #seq and seq[i] reach the layers; a layer may appear once per model.]]
T["nn.Linear"] = [[
nn.Linear(in, out) - y = x W^T + b; W [out, in] and b [out] drawn uniformly in
+-1/sqrt(in) (PyTorch's default) from the generator drover.seed sets.
nn.Linear(in, out, { init = "kaiming" | "xavier" | "uniform" }) - PyTorch's initialisers.]]
T["nn.ReLU"] = "nn.ReLU() - max(0, x), element-wise."
T["nn.GELU"] = "nn.GELU() - x Phi(x), Phi the normal CDF (exact, PyTorch's default), element-wise."
T["nn.LeakyReLU"] = "nn.LeakyReLU(slope = 0.01) - x where x > 0, else slope x, element-wise."
T["nn.Identity"] = "nn.Identity() - returns its input (a copy)."
T["nn.Flatten"] = "nn.Flatten() - [N, d1, d2, ...] -> [N, d1 d2 ...]."
T["nn.Unflatten"] = [==[
nn.Unflatten(c [, h [, w]]) - [N, c h w] -> [N, c, h, w], e.g. rows of 64 pixels into
[N, 1, 8, 8] images for a Conv2d (PyTorch's nn.Unflatten(1, (c, h, w))).]==]
T["nn.Conv2d"] = [[
nn.Conv2d(in, out, k, { stride = 1, padding = 0, dilation = 1, bias = true, init }) -
[N, in, H, W] -> [N, out, OH, OW], OH = (H + 2 padding - dilation (k - 1) - 1) / stride + 1.
weight [out, in, k, k], bias [out], as PyTorch's; im2col and sgemm.]]
T["nn.MaxPool2d"] = [==[
nn.MaxPool2d(k [, stride = k [, padding = 0]]) - the max of each k x k window:
[N, C, H, W] -> [N, C, OH, OW], OH = (H + 2 padding - k) / stride + 1; padding <= k/2.]==]
T["nn.AvgPool2d"] = [==[
nn.AvgPool2d(k [, stride = k [, padding = 0]]) - the mean of each k x k window (padding
counts as zeros), shapes as nn.MaxPool2d.]==]
T["nn.Embedding"] = [[
nn.Embedding(n, dim) - ids 0..n-1 [N, ...] -> rows of weight [n, dim]: [N, ..., dim].]]
T["nn.LayerNorm"] = [[
nn.LayerNorm(dim, { eps = 1e-5 }) - normalises over the last dimension, then weight and bias [dim].]]
T["nn.BatchNorm1d"] = [[
nn.BatchNorm1d(C, { eps = 1e-5, momentum = 0.1 }) - per channel of [N, C] or [N, C, L]:
batch statistics while training (updating running_mean and running_var), the running
ones after m:evaluate(). On a cluster running_mean and running_var live on the ps
beside the parameters (docs/lua-api.md).]]
T["nn.BatchNorm2d"] = "nn.BatchNorm2d(C, { eps, momentum }) - nn.BatchNorm1d for [N, C, H, W]."
T["nn.Residual"] = "nn.Residual(m) - x + m(x); m must keep the shape."
T["nn.Concat"] = [[
nn.Concat { m1, m2, ... } - every module on the same input; outputs [N, a, ...] and
[N, b, ...] joined into [N, a + b, ...] (Torch7's nn.Concat(2)).]]
T["nn.DotInteraction"] = [[
nn.DotInteraction(F, { keep_first = false }) - [N, F*d] read as F vectors of d (a
dense vector beside each field's embedding, from nn.Concat) into the F(F-1)/2 dot
products of their pairs, in DLRM's order (1,0), (2,0), (2,1), (3,0)...; keep_first
puts vector 0 in front: [N, d + F(F-1)/2], as DLRM keeps its dense part.]]
T["nn.load"] = [[
nn.load(path) - the model m:save(path) wrote: its spec from the file's metadata, then
its values. A file from PyTorch has no spec: build the same model and call m:load(path).
In PyTorch: model.load_state_dict(safetensors.torch.load_file(path)).]]
T["nn.Tanh"] = "nn.Tanh() - tanh(x), element-wise."
T["nn.Sigmoid"] = "nn.Sigmoid() - 1 / (1 + exp(-x)), element-wise."
T["nn.Softmax"] = "nn.Softmax() - row-wise softmax (for outputs; CrossEntropy takes logits)."
T["nn.Dropout"] = [[
nn.Dropout(p = 0.5) - zeroes inputs with probability p while training and scales
the rest by 1/(1-p); the identity after m:evaluate().]]
T["nn.CrossEntropy"] = [[
nn.CrossEntropy() - softmax cross-entropy from logits [N, C] and class ids [N]
(0..C-1, as dataset labels are); reports accuracy.]]
T["nn.MSE"] = "nn.MSE() - mean squared error; targets shaped like the predictions."
T["nn.L1"] = "nn.L1() - mean absolute error; targets shaped like the predictions."
T["nn.Huber"] = [[
nn.Huber(delta = 1) - mean of 0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta).]]
T["nn.NLL"] = [[
nn.NLL() - negative log-likelihood of log-probabilities [N, C] and class ids [N];
reports accuracy.]]
T["nn.BCEWithLogits"] = [[
nn.BCEWithLogits() - binary cross-entropy on logits, targets in [0, 1]; a row
counts as correct when every (logit > 0) matches (target > 0.5).]]

T["drover.optim"] = [[
drover.optim - optimizers, configured by a table (PyTorch semantics and defaults):

  optim.SGD     { lr = 0.01, momentum = 0, dampening = 0, nesterov = false, weight_decay = 0 }
  optim.Adam    { lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0 }
                (betas = { b1, b2 } also sets beta1 and beta2)
  optim.AdamW   as Adam, with decoupled weight_decay = 0.01
  optim.Adagrad { lr = 0.01, lr_decay = 0, initial_accumulator = 0, eps = 1e-10, weight_decay = 0 }
  optim.RMSprop { lr = 0.01, alpha = 0.99, momentum = 0, eps = 1e-8, weight_decay = 0 }

Every optimizer also takes
  clip_norm = 1.0   scale the gradients so that their global L2 norm is at most 1.0
  schedule = s      the learning rate per update, s from optim.schedule:
    optim.schedule.step      { step_size = N, gamma = 0.1 }
    optim.schedule.multistep { milestones = { a, b }, gamma = 0.1 }
    optim.schedule.cosine    { T_max = N, eta_min = 0 }
    optim.schedule.warmup    { steps = N, start_factor = 1/3, after = s }
    optim.schedule.plateau   { metric = "eval_loss", mode = "min", factor = 0.1,
                               patience = 10, threshold = 1e-4, min_lr = 0 }
  (on a cluster each ps applies the rate of its step, plateau follows the
  coordinator's evals, and each worker clips the gradient of its own batch.
  s:lr(base, k) is the rate of update k + 1)

Unknown options are errors. Methods: help("Optimizer").]]

T.Optimizer = [[
optimizer - a configuration; an experiment binds it to its model when it trains.

  opt:config()   every option of its kind, as a table
  opt:kind()     "SGD", "Adam", ...
  print(opt)     optim.SGD { lr = 0.1, momentum = 0.9 } (options that differ from the defaults)]]

T["drover.data"] = [[
drover.data - datasets: x [n, features] and y [n] (class ids or values) in memory.

  data.csv(path, { label = -1, header = false, delimiter = "," })
        label: column index, 1 = first, -1 = last, false = none (features only);
        header: absent = detect (reported); classes = "names": class names in the
        label column (ds.names), classes = false: the label is a target
  data.libsvm(path, { features = n, zero_based = false })   sparse rows, densified
        zero_based = true for scikit-learn's dump_svmlight_file, "auto" detects it
  data.idx(images [, labels])              MNIST's IDX files
        every reader takes .gz files too (recognised by their first bytes)
  data.npy(x [, y])                        NumPy .npy (f4, f8, u1, i4, i8)
  data.synthetic { n = 60000, features = 784, classes = 10, seed = 1 }
  data.stream(path_or_"-", { format = "csv", label = -1, features = n, follow = false })
        rows as they arrive (a pipe, stdin, a growing file): a feed,
        train = { feed = s }; s:read(n) takes up to n rows here
  data.write_csv(path, t)   data.write_npy(path, t)   write predictions
        a dataset read from a file is a recipe: cluster workers read their shard themselves

Operations return new datasets: help("Dataset").]]

T.Dataset = [[
dataset - immutable; every operation returns new datasets.

  train, test = ds:split(0.8, { seed = 1 })   seeded shuffle, then the first 80%
  ds2, stats = ds:standardize()                fit per-feature mean/std on ds
  test2 = test:standardize(stats)              apply them to another dataset
  ds:shuffle { seed = 1 }    ds:shard(i, n)  examples i, i+n, ... (i from 0, like task indices)
  ds:size() / #ds    ds.features  ds.classes  ds.source  ds.x  ds.y (tensor views)
  for x, y in ds:batch(64, { shuffle = true, seed = 1 }) do ... end   one epoch]]

T.Stats = [[
standardisation statistics - from ds:standardize(); apply with other:standardize(stats).
  stats:mean(), stats:std()   per-feature tensors]]

T["drover.experiment"] = [[
drover.experiment { ... } - a model, a loss, an optimizer and data, trained in this process.

  name       string (default "experiment")
  model      an nn module            loss       an nn loss
  optimizer  an optim.* value
  train      { data = ds, batch = 32, epochs = 1, shuffle = true, max_steps = 0,
               reshard = "epoch" }  -- a sync fit scaled: new shards at the epoch's end or "step"
             on a cluster, feed = SOURCE instead of data: the coordinator streams
             batches to the workers (a dataset, a function returning x, y,
             data.stream(...), a path, "-", or "external"), feed_timeout = 600
  eval       { data = ds, every = 0, batch = train.batch, metrics = { "auc", "logloss" } }
             every: steps between evaluations, 0 = only at the end; metrics
             (a binary model): rank AUC and log loss over the whole eval set
  seed       shuffling seed (default 0)       verbose = false silences progress
  progress   function(p) called after each step and eval (return false to stop)
  checkpoint { every = STEPS, every_seconds = S, keep = N,
               keep_best = { metric = "eval_accuracy", mode = "max" } }
             in process and on clusters (each ps writes its shards; a lost
             ps is restored from the newest); see exp:checkpoint()
             dir = "hdfs://nn:8020/path" (or webhdfs://): kept on HDFS under
             <dir>/<run name>/, each ps writing its own (docs/hdfs.md)
  stop       { metric = "eval_loss", mode = "min", patience = 0, min_delta = 0 }
             early stopping on the periodic evals (in process and on clusters)
  runs       where the run directory goes (default "runs"; false: none)
  tensorboard  true or { port = 6006, bind = "127.0.0.1" }: a TensorBoard serves
             the run while it lives (its URL printed, in `drover ls`; needs
             TensorBoard: make tensorboard, or tensorboard on PATH)
  mode       accepted for clusters

exp:fit()            -> { loss, accuracy, steps, epochs, examples_per_sec,
                          eval_loss, eval_accuracy, seconds, evals }
                        (eval_auc, eval_logloss with eval.metrics)
                        in a run directory runs/<name>-<stamp>/; under
                        `drover run --resume DIR` it continues from DIR's
                        newest intact checkpoint; with checkpoint = {...} it
                        ends with a checkpoint of its last step
                        (`drover export RUN -o f.safetensors` writes its model)
exp:checkpoint()     -> the checkpoint's directory (in a progress function:
                        true, taken at the end of the step)
exp:save(dir)        -> dir: the model, the optimizer's state and the description
                        (dir/model.safetensors, state.safetensors, manifest.json)
drover.experiment.load(dir, { train = { data = ds } })
                     -> the saved experiment; fit() continues exactly (the data is
                        not saved: pass it; the table's fields replace saved ones)
exp:run_dir()        -> the run directory
exp:evaluate([ds])   -> { loss = ..., accuracy = ... }   (ds defaults to eval.data)
exp:predict(data [, { batch = n }]) -> [n, k] tensor, one output row per input row
exp:classes()        -> the training data's class names (classes = "names"), or nil
A second fit() continues training, optimizer state included.]]
T.Experiment = T["drover.experiment"]

T["drover.seed"] = [[
drover.seed(n) - reseeds the generator behind layer initialisation, dropout masks
and tensor.rand/randn: a script that seeds first is reproducible bit for bit.
Data operations take their own seeds ({ seed = n }).]]

T["drover.cluster"] = [[
drover.cluster { ... } - parameter servers and workers as processes: on this machine
(launcher = "local", the default), over ssh (launcher = "ssh", hosts = { ... }), in
a Slurm job (launcher = "slurm", slurm = { partition = ... }) or as Spark tasks
(launcher = "spark", spark = { master = "spark://host:7077" }).

  c = drover.cluster { ps = 1, worker = 2, chief = 0, evaluator = 0,
                       max_restarts = 3, max_queue = 1024, heartbeat_timeout = 5,
                       transport = "auto",   -- nodes of one host share memory; "unix" a
                                                Unix socket, "tcp" TCP ($DROVER_TRANSPORT)
                       tensorboard = true }  -- or { port = N, bind = "host" }:
                       TensorBoard over c.run_dir's events/ until c:shutdown()
  c:fit(exp)            train exp on the cluster (exp.mode = "sync" for sync training)
  c:setup(exp)          give the workers the model and their data shards, no training
  c:feed(source, { batch = 32 })  batches into the workers' input queues, which
                        scheduled fns read: w:next_batch(n), w:should_stop(), w:terminate()
  c:evaluate(exp [, ds])  the cluster's parameters on ds
  c:predict(exp, data [, { batch = n }])  outputs for every row, on the workers, in order
  c:checkpoint()        a checkpoint of the ps nodes' shards now (in a progress fn:
                        between two steps) under c.run_dir/checkpoints
  c:save(path)          the cluster's current parameters as one safetensors file
  c:schedule(fn, ...)   run fn(w, ...) on an idle worker -> a RemoteValue (help("RemoteValue"))
  c:join()  c:done()    wait for / poll everything scheduled; raise the first error
  c:nodes()             state, host, pid ... and links: "coord=shm,ps:0=shm", the
                        transport of each of a node's connections
  c:shutdown { grace = 5, timeout = 30 }  c.run_dir  c.address
  c:dash()              the live dashboard until q (also dash() for the newest cluster)

In a scheduled fn, w is the worker: w.index, w.name, w:train_step(), w:pull(),
w:compute(), w:push(), w:batch(), and with c:feed w:next_batch(n), w:should_stop(),
w:terminate(). fn, its upvalues and arguments must be plain
data (nil, booleans, numbers, strings, tables of them).

Example (type it after "A first model" in help()):
  c = drover.cluster { ps = 1, worker = 2 }
  print(c:fit(exp))
  print(c:evaluate(exp, test))
  c:shutdown()]]
T.Cluster = T["drover.cluster"]

T["drover.pretty"] = [[
drover.pretty(...) - prints values as the REPL shows them: tables as Lua constructors
with sorted keys, one entry per line when long; results (exp:fit(), exp:evaluate(),
c:fit(), c:evaluate()) print their fields with plain print() too.

  drover.pretty.format(x)   -> the text, without printing it
  drover.pretty.width = 78  a table that fits in this many columns stays on one line

Example:
  drover.pretty { lr = 1e-3, layers = { 64, 128, 10 }, name = "digits" }
  print(drover.pretty.format({ 1, 2, 3 }))]]

T.RemoteValue = [[
RemoteValue - the future c:schedule returns.

  rv:fetch()   wait; fn's results (raises fn's error, or "cancelled")
  rv:state()   "queued", "running", "done", "failed", "cancelled"
  rv:info()    { state, runs, node }: runs > 1 means retried after a worker was lost]]

T.help = "help() - an overview; help(x) - what x is and what it offers."

-- Values -> topic names, built on first use from the drover tables.
local by_value

local function index_values()
  by_value = {
    [drover] = "drover", [drover.seed] = "drover.seed", [drover.experiment] = "drover.experiment",
    [drover.experiment.load] = "drover.experiment", [drover.pretty] = "drover.pretty",
  }
  if drover.cluster then by_value[drover.cluster] = "drover.cluster" end
  for _, mod in ipairs { "tensor", "nn", "optim", "data" } do
    local t = drover[mod]
    by_value[t] = "drover." .. mod
    for name, v in pairs(t) do
      local topic = mod .. "." .. name
      if T[topic] then by_value[v] = topic
      elseif mod == "optim" then by_value[v] = "drover.optim"
      elseif by_value[v] == nil then by_value[v] = "drover." .. mod end
    end
  end
  by_value[M.help] = "help"
end

-- The topic of a drover object, by its metatable's name.
local function object_topic(x)
  local mt = getmetatable(x)
  local name = type(mt) == "table" and rawget(mt, "__name")
  if type(name) ~= "string" then return nil end
  name = name:gsub("^drover%.", "")
  return T[name] and name or nil
end

--- text(x) -> string, or nil and a message when there is no help for x.
function M.text(x)
  if x == nil then return T.drover end
  if not by_value then index_values() end
  local topic = by_value[x]
  if topic then return T[topic] end
  if type(x) == "string" then
    local t = T[x] or T["drover." .. x] or T["nn." .. x]
    if t then return t end
    return nil, "no help on '" .. x .. "'; help() lists the topics"
  end
  local name = object_topic(x)
  if name == "Module" then -- the layer itself, then what every module offers
    local layer = T["nn." .. x:type()]
    return (layer and layer .. "\n\n" or "") .. T.Module
  end
  if name then return T[name] end
  return nil, "no help on this " .. type(x) .. "; help() lists the topics"
end

--- help([x]): prints the text for x (an overview without x).
function M.help(...)
  local x = ...
  local text, err = M.text(x)
  print(text or err)
end

M.topics = T
return M
