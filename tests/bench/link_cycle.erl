%% link_cycle: the bare spawn_link + trap_exit crash cycle. The root traps
%% exits, then N times spawns a linked process that exits with reason crash
%% and waits for its 'EXIT' message. BEAM twin of link_cycle.lua; both of its
%% metrics time the same exit(crash) cycle (exit/1 prints no crash report).
%% Usage: erl -noshell -pa build/bench -run link_cycle main [N]
-module(link_cycle).
-export([main/0, main/1]).

main() -> main([]).

main(Args) ->
    N = bench_args:arg(Args, 1, 20000),
    process_flag(trap_exit, true),
    Us = cycles(N),
    UsExit = cycles(N),
    io:format("RESULT us_per_cycle=~.3f us_per_exit_cycle=~.3f~n", [Us, UsExit]),
    erlang:halt(0).

cycles(N) ->
    T0 = erlang:monotonic_time(nanosecond),
    loop(N),
    T1 = erlang:monotonic_time(nanosecond),
    (T1 - T0) / 1000 / N.

loop(0) -> ok;
loop(Left) ->
    Pid = spawn_link(fun() -> exit(crash) end),
    receive {'EXIT', Pid, crash} -> loop(Left - 1) end.
