%% link_cycle: the bare spawn_link + trap_exit crash cycle. The root traps
%% exits, then N times spawns a linked process that ends abnormally and waits
%% for its 'EXIT' message. BEAM twin of link_cycle.lua. The first metric's
%% process raises error(crash): BEAM logs an error report for it ("Error in
%% process ... with exit value"), as smarm-lua prints a crash report for a Lua
%% error. The second's ends with exit(crash), which logs nothing on either side.
%% Usage: erl -noshell -pa build/bench -run link_cycle main [N]
-module(link_cycle).
-export([main/0, main/1]).

main() -> main([]).

main(Args) ->
    N = bench_args:arg(Args, 1, 20000),
    process_flag(trap_exit, true),
    Us = cycles(N, fun() -> error(crash) end),
    UsExit = cycles(N, fun() -> exit(crash) end),
    io:format("RESULT us_per_cycle=~.3f us_per_exit_cycle=~.3f~n", [Us, UsExit]),
    erlang:halt(0).

cycles(N, Body) ->
    T0 = erlang:monotonic_time(nanosecond),
    loop(N, Body),
    T1 = erlang:monotonic_time(nanosecond),
    (T1 - T0) / 1000 / N.

loop(0, _) -> ok;
loop(Left, Body) ->
    Pid = spawn_link(Body),
    receive
        {'EXIT', Pid, crash} -> loop(Left - 1, Body);
        {'EXIT', Pid, {crash, _Stack}} -> loop(Left - 1, Body)
    end.
