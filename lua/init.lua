-- init.lua - the Lua half of the drover library, run once per Lua state by
-- drover_lua_init() after the C modules are in the global `drover`:
-- drover.seed, drover.experiment, the pretty printer and help().

local drover = drover

drover.seed = require("drover.train").seed
drover.experiment = require "drover.experiment"
drover.pretty = require "drover.pretty"

local help = require "drover.help"
drover.help = help.help
help = help.help
_G.help = help
_G.dash = drover.dash -- dash([c]): the dashboard over c (or the newest cluster) until q

return drover
