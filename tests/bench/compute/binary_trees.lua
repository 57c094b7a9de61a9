-- binary-trees: allocate and walk perfect binary trees (the GC-heavy one).
local M = { size = 16 }

local function make(depth)
   if depth == 0 then return {} end
   depth = depth - 1
   return { make(depth), make(depth) }
end

local function check(tree)
   if tree[1] then return 1 + check(tree[1]) + check(tree[2]) end
   return 1
end

function M.run(n)
   local mindepth = 4
   local maxdepth = math.max(mindepth + 2, n)
   local total = check(make(maxdepth + 1))
   local long = make(maxdepth)
   for depth = mindepth, maxdepth, 2 do
      local iters = 2 ^ (maxdepth - depth + mindepth)
      local sum = 0
      for _ = 1, iters do sum = sum + check(make(depth)) end
      total = total + sum
   end
   return total + check(long)
end

return M
