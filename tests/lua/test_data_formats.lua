-- test_data_formats.lua - data format friction: zero-based libsvm, label
-- columns named as the user wrote them, a guessed header reported, class
-- names in the label column, regression targets, features-only files.
local test, eq, near, raises = table.unpack(dofile("tests/lua/t.lua"))
local data = drover.data
local TMP = os.getenv("TMPDIR") or "/tmp"
local DIR = TMP .. "/drover-formats-" .. os.time() .. "-" .. math.random(1e6)
os.execute("mkdir -p '" .. DIR .. "'")

local function write(name, text)
  local f = assert(io.open(DIR .. "/" .. name, "w"))
  f:write(text)
  f:close()
  return DIR .. "/" .. name
end

test("formats-01 libsvm zero_based = true and \"auto\" (scikit-learn's default)", function()
  local p = write("zb.svm", "1 0:0.5 2:1.5\n0 1:2\n")
  raises(function() data.libsvm(p) end, "zb.svm:1: index 0: indices start at 1 (a zero-based file")
  local d = data.libsvm(p, { zero_based = true })
  eq(d.features, 3, "features")
  eq(d.x[1][1], 0.5, "index 0 is the first feature")
  eq(d.x[2][2], 2, "index 1 the second")
  local a = data.libsvm(p, { zero_based = "auto" })
  eq(a.features, 3, "auto detects the zero")
  local one = data.libsvm(write("ob.svm", "1 1:0.5 3:1.5\n"), { zero_based = "auto" })
  eq(one.features, 3, "auto: a one-based file stays one-based")
  eq(one.x[1][1], 0.5, "one-based first feature")
  raises(function() data.libsvm(p, { zero_based = "yes" }) end, "zero_based must be true, false or \"auto\"")
end)

test("formats-02 an out-of-range label column names the number given", function()
  local p = write("five.csv", "1,2,3,4,5\n6,7,8,9,10\n")
  raises(function() data.csv(p, { label = 7 }) end, "label column 7 is out of range: the file has 5 columns")
  raises(function() data.csv(p, { label = -9 }) end, "label column -9 is out of range")
end)

test("formats-03 a guessed header is reported; class names map to sorted ids", function()
  local p = write("iris.csv", "a,b,species\n1,2,setosa\n3,4,virginica\n5,6,setosa\n7,8,versicolor\n")
  local err = DIR .. "/note.txt"
  -- the note goes to stderr: run the read in a child drover to see it
  local script = write("h.lua", "local d = drover.data.csv('" .. p .. "', { classes = 'names' })\n" ..
    "print(d, table.concat(d.names, ' '), d.y[1], d.y[2], d.y[4])\n")
  local DROVER = os.getenv("DROVER") or arg[-1]
  local f = io.popen("'" .. DROVER .. "' run '" .. script .. "' 2>'" .. err .. "'")
  local out = f:read("a")
  f:close()
  local note = assert(io.open(err)):read("a")
  assert(note:find("first line of .*iris.csv is not numbers, so it was read as a header"), note)
  assert(out:find("4 x 2, 3 classes", 1, true), out)
  assert(out:find("setosa versicolor virginica\t0.0\t2.0\t1.0", 1, true), out)
  raises(function() data.csv(p) end, "iris.csv:2: field 3: 'setosa' is not a number (class names in the label column: { classes = \"names\" })")
  local q = write("noheader.csv", "1,2,cat\n3,4,dog\n")
  local d = data.csv(q, { classes = "names" })
  eq(d.n, 2, "no header guessed when only the label is text")
end)

