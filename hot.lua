local M = {
function x() end
return M
