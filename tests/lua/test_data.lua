-- test_data.lua - drover.data from Lua: readers and their options, split,
-- standardize (fit on train, apply to test), shuffle, shard, batch, printing.
local test, eq, near, raises = table.unpack(dofile("tests/lua/t.lua"))
local data = drover.data
local DIGITS = "examples/data/digits.csv"

local function write_tmp(text)
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
  return path
end

-- Column means and standard deviations (population) of x, computed here in
-- Lua as an independent check of the C code.
local function column_stats(x)
  local rows = x:totable()
  local n, k = #rows, #rows[1]
  local mean, sd = {}, {}
  for j = 1, k do
    local s = 0
    for i = 1, n do s = s + rows[i][j] end
    mean[j] = s / n
    local v = 0
    for i = 1, n do v = v + (rows[i][j] - mean[j]) ^ 2 end
    sd[j] = math.sqrt(v / n)
  end
  return mean, sd
end

test("data_csv_digits", function()
  local ds = data.csv(DIGITS, { label = -1, header = false })
  eq(ds:size(), 1797, "size")
  eq(#ds, 1797, "#ds")
  eq(ds.features, 64, "features")
  eq(ds.classes, 10, "classes")
  eq(tostring(ds), "drover.dataset digits.csv: 1797 x 64, 10 classes", "printing")
end)

test("data_csv_options", function()
  local path = write_tmp("a;b;c\n1;2;0\n3;4;1\n5;6;1\n")
  local ds = data.csv(path, { label = 1, header = true, delimiter = ";" })
  eq(ds:size(), 3, "rows after the header")
  eq(ds.features, 2, "features")
  eq(ds.y:totable()[3], 5.0, "label = 1 is the first column")
  eq(ds.x:get(1, 2), 0.0, "remaining columns in order")
  local last = data.csv(path, { header = true, delimiter = ";" })
  eq(last.y:totable()[2], 1.0, "label defaults to the last column")
  os.remove(path)
  raises(function() data.csv(DIGITS, { lable = -1 }) end, "data.csv: unknown option 'lable'")
  raises(function() data.csv(DIGITS, { label = 0 }) end, "label must be a column index")
  raises(function() data.csv(DIGITS, { header = 1 }) end, "header must be true or false")
  raises(function() data.csv("no/such/file.csv") end, "no/such/file.csv")
end)

test("data_split_seeded_and_untouched", function()
  local ds = data.csv(DIGITS, { label = -1 })
  local train, test = ds:split(0.8, { seed = 1 })
  eq(train:size(), 1438, "80% rounded")
  eq(test:size(), 359, "the rest")
  eq(ds:size(), 1797, "the original is untouched")
  local again = ds:split(0.8, { seed = 1 })
  local other = ds:split(0.8, { seed = 2 })
  local a, b, c = train.y:totable(), again.y:totable(), other.y:totable()
  local same, differ = true, false
  for i = 1, #a do
    if a[i] ~= b[i] then same = false end
    if a[i] ~= c[i] then differ = true end
  end
  eq(same, true, "same seed, same split")
  eq(differ, true, "another seed, another split")
  -- every example lands on exactly one side: the label counts add up
  local count = {}
  for _, y in ipairs(ds.y:totable()) do count[y] = (count[y] or 0) + 1 end
  for _, part in ipairs { train, test } do
    for _, y in ipairs(part.y:totable()) do count[y] = count[y] - 1 end
  end
  for y, n in pairs(count) do eq(n, 0, "label " .. y .. " balance") end
  raises(function() ds:split(1.5) end, "between 0 and 1")
  raises(function() ds:split(0.5, { sed = 1 }) end, "split: unknown option 'sed'")
end)

test("data_standardize_fit_and_apply", function()
  local train, test = data.csv(DIGITS, { label = -1 }):split(0.8, { seed = 1 })
  local train2, stats = train:standardize()
  eq(tostring(stats), "drover.stats (64 features)", "stats print")
  local m, s = column_stats(train2.x)
  for j = 1, 64 do
    near(m[j], 0, 1e-4, "standardized mean " .. j)
    if s[j] > 0 then near(s[j], 1, 1e-3, "standardized std " .. j) end
  end
  local m0, s0 = column_stats(train.x)
  local mean, std = stats:mean():totable(), stats:std():totable()
  near(mean[20], m0[20], 1e-3, "stats mean")
  near(std[20], s0[20] > 0 and s0[20] or 1, 1e-3, "stats std")
  eq(std[1], 1.0, "a constant feature gets std 1")
  local test2 = test:standardize(stats)
  local x, x2 = test.x:totable(), test2.x:totable()
  for _, ij in ipairs { { 1, 20 }, { 100, 33 }, { 359, 64 } } do
    local i, j = ij[1], ij[2]
    near(x2[i][j], (x[i][j] - mean[j]) / std[j], 1e-4, "test uses train statistics")
  end
  eq(test.x:get(1, 20), x[1][20], "the original test set is untouched")
  local m2 = column_stats(test2.x)
  local off = 0
  for j = 1, 64 do off = math.max(off, math.abs(m2[j])) end
  if off == 0 then error("test means exactly 0: statistics were refitted on test") end
  raises(function() data.synthetic { n = 10, features = 3 }:standardize(stats) end, "64")
end)

test("data_shuffle_shard_batch", function()
  local ds = data.csv(DIGITS, { label = -1 })
  local sh = ds:shuffle { seed = 3 }
  eq(sh:size(), 1797, "shuffle keeps every example")
  local a, b = ds.y:totable(), sh.y:totable()
  local moved = 0
  for i = 1, #a do if a[i] ~= b[i] then moved = moved + 1 end end
  if moved < 1000 then error("shuffle moved only " .. moved) end
  local s0, s3 = ds:shard(0, 4), ds:shard(3, 4)
  eq(s0:size(), 450, "shard 0 of 4")
  eq(s3:size(), 449, "shard 3 of 4")
  eq(s3.y:totable()[2], a[8], "shard 3 holds examples 3, 7, ... (0-based)")
  raises(function() ds:shard(4, 4) end, "outside 0..3")
  local n, rows, last = 0, 0, nil
  for x, y in ds:batch(500) do
    n = n + 1
    rows = rows + x:shape()[1]
    eq(y:numel(), x:shape()[1], "labels per batch")
    last = x:shape()[1]
  end
  eq(n, 4, "batches")
  eq(rows, 1797, "one epoch")
  eq(last, 297, "a smaller last batch")
  for x in ds:batch(100, { shuffle = true, seed = 5 }) do
    eq(x:shape()[2], 64, "early break")
    break
  end
end)

test("data_synthetic", function()
  local ds = data.synthetic { n = 500, features = 20, classes = 4, seed = 1 }
  eq(tostring(ds), "drover.dataset synthetic: 500 x 20, 4 classes", "printing")
  local x = ds.x:totable()
  for i = 1, 500, 50 do
    for j = 1, 20 do
      if x[i][j] < 0 or x[i][j] >= 1 then error("x outside [0, 1)") end
    end
  end
  local again = data.synthetic { n = 500, features = 20, classes = 4, seed = 1 }
  eq(again.x:get(7, 7), ds.x:get(7, 7), "seeded")
  raises(function() data.synthetic { n = 10, classes = 1 } end, "classes at least 2")
  raises(function() data.synthetic { rows = 10 } end, "unknown option 'rows'")
end)

test("data_other_readers", function()
  local svm = write_tmp("1 1:0.5 3:2\n0 2:1\n1 5:-1\n")
  local ds = data.libsvm(svm)
  eq(ds.features, 5, "features from the largest index")
  eq(ds.x:get(1, 3), 2.0, "densified")
  eq(data.libsvm(svm, { features = 8 }).features, 8, "features option")
  raises(function() data.libsvm(svm, { feature = 8 }) end, "data.libsvm: unknown option 'feature'")
  os.remove(svm)

  -- IDX: 3 images of 2x2 unsigned bytes and their labels, big-endian dims.
  local img = write_tmp(string.pack(">I4I4I4I4", 0x803, 3, 2, 2) .. string.char(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 255))
  local lab = write_tmp(string.pack(">I4I4", 0x801, 3) .. string.char(2, 0, 1))
  local idx = data.idx(img, lab)
  eq(tostring(idx):match("3 x 4, 3 classes") ~= nil, true, "idx shape: " .. tostring(idx))
  eq(idx.x:get(3, 2, 2), 255.0, "pixels kept as stored, images [n, h, w]")
  eq(#idx.x:shape(), 3, "IDX images keep their shape")
  eq(idx.y:totable()[1], 2.0, "labels")
  os.remove(img)
  os.remove(lab)

  -- .npy: a 2x3 float32 array and int64 labels, version 1.0 headers.
  local function npy(descr, shape, payload)
    local h = string.format("{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape)
    h = h .. string.rep(" ", 63 - (10 + #h) % 64) .. "\n"
    return write_tmp("\x93NUMPY\1\0" .. string.pack("<I2", #h) .. h .. payload)
  end
  local x = npy("<f4", "(2, 3)", string.pack("<ffffff", 1, 2, 3, 4, 5, 6.5))
  local y = npy("<i8", "(2,)", string.pack("<i8i8", 1, 0))
  local nd = data.npy(x, y)
  eq(nd:size(), 2, "npy rows")
  eq(nd.x:get(2, 3), 6.5, "npy values")
  eq(nd.classes, 2, "npy labels")
  -- non-finite values are refused at load, naming the row (CSV does too)
  local bad = npy("<f4", "(2, 3)", string.pack("<ffffff", 1, 2, 3, 4, 0 / 0, 6))
  raises(function() data.npy(bad, y) end, bad .. ": row 2, column 2: NaN is not a finite number")
  os.remove(bad)
  bad = npy("<f8", "(2, 3)", string.pack("<dddddd", 1, 1e300, 3, 4, 5, 6)) -- Inf as a float
  raises(function() data.npy(bad, y) end, bad .. ": row 1, column 2: Inf is not a finite number")
  os.remove(bad)
  local ybad = npy("<f4", "(2,)", string.pack("<ff", -1 / 0, 0))
  raises(function() data.npy(x, ybad) end, ybad .. ": row 1, column 1: -Inf is not a finite number")
  os.remove(ybad)
  os.remove(x)
  os.remove(y)
end)
