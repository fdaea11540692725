-- test_gz.lua - every dataset reader takes gzip-compressed files
-- transparently (by their magic bytes, as datasets are distributed), and a
-- truncated or corrupt one fails by name.
local test, eq, near, raises = table.unpack(dofile("tests/lua/t.lua"))
local data = drover.data

local function write_tmp(bytes)
  local p = os.tmpname()
  local f = assert(io.open(p, "wb"))
  f:write(bytes)
  f:close()
  return p
end

local function read(p)
  local f = assert(io.open(p, "rb"))
  local s = f:read("a")
  f:close()
  return s
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
  eq(idx.x:get(2, 4), 7.0, "idx pixels")
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
