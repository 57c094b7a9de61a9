%% spawn: spawn N processes that each send their ordinal to the root and exit.
%% BEAM twin of spawn.lua.  Usage: erl -noshell -pa build/bench -run spawn main [N]
-module(spawn).
-export([main/0, main/1]).

main() -> main([]).

main(Args) ->
    N = bench_args:arg(Args, 1, 100000),
    Self = self(),
    T0 = erlang:monotonic_time(nanosecond),
    spawn_all(Self, 1, N),
    Sum = collect(N, 0),
    T1 = erlang:monotonic_time(nanosecond),
    Sum = N * (N + 1) div 2,
    io:format("RESULT us_per_spawn=~.3f~n", [(T1 - T0) / 1000 / N]),
    erlang:halt(0).

spawn_all(_Parent, I, N) when I > N -> ok;
spawn_all(Parent, I, N) ->
    spawn(fun() -> Parent ! I end),
    spawn_all(Parent, I + 1, N).

collect(0, Sum) -> Sum;
collect(Left, Sum) -> receive I -> collect(Left - 1, Sum + I) end.
