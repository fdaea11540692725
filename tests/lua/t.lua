-- t.lua - the Lua test helper: test(name, fn) runs fn under pcall and
-- prints "PASS name" or "FAIL name: error"; tests/run.sh counts the lines.
-- Usage in a test file:  local test, eq, near, raises = table.unpack(dofile("tests/lua/t.lua"))
local function test(name, fn)
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

return { test, eq, near, raises }
