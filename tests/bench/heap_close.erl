%% heap_close: how long a process with a large heap takes to end. It builds N
%% entries {I, integer_to_binary(I)} in a list, reports, and waits; the root
%% then tells it to return and times the wait for its 'DOWN' message. BEAM twin
%% of heap_close.lua.
%% Usage: erl -noshell -pa build/bench -run heap_close main [N] [ROUNDS]
-module(heap_close).
-export([main/0, main/1]).

main() -> main([]).

main(Args) ->
    N = bench_args:arg(Args, 1, 1000000),
    Rounds = bench_args:arg(Args, 2, 3),
    Total = lists:sum([round_ms(N) || _ <- lists:seq(1, Rounds)]),
    io:format("RESULT ms_close=~.2f~n", [Total / Rounds]),
    erlang:halt(0).

round_ms(N) ->
    Self = self(),
    {Pid, Ref} = spawn_monitor(fun() -> holder(N, Self) end),
    receive {count, N} -> ok after 120000 -> exit(no_report) end,
    T0 = erlang:monotonic_time(nanosecond),
    Pid ! go,
    receive
        {'DOWN', Ref, process, Pid, normal} -> ok
    after 120000 -> exit(no_down)
    end,
    T1 = erlang:monotonic_time(nanosecond),
    (T1 - T0) / 1.0e6.

holder(N, Parent) ->
    T = [{I, integer_to_binary(I)} || I <- lists:seq(1, N)],
    Parent ! {count, length(T)},
    receive go -> ok end.
