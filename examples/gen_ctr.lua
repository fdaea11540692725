-- gen_ctr.lua - a click-through dataset in the Criteo display-advertising
-- format (label, 13 integer columns, 26 hex categorical columns, tab-
-- separated, any feature may be empty), drawn from a planted model, and
-- that model's AUC on the file: what a trained model can hope to reach.
--
--   drover run examples/gen_ctr.lua OUT.tsv N [SEED]
--
-- The planted model is logistic: logit = bias + sum_j w_j * I_j (an empty
-- integer counts as 0, as data.csv reads it with categorical columns)
-- + sum_f s_f(value of field f), one score per field and value (missing
-- values too). Integer columns are exponential counts; categorical values
-- are Zipf-like (value k with probability about 1/k) over 3 to 1000 values
-- a field. Everything follows from SEED, so a file can be made again.
-- Prints "planted_auc=A rows=N positives=P" (A exact: ranks of the true
-- probabilities, ties averaged).

local out, n, seed = arg[1], tonumber(arg[2]), tonumber(arg[3] or "1")
if not out or not n or n < 1 or n ~= math.floor(n) or not seed then
  io.stderr:write("usage: drover run examples/gen_ctr.lua OUT.tsv N [SEED]\n")
  os.exit(2)
end
n, seed = math.floor(n), math.floor(seed)

-- splitmix64: a value per (seed, field, value), the same on every host
-- (Lua integers wrap as 64-bit two's complement).
local function mix(x)
  x = x + -7046029254386353131 -- 0x9e3779b97f4a7c15
  x = (x ~ (x >> 30)) * -4658895280553007687 -- 0xbf58476d1ce4e5b9
  x = (x ~ (x >> 27)) * -7723592293110705685 -- 0x94d049bb133111eb
  return x ~ (x >> 31)
end
local function unit(x) return ((mix(x) >> 11) + 0.5) / 2 ^ 53 end -- (0, 1)
local function normal(x) -- Box-Muller from two derived uniforms
  return math.sqrt(-2 * math.log(unit(x))) * math.cos(2 * math.pi * unit(x + 1))
end

local NI, NC = 13, 26
local cards = { 3, 10, 30, 100, 300, 1000 }
local w, scale = {}, {}
for j = 1, NI do
  w[j] = 0.08 * normal(mix(seed * 1000 + j))
  scale[j] = 1 + (j % 5) * 2 -- mean count of column j
end
local card, score, hex = {}, {}, {}
for f = 1, NC do
  card[f] = cards[(f - 1) % #cards + 1]
  score[f], hex[f] = {}, {}
  for k = 0, card[f] do -- k == 0: the field is missing
    local h = mix(seed * 7919 + f * 1000003 + k)
    score[f][k] = 0.3 * normal(h)
    hex[f][k] = k == 0 and "" or string.format("%08x", h & 0xffffffff)
  end
end
-- Centred so the click rate is about a quarter whatever the weights.
local bias = -1.3
for j = 1, NI do bias = bias - w[j] * 0.9 * scale[j] end

math.randomseed(seed)
local random, floor, log, exp = math.random, math.floor, math.log, math.exp
local f = assert(io.open(out, "w"))
local p, y, row = {}, {}, {}
local positives = 0
for i = 1, n do
  local logit = bias
  for j = 1, NI do
    if random() < 0.1 then
      row[j + 1] = ""
    else
      local v = floor(-log(1 - random()) * scale[j])
      row[j + 1] = v
      logit = logit + w[j] * v
    end
  end
  for c = 1, NC do
    local k = 0
    if random() >= 0.05 then k = floor(card[c] ^ random()) end -- P(k) ~ 1/k
    logit = logit + score[c][k]
    row[NI + 1 + c] = hex[c][k]
  end
  local prob = 1 / (1 + exp(-logit))
  local label = random() < prob and 1 or 0
  positives = positives + label
  row[1] = label
  p[i], y[i] = prob, label
  f:write(table.concat(row, "\t"), "\n")
end
f:close()

-- Exact rank AUC of the true probabilities, ties given their mean rank.
local order = {}
for i = 1, n do order[i] = i end
table.sort(order, function(a, b) return p[a] < p[b] end)
local rank_sum, i = 0, 1
while i <= n do
  local j = i
  while j < n and p[order[j + 1]] == p[order[i]] do j = j + 1 end
  local mean_rank = (i + j) / 2
  for k = i, j do
    if y[order[k]] == 1 then rank_sum = rank_sum + mean_rank end
  end
  i = j + 1
end
local negatives = n - positives
local auc = 0 / 0
if positives > 0 and negatives > 0 then
  auc = (rank_sum - positives * (positives + 1) / 2) / (positives * negatives)
end
print(string.format("planted_auc=%.6f rows=%d positives=%d", auc, n, positives))
