-- ckpt_committed.lua - for test scripts (dofile from the repository root):
-- returns committed(run_dir), how many checkpoints events.log says were
-- committed so far (0 without a run directory or its log).
return function(run_dir)
  local f = run_dir and io.open(run_dir .. "/events.log")
  if not f then return 0 end
  local n = 0
  for line in f:lines() do
    if line:find(" checkpoint step %d+: ") then n = n + 1 end
  end
  f:close()
  return n
end
