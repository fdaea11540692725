-- t.lua - the Lua test helper: test(name, fn) runs fn under pcall and
-- prints "PASS name" or "FAIL name: error"; tests/run.sh counts the lines.
-- Usage in a test file:
--   local T = dofile("tests/lua/t.lua")
--   local test, eq, near, raises = table.unpack(T)
--   local read, node = T.read, T.node    -- what else the file needs
-- With ONLY_CASE set, test() runs only the tests whose name contains it
-- (ONLY_CASE=cluster-05 ./drover run tests/lua/test_cluster.lua).
local only = os.getenv("ONLY_CASE")
if only == "" then only = nil end

local function test(name, fn)
  if only and not name:find(only, 1, true) then return end
  local ok, err = xpcall(fn, debug.traceback)
  if ok then
    print("PASS " .. name)
  else
    print("FAIL " .. name .. ": " .. tostring(err))
  end
  io.stdout:flush()
end

local function eq(a, b, what)
  if a ~= b then
    error(string.format("%s: expected %s, got %s", what or "eq", tostring(b), tostring(a)), 2)
  end
end

local function near(a, b, tol, what)
  if type(a) ~= "number" or math.abs(a - b) > tol then
    error(string.format("%s: expected %s +- %s, got %s", what or "near", b, tol, tostring(a)), 2)
  end
end

-- raises(fn, pattern): fn must raise an error whose message contains the plain text pattern.
local function raises(fn, text)
  local ok, err = pcall(fn)
  if ok then error("expected an error containing '" .. text .. "'", 2) end
  if not tostring(err):find(text, 1, true) then
    error("error '" .. tostring(err) .. "' lacks '" .. text .. "'", 2)
  end
  return err
end

-- read(path): the file's bytes; an error naming it when it cannot be opened.
local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

-- node(c, role, index): the row of c:nodes() for role:index, or nil.
local function node(c, role, index)
  for _, n in ipairs(c:nodes()) do if n.role == role and n.index == index then return n end end
end

-- sh(cmd): the exit status of a shell command (0 when it succeeded).
local function sh(cmd)
  local ok, _, code = os.execute(cmd)
  return ok and 0 or code
end

-- alive(pid): whether the process still exists (kill -0).
local function alive(pid) return sh("kill -0 " .. pid .. " 2>/dev/null") == 0 end

return { test, eq, near, raises, read = read, node = node, sh = sh, alive = alive,
  -- where cluster tests keep their runs
  RUNS = os.getenv("TMPDIR") and (os.getenv("TMPDIR") .. "/drover-runs") or "/tmp/drover-test-runs" }
