-- test_pretty.lua - drover.pretty.format, the REPL's printer: nested tables,
-- sorted keys, quoting, cycles, userdata, elision.
local test, eq, near, raises = table.unpack(dofile("tests/lua/t.lua"))
local pretty = require "drover.pretty"
local fmt = pretty.format

test("pretty_scalars", function()
  eq(fmt(42), "42", "integer")
  eq(fmt(0.5), "0.5", "float")
  eq(fmt("a\"b\nc"), '"a\\"b\\nc"', "quoted string")
  eq(fmt(nil), "nil", "nil")
  eq(fmt(true), "true", "boolean")
  eq(fmt(0 / 0), "nan", "nan")
  eq(fmt(math.huge), "math.huge", "inf")
  eq(pretty, drover.pretty, "drover.pretty is the module")
end)

test("pretty_short_tables_inline_sorted", function()
  eq(fmt({}), "{}", "empty")
  eq(fmt({ 1, 2, 3 }), "{ 1, 2, 3 }", "sequence")
  eq(fmt({ loss = 0.25, accuracy = 0.5, steps = 10 }), "{ accuracy = 0.5, loss = 0.25, steps = 10 }", "sorted keys")
  eq(fmt({ "x", n = 1, [10] = true, ["a b"] = 2 }), '{ "x", [10] = true, ["a b"] = 2, n = 1 }', "mixed keys")
  eq(fmt({ ["end"] = 1 }), '{ ["end"] = 1 }', "keywords are quoted")
end)

test("pretty_nested_multiline", function()
  local t = {
    name = "digits-mlp",
    train = { batch = 64, epochs = 20, shuffle = true, data = "examples/data/digits.csv" },
    history = { { step = 200, loss = 0.1473204905 }, { step = 400, loss = 0.0797336071 } },
  }
  eq(fmt(t), [[
{
  history = {
    { loss = 0.1473204905, step = 200 },
    { loss = 0.0797336071, step = 400 }
  },
  name = "digits-mlp",
  train = {
    batch = 64,
    data = "examples/data/digits.csv",
    epochs = 20,
    shuffle = true
  }
}]], "nested: one line when it fits in 78 columns, else one entry per line")
end)

test("pretty_cycles_marked", function()
  local t = { name = "loop" }
  t.self = t
  local s = fmt(t)
  eq(s, '{ name = "loop", self = <cycle: ' .. tostring(t) .. "> }", "cycle")
  local shared = { 1 }
  eq(fmt({ a = shared, b = shared }), "{ a = { 1 }, b = { 1 } }", "a shared table is not a cycle")
end)

test("pretty_userdata_through_tostring", function()
  local m = drover.nn.Sequential { drover.nn.Linear(2, 3) }
  eq(fmt(m), tostring(m), "a model prints as itself")
  local s = fmt({ model = m, opt = drover.optim.SGD { lr = 0.1 } })
  eq(s, [[
{
  model = nn.Sequential {
    [input -> (1) -> output]
    (1): nn.Linear(2 -> 3)
  },
  opt = optim.SGD { lr = 0.1 }
}]], "multi-line userdata indented in place")
end)

test("pretty_long_and_deep_elided", function()
  local long = {}
  for i = 1, 120 do long[i] = i end
  local s = fmt(long)
  if not s:find("... (70 more)", 1, true) then error("no elision in " .. s:sub(1, 80)) end
  if s:find("51", 1, true) then error("item 51 shown") end
  local deep = {}
  local cur = deep
  for _ = 1, 10 do cur.next = {}; cur = cur.next end
  if not fmt(deep):find("{...}", 1, true) then error("deep tables not elided") end
end)
