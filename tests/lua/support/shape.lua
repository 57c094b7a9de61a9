-- A table's pairs as sorted "k=v" words: the shape a constructor made, for comparing.
return function(t)
   local ks = {}
   for k, v in pairs(t) do
      ks[#ks + 1] = tostring(k) .. "=" .. tostring(v)
   end
   table.sort(ks)
   return table.concat(ks, " ")
end
