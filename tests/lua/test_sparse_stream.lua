-- test_sparse_stream.lua - data.stream with ids (issue 26): a CSV stream
-- with categorical columns hashes them as data.csv does, a libsvm stream
-- with sparse = true keeps its rows as ids and weights as
-- data.libsvm { sparse = true } does; s:dataset(n) reads rows in process
-- with their ids, and a fit on them equals the fit on the file read whole;
-- options and malformed lines are refused by name.
local T = dofile("tests/lua/t.lua")
local test, eq, near, raises = table.unpack(T)
local data, nn = drover.data, drover.nn
local DROVER = os.getenv("DROVER") or arg[-1]

local dir = os.tmpname()
os.remove(dir)
assert(os.execute("mkdir -p " .. dir))
local ctr = dir .. "/ctr.tsv"
local cat = {}
for c = 15, 40 do cat[#cat + 1] = c end
local p = io.popen(DROVER .. " run examples/gen_ctr.lua " .. ctr .. " 1000 2")
p:read("a")
assert(p:close(), "gen_ctr failed")

local function same_rows(a, b)
  eq(#a, #b, "rows")
  eq(a.features, b.features, "features")
  if a.features > 0 then eq((a.x - b.x):abs():max(), 0, "x") end
  eq((a.y - b.y):abs():max(), 0, "y")
  for i = 1, #a do
    local ia, va = a:ids(i)
    local ib, vb = b:ids(i)
    eq(#ia, #ib, "ids of row " .. i)
    for k = 1, #ia do
      eq(ia[k], ib[k], "id " .. k .. " of row " .. i)
      if va then eq(va[k], vb[k], "weight " .. k .. " of row " .. i) end
    end
  end
end

-- a fit of a wide & deep model on d, in file order; its model's file
local function fit(d, out)
  drover.seed(4)
  local model = nn.Sum { nn.SparseLinear(2 ^ 20, 1), nn.Sequential {
    nn.Concat { nn.Identity(), nn.EmbeddingBag(2 ^ 20, 4) }, nn.Linear(13 + 26 * 4, 1) } }
  drover.experiment { model = model, loss = nn.BCEWithLogits(), verbose = false, seed = 7,
    optimizer = drover.optim.Adagrad { lr = 0.05 },
    train = { data = d, batch = 100, epochs = 1, shuffle = false } }:fit()
  model:save(out)
  local f = assert(io.open(out, "rb"))
  local bytes = f:read("a")
  f:close()
  return bytes, model:tables()[1].held
end

test("sstream-01 a CSV stream with categorical columns: the rows and ids of data.csv", function()
  local whole = data.csv(ctr, { sep = "\t", label = 1, categorical = cat, buckets = 2 ^ 20 })
  local s = data.stream(ctr, { delimiter = "\t", label = 1, categorical = cat, buckets = 2 ^ 20 })
  local parts, n = {}, 0
  while true do -- in pieces of 300: the ids of each piece are its rows'
    local d = s:dataset(300)
    if not d then break end
    parts[#parts + 1] = d
    n = n + #d
    eq(d.sparse.fields, 26); eq(d.sparse.ids, 2 ^ 20)
  end
  eq(#parts, 4); eq(n, 1000)
  local s2 = data.stream(ctr, { delimiter = "\t", label = 1, categorical = cat, buckets = 2 ^ 20 })
  same_rows(whole, s2:dataset(5000))
  eq(s2:dataset(10), nil, "the end")
  local first = data.csv(ctr, { sep = "\t", label = 1, categorical = cat, buckets = 2 ^ 20 })
  eq(parts[1]:ids(300)[26], first:ids(300)[26], "the first piece's last row")
  eq(parts[4]:ids(100)[1], first:ids(1000)[1], "the last piece's last row")
end)

test("sstream-02 a fit on a stream's rows in process equals the fit on the file read whole", function()
  local whole = data.csv(ctr, { sep = "\t", label = 1, categorical = cat, buckets = 2 ^ 20 })
  local s = data.stream(ctr, { delimiter = "\t", label = 1, categorical = cat, buckets = 2 ^ 20 })
  local a, held = fit(whole, dir .. "/a.st")
  local b = fit(s:dataset(5000), dir .. "/b.st")
  assert(held > 1000, "rows held " .. held)
  assert(a == b, "the two models' files differ")
end)

test("sstream-03 a libsvm stream with sparse = true: data.libsvm { sparse = true }'s rows", function()
  local path = dir .. "/rows.svm"
  local f = assert(io.open(path, "w"))
  for i = 1, 250 do
    f:write(("%d %d:%g %d:%g # c\n"):format(i % 2, i % 7 + 1, i / 8, 1000 + i, -i / 3))
  end
  f:write("1\n") -- a row without entries
  f:close()
  local whole = data.libsvm(path, { sparse = true, features = 4000 })
  local s = data.stream(path, { format = "libsvm", features = 4000, sparse = true })
  local d = s:dataset(1000)
  eq(d.sparse.weighted, true); eq(d.sparse.ids, 4000); eq(d.features, 0)
  same_rows(whole, d)
  eq(#select(1, d:ids(251)), 0, "the empty row")
end)

test("sstream-04 refusals: options and malformed lines, s:read of a stream with ids", function()
  raises(function() data.stream(ctr, { buckets = 8 }) end, "need categorical columns")
  raises(function() data.stream(ctr, { categorical = {} }) end, "categorical must list 1 to")
  raises(function() data.stream(ctr, { format = "libsvm", features = 4, categorical = { 2 } }) end,
         "categorical columns are for CSV streams")
  raises(function() data.stream(ctr, { sparse = true }) end, "sparse = true is for libsvm streams")
  raises(function() data.stream(ctr, { delimiter = "\t", label = 1, categorical = { 1 } }):dataset(5) end,
         "categorical column 1 is the label column")
  local s = data.stream(ctr, { delimiter = "\t", label = 1, categorical = cat })
  raises(function() s:read(5) end, "s:dataset(n) gives its rows with them")
  local bad = dir .. "/bad.svm"
  local f = assert(io.open(bad, "w"))
  f:write("1 3:1 2:1\n")
  f:close()
  raises(function() data.stream(bad, { format = "libsvm", features = 9, sparse = true }):dataset(5) end,
         "bad.svm:1: '2:1' is not index:value (indices ascend in 1..9)")
  local short = dir .. "/short.tsv"
  f = assert(io.open(short, "w"))
  f:write("1\t2\tab\n0\tcd\n")
  f:close()
  raises(function() data.stream(short, { delimiter = "\t", label = 1, categorical = { 3 } }):dataset(5) end,
         "short.tsv:2: 2 fields where the first row had 3")
end)

os.execute("rm -rf " .. dir)
