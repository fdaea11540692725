-- files_util.lua - what the files-mode tests share (tests/lua/test_files.lua,
-- test_files_idx.lua, tests/cli/files_hdfs.lua): the peak RSS, data files
-- made on the spot, and two models' parameters compared.
--   local F = dofile("tests/lua/files_util.lua")
local eq = dofile("tests/lua/t.lua")[2]
local F = {}

-- Resets this process's peak resident set to its current RSS (Linux: 5 to
-- /proc/self/clear_refs), so that the peak a test reads is its own fit's,
-- not what tests before it in the same process used.
function F.hwm_reset()
  local f = io.open("/proc/self/clear_refs", "w")
  if f then f:write("5") f:close() end
end

-- The peak resident set of this process (the coordinator's), in kB.
function F.hwm_kb()
  local f = assert(io.open("/proc/self/status"))
  local s = f:read("a")
  f:close()
  return tonumber(s:match("VmHWM:%s*(%d+)"))
end

-- A .npy header for a C-order array of `descr` and `shape` (a string
-- like "(3, 4)"), padded to 64 bytes as numpy writes it.
function F.npy_header(descr, shape)
  local dict = string.format("{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape)
  local total = (10 + #dict + 1 + 63) // 64 * 64
  local hlen = total - 10
  return "\x93NUMPY\1\0" .. string.char(hlen % 256, hlen // 256) .. dict ..
         string.rep(" ", hlen - #dict - 1) .. "\n"
end

-- 8 variants of each class's 28x28 image: a band of rows and a band of
-- columns over seeded noise, learnable as Fashion-MNIST is.
local function variants()
  local vs = {}
  for c = 0, 9 do
    vs[c] = {}
    for v = 1, 8 do
      local px = {}
      for r = 0, 27 do
        for col = 0, 27 do
          local on = (r >= c * 2 and r < c * 2 + 6) or (col >= 23 - c * 2 and col <= 27 - c * 2)
          local noise = ((r * 31 + col * 17 + v * 101 + c * 7) * 2654435761 >> 7) % 80
          px[#px + 1] = string.char(on and 150 + noise or noise)
        end
      end
      vs[c][v] = table.concat(px)
    end
  end
  return vs
end

-- fashion(images, labels, n): writes n Fashion-MNIST-shaped examples as
-- the IDX files `images` (uint8 [n, 28, 28]) and `labels` (uint8 [n]), a
-- thousand rows at a time (60000 stay out of memory).
function F.fashion(images, labels, n)
  local vs = variants()
  local fi, fl = assert(io.open(images, "wb")), assert(io.open(labels, "wb"))
  fi:write(string.pack(">I4I4I4I4", 0x803, n, 28, 28))
  fl:write(string.pack(">I4I4", 0x801, n))
  for b = 0, n - 1, 1000 do
    local rows, labs = {}, {}
    for i = b, math.min(n, b + 1000) - 1 do
      local c = (i * 7 + i // 10) % 10
      rows[#rows + 1] = vs[c][i % 8 + 1]
      labs[#labs + 1] = string.char(c)
    end
    fi:write(table.concat(rows))
    fl:write(table.concat(labs))
  end
  fi:close()
  fl:close()
end

-- same_params(p1, p2): two models' parameters (model:parameters()) are
-- bit-identical, or an error naming the first that is not.
function F.same_params(p1, p2)
  eq(#p1, #p2, "parameters")
  local function same(u, v, what)
    if type(u) ~= "table" then return eq(u, v, what) end
    eq(#u, #v, what)
    for k = 1, #u do same(u[k], v[k], what) end
  end
  for i = 1, #p1 do same(p1[i].value:totable(), p2[i].value:totable(), "parameter " .. p1[i].name) end
end

return F
