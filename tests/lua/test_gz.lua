-- test_gz.lua - every dataset reader takes gzip-compressed files
-- transparently (by their magic bytes, as datasets are distributed), and a
-- truncated or corrupt one fails by name.
local T = dofile("tests/lua/t.lua")
local test, eq, near, raises = table.unpack(T)
local read = T.read
local data = drover.data

local function write_tmp(bytes)
  local p = os.tmpname()
  local f = assert(io.open(p, "wb"))
  f:write(bytes)
  f:close()
  return p
end

-- gzip of a file's bytes (the gzip tool), as path .. ".gz"
local function gz(p, extra)
  assert(os.execute("gzip -k -n -f " .. (extra or "") .. " " .. p), "gzip")
  return p .. ".gz"
end

test("gz-01 csv, libsvm, idx and npy read the same from .gz", function()
  local plain = data.csv("examples/data/digits.csv", { label = -1 })
  local tmp = write_tmp(read("examples/data/digits.csv"))
  local z = gz(tmp)
  local packed = data.csv(z, { label = -1 })
  eq(packed:size(), plain:size(), "rows")
  eq(packed.x:get(1797, 64), plain.x:get(1797, 64), "last value")
  eq(packed.y:totable()[1797], plain.y:totable()[1797], "last label")
  -- two gzip members one after the other are one file (`cat a.gz b.gz`)
  local head = write_tmp("1,2,0\n")
  local tail = write_tmp("3,4,1\n")
  local both = write_tmp(read(gz(head)) .. read(gz(tail)))
  eq(data.csv(both, { label = -1 }):size(), 2, "concatenated members")

  local svm = write_tmp("1 1:0.5 3:2\n0 2:1\n")
  eq(data.libsvm(gz(svm)).x:get(1, 3), 2.0, "libsvm")
  local img = write_tmp(string.pack(">I4I4I4I4", 0x803, 2, 2, 2) .. string.char(0, 1, 2, 3, 4, 5, 6, 7))
  local lab = write_tmp(string.pack(">I4I4", 0x801, 2) .. string.char(1, 0))
  local idx = data.idx(gz(img), gz(lab))
  eq(idx.x:get(2, 2, 2), 7.0, "idx pixels")
  eq(idx.y:totable()[1], 1.0, "idx labels")
  local h = "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2), }"
  h = h .. string.rep(" ", 63 - (10 + #h) % 64) .. "\n"
  local npy = write_tmp("\x93NUMPY\1\0" .. string.pack("<I2", #h) .. h .. string.pack("<ff", 1.5, -2))
  eq(data.npy(gz(npy)).x:get(1, 2), -2.0, "npy")
  for _, p in ipairs { tmp, head, tail, both, svm, img, lab, npy } do
    os.remove(p)
    os.remove(p .. ".gz")
  end
end)

test("gz-02 truncated and corrupt files are named", function()
  local tmp = write_tmp(read("examples/data/digits.csv"))
  local whole = read(gz(tmp))
  local cut = write_tmp(whole:sub(1, #whole // 2))
  raises(function() data.csv(cut) end, cut .. ": byte ")
  raises(function() data.csv(cut) end, "the file ends inside the data")
  local bad = write_tmp(whole:sub(1, 40) .. string.rep("\255", 64) .. whole:sub(105))
  local err = raises(function() data.csv(bad) end, bad .. ": byte ")
  assert(err:find("of the gzip file", 1, true), err)
  for _, p in ipairs { tmp, tmp .. ".gz", cut, bad } do os.remove(p) end
end)

test("gz-03 images keep their shape: IDX [n, h, w] and npy [n, c, h, w] batches, into a Conv2d", function()
  local nn = drover.nn
  local pix = {}
  for i = 1, 6 * 16 do pix[i] = string.char((i * 37) % 256) end
  local img = write_tmp(string.pack(">I4I4I4I4", 0x803, 6, 4, 4) .. table.concat(pix))
  local lab = write_tmp(string.pack(">I4I4", 0x801, 6) .. string.char(0, 1, 2, 0, 1, 2))
  local ds = data.idx(gz(img), lab)
  eq(table.concat(ds.x:shape(), "x"), "6x4x4", "IDX shape")
  eq(ds.features, 16, "features per image")
  local train, test_ds = ds:split(0.5, { seed = 1 })
  eq(table.concat(train.x:shape(), "x"), "3x4x4", "split keeps the shape")
  eq(table.concat(train:standardize().x:shape(), "x"), "3x4x4", "standardize keeps the shape")
  for x in ds:batch(4) do eq(table.concat(x:shape(), "x"), "4x4x4", "batch") break end
  -- a Conv2d with one input channel takes [n, h, w]
  drover.seed(1)
  local m = nn.Sequential { nn.Conv2d(1, 2, 3), nn.ReLU(), nn.Flatten(), nn.Linear(8, 3) }
  local r = drover.experiment { model = m, loss = nn.CrossEntropy(), optimizer = drover.optim.SGD { lr = 0.01 },
    train = { data = train, batch = 2, epochs = 1 }, verbose = false }:fit()
  eq(r.steps, 2, "trained on [n, h, w] batches")
  local h = "{'descr': '|u1', 'fortran_order': False, 'shape': (2, 1, 2, 3), }"
  h = h .. string.rep(" ", 63 - (10 + #h) % 64) .. "\n"
  local npy = write_tmp("\x93NUMPY\1\0" .. string.pack("<I2", #h) .. h .. string.char(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12))
  local nd = data.npy(npy)
  eq(table.concat(nd.x:shape(), "x"), "2x1x2x3", "npy keeps its shape")
  eq(nd.x:get(2, 1, 2, 3), 12.0, "npy values")
  for _, p in ipairs { img, lab, npy, img .. ".gz" } do os.remove(p) end
end)
