-- extract_examples.lua - writes the examples of help() and the README as
-- Lua files for test_examples.sh: drover run extract_examples.lua README OUTDIR
--
-- help(): in each topic, the lines indented by two spaces under a line
-- "A first model...:" or "Example...:"; all of them in one file
-- (help-chain.lua), the overview's first, as the others build on it.
-- README: every ```lua block must have a marker on the line before it,
-- <!-- example: KIND -->. The blocks of one KIND form one file, in order
-- (KIND.lua, spaces as '-'), except: "reference" (signatures, not code) is
-- not written; "ssh", "slurm", "spark" and "yarn" need hosts or a cluster and
-- go to compile-ssh.lua / compile-slurm.lua / compile-spark.lua /
-- compile-yarn.lua, to be compiled only. An unmarked block is an error.
local readme, out = arg[1], arg[2]

local function write(name, text)
  local f = assert(io.open(out .. "/" .. name, "w"))
  f:write(text)
  f:close()
end

-- help()
local topics = require("drover.help").topics
local names = {}
for k in pairs(topics) do if k ~= "drover" then names[#names + 1] = k end end
table.sort(names)
table.insert(names, 1, "drover")
local chain, seen = {}, {}
for _, name in ipairs(names) do
  local text = topics[name]
  if not seen[text] then
    seen[text] = true
    local taking = false
    for line in (text .. "\n"):gmatch("([^\n]*)\n") do
      if line:match("^A first model.*:$") or line:match("^Example.*:$") then taking = true
      elseif taking and line:match("^  ") then chain[#chain + 1] = line:sub(3)
      else taking = false end
    end
  end
end
write("help-chain.lua", table.concat(chain, "\n") .. "\n")

-- README
local files, order, kind, block, n = {}, {}, nil, nil, 0
for line in io.lines(readme) do
  n = n + 1
  if block then
    if line:match("^```") then
      if not files[kind] then files[kind] = {}; order[#order + 1] = kind end
      table.insert(files[kind], table.concat(block, "\n"))
      block = nil
    else
      block[#block + 1] = line
    end
  elseif line:match("^```lua") then
    if not kind then error(readme .. ":" .. n .. ": a ```lua block without <!-- example: KIND -->", 0) end
    block = {}
  else
    kind = line:match("^<!%-%- example: ([%w ]-) %-%->$")
  end
end
for _, k in ipairs(order) do
  local name = k:gsub(" ", "-")
  if k == "ssh" or k == "slurm" or k == "spark" or k == "yarn" then write("compile-" .. name .. ".lua", table.concat(files[k], "\n") .. "\n")
  elseif k ~= "reference" then write(name .. ".lua", table.concat(files[k], "\n") .. "\n") end
end
print("help: " .. #chain .. " lines; README: " .. table.concat(order, ", "))
