-- spectral-norm: the largest eigenvalue of an infinite matrix, by power iteration.
local M = { size = 3000 }

local function a(i, j)
   local ij = i + j - 1
   return 1.0 / (ij * (ij - 1) * 0.5 + i)
end

local function av(x, y, n)
   for i = 1, n do
      local s = 0
      for j = 1, n do s = s + x[j] * a(i, j) end
      y[i] = s
   end
end

local function atv(x, y, n)
   for i = 1, n do
      local s = 0
      for j = 1, n do s = s + x[j] * a(j, i) end
      y[i] = s
   end
end

local function atav(x, y, t, n)
   av(x, t, n)
   atv(t, y, n)
end

function M.run(n)
   local u, v, t = {}, {}, {}
   for i = 1, n do u[i] = 1 end
   for _ = 1, 10 do
      atav(u, v, t, n)
      atav(v, u, t, n)
   end
   local vbv, vv = 0, 0
   for i = 1, n do
      local ui, vi = u[i], v[i]
      vbv, vv = vbv + ui * vi, vv + vi * vi
   end
   return string.format("%0.9f", math.sqrt(vbv / vv))
end

return M
