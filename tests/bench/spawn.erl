%% spawn: spawn N processes that each send their ordinal to the root and exit;
%% the root collects the replies of each batch of B spawns before the next batch.
%% BEAM twin of spawn.lua.  Usage: erl -noshell -pa build/bench -run spawn main [N] [B]
-module(spawn).
-export([main/0, main/1]).

main() -> main([]).

main(Args) ->
    N = bench_args:arg(Args, 1, 100000),
    B = bench_args:arg(Args, 2, 1000),
    Self = self(),
    T0 = erlang:monotonic_time(nanosecond),
    Sum = batches(Self, 1, N, B, 0),
    T1 = erlang:monotonic_time(nanosecond),
    Sum = N * (N + 1) div 2,
    io:format("RESULT us_per_spawn=~.3f~n", [(T1 - T0) / 1000 / N]),
    erlang:halt(0).

%% Spawn I..min(I+B-1, N), collect their replies, go on with the next batch.
batches(_Parent, I, N, _B, Sum) when I > N -> Sum;
batches(Parent, I, N, B, Sum) ->
    Last = min(I + B - 1, N),
    spawn_all(Parent, I, Last),
    batches(Parent, Last + 1, N, B, collect(Last - I + 1, Sum)).

spawn_all(_Parent, I, Last) when I > Last -> ok;
spawn_all(Parent, I, Last) ->
    spawn(fun() -> Parent ! I end),
    spawn_all(Parent, I + 1, Last).

collect(0, Sum) -> Sum;
collect(Left, Sum) -> receive I -> collect(Left - 1, Sum + I) end.