test("formats-04 a regression target prints 1 target, not hundreds of classes", function()
  local lines = {}
  for i = 1, 60 do lines[#lines + 1] = string.format("%d,%d", i, 25 + (i * 37) % 300) end
  local d = data.csv(write("reg.csv", table.concat(lines, "\n") .. "\n"))
  assert(tostring(d):find("60 x 1, 1 target", 1, true), tostring(d))
  local c = data.csv(write("cls.csv", "1,0\n2,1\n3,2\n4,1\n"))
  assert(tostring(c):find("3 classes", 1, true), tostring(c))
  local forced = data.csv(write("cls2.csv", "1,0\n2,1\n"), { classes = false })
  assert(tostring(forced):find("1 target", 1, true), tostring(forced))
end)

test("formats-05 features-only files and malformed data name file and line", function()
  local d = data.csv(write("feat.csv", "1,2,3\n4,5,6\n"), { label = false })
  eq(d.features, 3, "every column a feature")
  assert(tostring(d):find("no labels", 1, true), tostring(d))
  raises(function() data.csv(write("bad.csv", "1,2,3\n4,x,6\n"), { label = false }) end,
         "bad.csv:2: field 2: 'x' is not a number")
  raises(function() data.csv(write("short.csv", "1,2,3\n4,5\n")) end, "short.csv:2: expected 3 fields, found 2")
  raises(function() data.libsvm(write("bad.svm", "1 1:2\n0 3:x\n")) end, "bad.svm:2: index 3: 'x' is not a number")
end)

test("formats-07 an out-of-range number on line 1 is an error, not a header", function()
  -- 1e999 overflows a float, as 1e39 does: a number all the same, so the
  -- line is data and the value the same error as on any other line
  raises(function() data.csv(write("big1.csv", "1e999,2,0\n1,2,1\n3,4,0\n")) end,
         "big1.csv:1: field 1: '1e999' is not a finite number")
  raises(function() data.csv(write("big2.csv", "1,2,0\n1e999,2,1\n3,4,0\n")) end,
         "big2.csv:2: field 1: '1e999' is not a finite number")
  raises(function() data.csv(write("big3.csv", "1,-1e39,0\n1,2,1\n")) end,
         "big3.csv:1: field 2: '-1e39' is not a finite number")
  local h = data.csv(write("big4.csv", "1e999,2,0\n1,2,1\n3,4,0\n"), { header = true })
  eq(h.n, 2, "header = true still skips line 1")
  local t = data.csv(write("text.csv", "a,2,0\n1,2,1\n3,4,0\n"))
  eq(t.n, 2, "a field that is not a number at all still makes a header")
  -- a stream (a feed) read the overflow as inf, on any line
  local function stream(name, text, o)
    local st = data.stream(write(name, text), o or { format = "csv" })
    return function() return st:read(10) end
  end
  raises(stream("s1.csv", "1e999,2,0\n1,2,1\n"), "s1.csv:1: field 1: '1e999' is not a finite number")
  raises(stream("s2.csv", "a,b,c\n1,2,1\n3,1e39,0\n"), "s2.csv:3: field 2: '1e39' is not a finite number")
  raises(stream("s3.svm", "1 1:2\n0 2:-1e999\n", { format = "libsvm", features = 2 }),
         "s3.svm:2: index 2: '-1e999' is not a finite number")
  local x = stream("s4.csv", "a,b,c\n1,2,1\n3,4,0\n")()
  eq(x:size(1), 2, "the stream's text header is still skipped")
end)

os.execute("rm -rf '" .. DIR .. "'")

test("formats-06 class names are kept by exp:save and drover.experiment.load", function()
  local dir = TMP .. "/drover-formats-save-" .. os.time() .. "-" .. math.random(1e6)
  os.execute("mkdir -p '" .. dir .. "'")
  local f = assert(io.open(dir .. "/c.csv", "w"))
  for i = 1, 30 do f:write(string.format("%d,%d,%s\n", i, i % 3, ({ "cat", "dog", "emu" })[i % 3 + 1])) end
  f:close()
  local ds = data.csv(dir .. "/c.csv", { classes = "names" })
  local nn, optim = drover.nn, drover.optim
  local exp = drover.experiment { name = "n", loss = nn.CrossEntropy(), optimizer = optim.SGD { lr = 0.1 },
    model = nn.Sequential { nn.Linear(2, 3) }, train = { data = ds, batch = 10, epochs = 1, reshard = "step" },
    verbose = false, runs = false }
  exp:fit()
  eq(table.concat(exp:classes(), ","), "cat,dog,emu", "names of the training data")
  exp:save(dir .. "/saved")
  local back = drover.experiment.load(dir .. "/saved", { train = { data = ds } })
  eq(table.concat(back:classes(), ","), "cat,dog,emu", "names after load")
  eq(back.train.reshard, "step", "train.reshard after load")
  os.execute("rm -rf '" .. dir .. "'")
end)
