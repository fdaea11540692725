-- scaler.lua - the scale tests' progress function: c:scale { worker = N }
-- during a fit, at the steps a plan names (test_scale_fit.lua,
-- test_scale_feed.lua, tests/cli/scale_engine.lua, test_scale_metrics.sh).
--
--   local scaler = dofile("tests/lua/scaler.lua")
--   progress = scaler(c, { { 100, 4 }, { 1000, 1 } }, { log = t, hold = 0.02,
--                          said = function(step, count) ... end })
--
-- Each change is asked once the fit passed its step and the one before is
-- done (a change asked while one is under way is refused, and asked again
-- at the next call). Until events.log says it is done, each progress call
-- is held `hold` seconds, blocking: drover.sleep would run the loop, and
-- the steps with it, and a fit of small steps ended before a new worker
-- was up on a loaded machine (an engine takes seconds to start one).
-- opts.log gets { step, count } per change asked.
return function(c, plan, opts)
  opts = opts or {}
  local k, pending, seen = 1, false, 0
  local function dones()
    local f = assert(io.open(c.run_dir .. "/events.log"))
    local _, n = f:read("a"):gsub("scale: worker %d+ %-> %d+ done", "")
    f:close()
    return n
  end
  return function(p)
    if pending and dones() <= seen then return io.popen("sleep " .. (opts.hold or 0.02)):close() end
    pending = false
    local at = plan[k]
    if not at or p.step < at[1] then return end
    seen = dones()
    local ok, err = pcall(c.scale, c, { worker = at[2] })
    if not ok and tostring(err):find("is not over yet", 1, true) then return end
    assert(ok, err)
    k = k + 1
    pending = true
    if opts.log then opts.log[#opts.log + 1] = { p.step, at[2] } end
    if opts.said then opts.said(p.step, at[2]) end
  end
end
