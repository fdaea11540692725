-- test_cluster_mixed.lua - a role's own launcher (mixed placement; the runs
-- on Spark and YARN are tests/cli/test_spark_mixed.sh, test_yarn_mixed.sh):
-- the option's parsing and refusals (before any run directory exists), and
-- where each node runs in c:nodes(), nodes.tsv and events.log.
local T = dofile("tests/lua/t.lua")
local test, eq, raises = T[1], T[2], T[4]
local RUNS, read = T.RUNS, T.read

local function refused(spec, text)
  spec.runs = RUNS .. "/refused"
  raises(function() drover.cluster(spec) end, text)
end

test("cluster-mixed-01 a role's launcher is checked: its name, its type, what it needs", function()
  refused({ ps = { launcher = "locl" } }, "cluster: ps.launcher: launcher 'locl' is not available")
  refused({ worker = { launcher = 1 } }, "cluster: worker: launcher must be a string")
  refused({ chief = { instances = 1, launcher = "" } }, "cluster: chief: launcher must name a launcher")
  refused({ worker = { launcher = "spark" } },
    'cluster: worker.launcher = "spark" needs spark = { master = "spark://host:7077" }')
  refused({ evaluator = { instances = 1, launcher = "ssh" } },
    'cluster: evaluator.launcher = "ssh" needs hosts = { "host", ... }')
  refused({ ps = { launcher = "external" } }, 'cluster: the "external" launcher cannot be mixed')
  refused({ launcher = "external", worker = { launcher = "local" } },
    'cluster: the "external" launcher cannot be mixed with others (worker runs on "local")')
  eq(io.open(RUNS .. "/refused"), nil, "no run directory for a refused cluster")
end)

test("cluster-mixed-02 a launcher's options are for a launcher some role uses", function()
  refused({ launcher = "spark", ps = { launcher = "local" }, worker = { launcher = "local" },
    spark = { master = "spark://127.0.0.1:1" } }, 'spark = {...} is for launcher = "spark"')
  refused({ ps = { launcher = "local" }, yarn = { queue = "q" } }, 'yarn is for launcher = "yarn"')
  refused({ launcher = "yarn", worker = { label = "gpu", launcher = "local" } },
    'cluster: worker.label is for launcher = "yarn" (node labels are YARN\'s; worker runs on "local")')
  refused({ worker = { launcher = "local" }, hosts = { "a" } }, 'hosts is for launcher = "ssh"')
  refused({ ps = { launcher = "local" }, files = { "x" } }, 'files is for launchers')
end)

test("cluster-mixed-03 roles naming \"local\" run locally; where each node runs is shown", function()
  local c <close> = drover.cluster { ps = { instances = 1, launcher = "local" },
    worker = { instances = 2, launcher = "local" }, runs = RUNS, name = "mixed03" }
  local n = c:nodes()
  eq(#n, 3, "nodes")
  for _, nd in ipairs(n) do
    eq(nd.launcher, "local", nd.role .. " launcher")
    eq(nd.where, "local", nd.role .. " where")
  end
  local tsv = read(c.run_dir .. "/nodes.tsv")
  assert(tsv:find("\trestarts\twhere\n", 1, true), tsv)
  assert(tsv:find("\nworker:1\t[^\n]*\tlocal\n"), tsv)
  assert(read(c.run_dir .. "/events.log"):find("node got ps:0 on [^\n]*, where local\n"), "events.log")
end)
