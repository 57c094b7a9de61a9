--- A module that returns nothing (require_spec: require gives true), counting its loads.
rawset(_G, "require_nothing_loads", (rawget(_G, "require_nothing_loads") or 0) + 1)
