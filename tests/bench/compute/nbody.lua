-- nbody: the five Jovian planets, float arithmetic on table fields.
local M = { size = 5000000 }
local sqrt = math.sqrt
local PI = math.pi
local SOLAR_MASS = 4 * PI * PI
local DAYS = 365.24

local function bodies()
   local function b(x, y, z, vx, vy, vz, mass)
      return { x = x, y = y, z = z, vx = vx * DAYS, vy = vy * DAYS, vz = vz * DAYS,
         mass = mass * SOLAR_MASS }
   end
   return {
      b(0, 0, 0, 0, 0, 0, 1),
      b(4.84143144246472090e+00, -1.16032004402742839e+00, -1.03622044471123109e-01,
        1.66007664274403694e-03, 7.69901118419740425e-03, -6.90460016972063023e-05,
        9.54791938424326609e-04),
      b(8.34336671824457987e+00, 4.12479856412430479e+00, -4.03523417114321381e-01,
        -2.76742510726862411e-03, 4.99852801234917238e-03, 2.30417297573763929e-05,
        2.85885980666130812e-04),
      b(1.28943695621391310e+01, -1.51111514016986312e+01, -2.23307578892655734e-01,
        2.96460137564761618e-03, 2.37847173959480950e-03, -2.96589568540237556e-05,
        4.36624404335156298e-05),
      b(1.53796971148509165e+01, -2.59193146099879641e+01, 1.79258772950371181e-01,
        2.68067772490389322e-03, 1.62824170038242295e-03, -9.51592254519715870e-05,
        5.15138902046611451e-05),
   }
end

local function advance(bs, n, dt)
   for i = 1, n do
      local bi = bs[i]
      local bix, biy, biz, bimass = bi.x, bi.y, bi.z, bi.mass
      local bivx, bivy, bivz = bi.vx, bi.vy, bi.vz
      for j = i + 1, n do
         local bj = bs[j]
         local dx, dy, dz = bix - bj.x, biy - bj.y, biz - bj.z
         local d2 = dx * dx + dy * dy + dz * dz
         local mag = dt / (d2 * sqrt(d2))
         local bm = bj.mass * mag
         bivx, bivy, bivz = bivx - dx * bm, bivy - dy * bm, bivz - dz * bm
         bm = bimass * mag
         bj.vx, bj.vy, bj.vz = bj.vx + dx * bm, bj.vy + dy * bm, bj.vz + dz * bm
      end
      bi.vx, bi.vy, bi.vz = bivx, bivy, bivz
      bi.x, bi.y, bi.z = bix + dt * bivx, biy + dt * bivy, biz + dt * bivz
   end
end

local function energy(bs, n)
   local e = 0
   for i = 1, n do
      local bi = bs[i]
      e = e + 0.5 * bi.mass * (bi.vx * bi.vx + bi.vy * bi.vy + bi.vz * bi.vz)
      for j = i + 1, n do
         local bj = bs[j]
         local dx, dy, dz = bi.x - bj.x, bi.y - bj.y, bi.z - bj.z
         e = e - bi.mass * bj.mass / sqrt(dx * dx + dy * dy + dz * dz)
      end
   end
   return e
end

function M.run(steps)
   local bs = bodies()
   local n = #bs
   local px, py, pz = 0, 0, 0
   for i = 1, n do
      local b = bs[i]
      px, py, pz = px + b.vx * b.mass, py + b.vy * b.mass, pz + b.vz * b.mass
   end
   bs[1].vx, bs[1].vy, bs[1].vz = -px / SOLAR_MASS, -py / SOLAR_MASS, -pz / SOLAR_MASS
   for _ = 1, steps do advance(bs, n, 0.01) end
   return string.format("%.9f", energy(bs, n))
end

return M
