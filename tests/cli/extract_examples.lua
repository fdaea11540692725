-- extract_examples.lua - writes the examples of help() and of the
-- documentation pages as Lua files for test_examples.sh:
--   drover run extract_examples.lua OUTDIR PAGE.md...
--
-- help(): in each topic, the lines indented by two spaces under a line
-- "A first model...:" or "Example...:"; all of them in one file
-- (help-chain.lua), the overview's first, as the others build on it.
--
-- Pages (README.md, docs/*.md): every ```lua block must have a marker on
-- the line before it, <!-- example: KIND -->. The blocks of one KIND on one
-- page form one file, in order: PAGE--KIND.lua, PAGE being the page's path
-- without ".md" and with '/' as '-' (docs-lua-api--tensors.lua), spaces in
-- KIND as '-'. Each line of a block keeps its page's line number in the
-- file (the lines between are empty), so an error at FILE:N is at PAGE:N.
-- Except: "reference" (signatures, not code) is not written; "ssh",
-- "slurm", "spark" and "yarn" need hosts or a cluster and go to
-- compile-PAGE--KIND.lua, to be compiled only. An unmarked or unclosed
-- block is an error naming the page and the line.
-- pages.tsv lists each file written and its page: FILE<TAB>PAGE<TAB>KIND.
local out = arg[1]
assert(out and arg[2], "usage: drover run extract_examples.lua OUTDIR PAGE.md...")

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

-- One page: { kind = { [line number] = text, ... } } and the kinds in the
-- order they first appear.
local function blocks_of(page)
  local kinds, order, kind, block, n = {}, {}, nil, nil, 0
  for line in io.lines(page) do
    n = n + 1
    if block then
      if line:match("^```") then
        block = nil
      else
        block[n] = line
      end
    elseif line:match("^```lua") then
      if not kind then error(page .. ":" .. n .. ": a ```lua block without <!-- example: KIND -->", 0) end
      if not kinds[kind] then kinds[kind] = {}; order[#order + 1] = kind end
      block, kinds[kind].last = kinds[kind], n
    else
      kind = line:match("^<!%-%- example: ([%w %-]-) %-%->$")
    end
  end
  if block then error(page .. ": the ```lua block of line " .. block.last .. " never ends", 0) end
  return kinds, order, n
end

-- The lines of one kind, each at its page line (empty lines between).
local function padded(lines, count)
  local t = {}
  for i = 1, count do t[i] = lines[i] or "" end
  return table.concat(t, "\n") .. "\n"
end

local index, said = {}, {}
for i = 2, #arg do
  local page = arg[i]
  local kinds, order, count = blocks_of(page)
  local slug = page:gsub("%.md$", ""):gsub("/", "-")
  for _, k in ipairs(order) do
    local name = slug .. "--" .. k:gsub(" ", "-") .. ".lua"
    if k == "ssh" or k == "slurm" or k == "spark" or k == "yarn" then name = "compile-" .. name
    elseif k == "reference" then name = nil end
    if name then
      kinds[k].last = nil
      write(name, padded(kinds[k], count))
      index[#index + 1] = name .. "\t" .. page .. "\t" .. k
    end
  end
  said[#said + 1] = page .. " (" .. (#order > 0 and table.concat(order, ", ") or "none") .. ")"
end
write("pages.tsv", table.concat(index, "\n") .. "\n")
print("help: " .. #chain .. " lines; pages: " .. table.concat(said, "; "))
