-- test_data_sparse.lua - datasets with a sparse part from Lua: a Criteo-
-- format file from examples/gen_ctr.lua read with categorical columns
-- (ids by the documented hash, missing values, options checked), sparse
-- libsvm, operations and printing, an in-process fit that feeds the ids to
-- an EmbeddingBag, and the cluster paths that refuse them for now.
local T = dofile("tests/lua/t.lua")
local test, eq, near, raises = table.unpack(T)
local data, nn = drover.data, drover.nn
local DROVER = os.getenv("DROVER") or arg[-1]
local RUNS = T.RUNS

local dir = os.tmpname()
os.remove(dir)
assert(os.execute("mkdir -p " .. dir))
local ctr = dir .. "/ctr.tsv"
local cat = {}
for c = 15, 40 do cat[#cat + 1] = c end

test("ctrdata-01 a generated Criteo file reads as is: 13 dense columns, 26 hashed fields", function()
  local p = io.popen(DROVER .. " run examples/gen_ctr.lua " .. ctr .. " 3000 5")
  local outp = p:read("a")
  assert(p:close(), "gen_ctr failed: " .. outp)
  local auc = tonumber(outp:match("planted_auc=([%d.]+)"))
  assert(auc and auc > 0.7 and auc < 1, "planted AUC " .. tostring(outp))
  local d = data.csv(ctr, { sep = "\t", label = 1, categorical = cat, buckets = 2^24 })
  eq(#d, 3000); eq(d.features, 13); eq(d.classes, 2)
  eq(d.sparse.fields, 26); eq(d.sparse.ids, 2^24); eq(d.sparse.weighted, false)
  eq(tostring(d), "drover.dataset ctr.tsv: 3000 x 13, 2 classes, 26 categorical fields (ids below 16777216)")
  -- row 1's ids are the hash of its strings, its empty integers 0
  local line = io.open(ctr):read("l")
  local fields, i = {}, 1
  for fld in (line .. "\t"):gmatch("([^\t]*)\t") do fields[i] = fld; i = i + 1 end
  eq(#fields, 40)
  local ids = d:ids(1)
  eq(#ids, 26)
  for c = 15, 40 do
    local want = fields[c]
    -- the documented hash, again in Lua (64-bit wrapping integers); mod
    -- 2^24 is its low 24 bits
    local h = -3750763034362895579
    local bytes = { c, 0, 0, 0 }
    for k = 1, #want do bytes[#bytes + 1] = want:byte(k) end
    for _, b in ipairs(bytes) do h = (h ~ b) * 1099511628211 end
    h = (h ~ (h >> 33)) * -49064778989728563
    h = (h ~ (h >> 33)) * -4265267296055464877
    h = h ~ (h >> 33)
    eq(ids[c - 14], h & 0xffffff, "field " .. c .. " '" .. want .. "'")
  end
  local x = d.x
  for j = 2, 14 do eq(x[1][j - 1], fields[j] == "" and 0 or tonumber(fields[j]), "column " .. j) end
  eq(d.y[1], tonumber(fields[1]))
end)

test("ctrdata-02 options: sep or delimiter, buckets range, missing, refusals", function()
  local m = data.csv(ctr, { delimiter = "\t", label = 1, categorical = cat, buckets = 1000, missing = -1 })
  for i = 1, 50 do for _, id in ipairs(m:ids(i)) do assert(id >= 0 and id < 1000) end end
  local line = io.open(ctr):read("l")
  local second = line:match("^[^\t]*\t([^\t]*)")
  if second == "" then eq(m.x[1][1], -1) end
  raises(function() data.csv(ctr, { sep = "\t", label = 1, categorical = cat, buckets = 2^41 }) end,
    "buckets")
  raises(function() data.csv(ctr, { sep = "\t", label = 1, categorical = cat, buckets = 0 }) end,
    "buckets")
  raises(function() data.csv(ctr, { sep = "\t", delimiter = "\t", label = 1 }) end, "not both")
  raises(function() data.csv(ctr, { sep = "\t", label = 1, categorical = { 1 } }) end,
    "categorical column 1 is the label column")
  raises(function() data.csv(ctr, { sep = "\t", label = 1, categorical = { 41 } }) end,
    "categorical column 41 is out of range")
  raises(function() data.csv(ctr, { sep = "\t", label = 1, buckets = 10 }) end,
    "buckets needs categorical columns")
  -- without categorical columns an empty field is an error naming file:line
  raises(function() data.csv(ctr, { sep = "\t", label = 1 }) end, "ctr.tsv:")
end)

test("ctrdata-03 operations keep each row's ids with its values", function()
  local d = data.csv(ctr, { sep = "\t", label = 1, categorical = cat })
  local a, b = d:split(0.75, { seed = 3 })
  eq(#a + #b, 3000)
  local z, st = a:standardize()
  eq(tostring(z):match("26 categorical fields") ~= nil, true)
  local s = d:shuffle { seed = 4 }
  -- find each of s's first rows in d by its ids, and compare the labels
  local index = {}
  for i = 1, #d do index[table.concat(d:ids(i), ",")] = i end
  for i = 1, 20 do
    local j = index[table.concat(s:ids(i), ",")]
    assert(j, "row " .. i .. " of the shuffle has ids no row of d has")
    eq(s.y[i], d.y[j])
    eq(s.x[i][5], d.x[j][5])
  end
  local h = z:shard(1, 3)
  eq(#h, (#z - 2) // 3 + 1)
  eq(#h:ids(1), 26)
end)

test("ctrdata-04 sparse libsvm: ids and values, no dense columns", function()
  local p = dir .. "/s.svm"
  local f = assert(io.open(p, "w"))
  f:write("1 3:0.5 4294967296:2\n0 10:1\n")
  f:close()
  local d = data.libsvm(p, { sparse = true })
  eq(d.features, 0); eq(d.sparse.ids, 4294967296); eq(d.sparse.weighted, true)
  eq(tostring(d), "drover.dataset s.svm: 2 x 0, 2 classes, sparse (ids below 4294967296)")
  local ids, vals = d:ids(1)
  eq(ids[1], 2); eq(ids[2], 4294967295); eq(vals[1], 0.5); eq(vals[2], 2.0)
  raises(function() d:standardize() end, "no dense features")
  raises(function() data.libsvm(p, { sparse = true, features = 2^41 }) end, "features")
end)

test("ctrdata-05 an in-process fit feeds each batch's ids to an EmbeddingBag", function()
  local d = data.csv(ctr, { sep = "\t", label = 1, categorical = cat, buckets = 2^20 })
  local tr, te = d:split(0.8, { seed = 1 })
  local trs, st = tr:standardize()
  local tes = te:standardize(st)
  drover.seed(1)
  local bag = nn.EmbeddingBag(2^20, 4)
  local model = nn.Sequential {
    nn.Concat { nn.Identity(), bag }, nn.Linear(13 + 26 * 4, 1) }
  local exp = drover.experiment {
    model = model, loss = nn.BCEWithLogits(), optimizer = drover.optim.Adagrad { lr = 0.05 },
    train = { data = trs, batch = 100, epochs = 3 }, verbose = false }
  exp:fit()
  local held = bag:tables()[1].held
  assert(held > 500 and held <= 26 * 2400, "rows held " .. held)
  local out = exp:predict(tes)
  eq(out:size(1), #tes)
  -- better than chance on the held-out rows (rank AUC)
  local n, idx, p, y = #tes, {}, {}, tes.y
  for i = 1, n do idx[i] = i; p[i] = out[i][1] end
  table.sort(idx, function(u, v) return p[u] < p[v] end)
  local rs, pos = 0, 0
  for r, i in ipairs(idx) do if y[i] == 1 then rs = rs + r; pos = pos + 1 end end
  local auc = (rs - pos * (pos + 1) / 2) / (pos * (n - pos))
  assert(auc > 0.65, "held-out AUC " .. auc)
end)

test("ctrdata-06 a cluster trains, evaluates and predicts on a dataset with ids", function()
  local d = data.csv(ctr, { sep = "\t", label = 1, categorical = cat })
  local c <close> = drover.cluster { ps = 1, worker = 1, runs = RUNS, name = "ctrdata06" }
  local exp = drover.experiment {
    model = nn.Sequential { nn.Linear(13, 1) }, loss = nn.BCEWithLogits(),
    optimizer = drover.optim.SGD { lr = 0.1 }, train = { data = d, batch = 50 }, verbose = false }
  local r = c:fit(exp) -- a dense model reads x; the ids travel and are not read
  assert(r.steps > 0, "no steps")
  local y, q = c:predict(exp, d), exp:predict(d) -- the ids go along, unread by a dense model
  eq(y:size(1), #d)
  for i = 1, #d do eq(y[i][1], q[i][1]) end
  assert(c:evaluate(exp, d).loss > 0, "no loss")
  -- streams take ids (tests/lua/test_sparse_stream.lua); buckets alone is refused
  raises(function() data.stream(ctr, { buckets = 8 }) end, "need categorical columns")
end)

os.execute("rm -rf " .. dir)
