-- md5: RFC 1321 over a 1,000-byte message, SIZE times, with the bit library.
local bit = require "bit"
local band, bor, bxor, bnot = bit.band, bit.bor, bit.bxor, bit.bnot
local rol, tobit, tohex = bit.rol, bit.tobit, bit.tohex
local byte, char, rep = string.byte, string.char, string.rep
local floor, abs, sin = math.floor, math.abs, math.sin

local M = { size = 20000 }

local K = {}
for i = 1, 64 do K[i] = tobit(floor(abs(sin(i)) * 2 ^ 32)) end
local S = {
   7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22,
   5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20,
   4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23,
   6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21,
}

-- little-endian length in bits, 8 bytes
local function le64(n)
   local t = {}
   for i = 1, 8 do
      t[i] = char(n % 256)
      n = floor(n / 256)
   end
   return table.concat(t)
end

local function md5(msg)
   local len = #msg
   local padded = msg .. "\128" .. rep("\0", (55 - len) % 64) .. le64(len * 8)
   local a0, b0, c0, d0 = 0x67452301, tobit(0xefcdab89), tobit(0x98badcfe), 0x10325476
   local x = {}
   for blk = 1, #padded, 64 do
      for i = 0, 15 do
         local p = blk + i * 4
         local b1, b2, b3, b4 = byte(padded, p, p + 3)
         x[i] = bor(b1, b2 * 256, b3 * 65536, b4 * 16777216)
      end
      local a, b, c, d = a0, b0, c0, d0
      for i = 0, 63 do
         local f, g
         if i < 16 then
            f, g = bor(band(b, c), band(bnot(b), d)), i
         elseif i < 32 then
            f, g = bor(band(d, b), band(bnot(d), c)), (5 * i + 1) % 16
         elseif i < 48 then
            f, g = bxor(b, c, d), (3 * i + 5) % 16
         else
            f, g = bxor(c, bor(b, bnot(d))), (7 * i) % 16
         end
         local rot = rol(tobit(a + f + K[i + 1] + x[g]), S[i + 1])
         a, d, c, b = d, c, b, tobit(b + rot)
      end
      a0, b0 = tobit(a0 + a), tobit(b0 + b)
      c0, d0 = tobit(c0 + c), tobit(d0 + d)
   end
   local function le(v) return tohex(bit.bswap(v)) end
   return le(a0) .. le(b0) .. le(c0) .. le(d0)
end

function M.run(n)
   assert(md5("") == "d41d8cd98f00b204e9800998ecf8427e", "md5 of the empty string")
   assert(md5("abc") == "900150983cd24fb0d6963f7d28e17f72", "md5 of abc")
   local msg = rep("smarm-lua", 112) .. "!!!!!!!!"
   local h
   for _ = 1, n do h = md5(msg) end
   return h
end

return M
