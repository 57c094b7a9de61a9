--- A module that requires itself while it loads (require_spec: the loop is an error).
return require("support.require_loop")
