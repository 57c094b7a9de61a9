#!/usr/bin/env bash
# How an ended root is reported on stderr: by its value, never by its type alone.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/cli/lib.sh

run -e 'require("smarm").exit(42)'
expect_status 1 "exit(42)"
expect_err "exited: 42" "a number reason is printed"

run -e 'require("smarm").exit({ code = 7, why = "disk", nested = { 1 } })'
expect_status 1 "exit(table)"
expect_err "exited: {" "a table reason is printed shallowly"
expect_err 'code = 7' "a table reason shows its fields"
expect_err 'why = "disk"' "a table reason quotes its strings"
expect_err 'nested = {...}' "a nested table is elided"

run -e 'error({ code = 1 })'
expect_status 1 "error(table)"
expect_err "crashed: {code = 1}" "a table error is printed by value"

run -e 'require("smarm").exit(print)'
expect_status 1 "exit(print)"
expect_err "smarm.exit: cannot send a function (at reason)" "an unsendable reason raises"
finish
