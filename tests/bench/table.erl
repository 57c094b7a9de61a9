%% table: an ETS set of K counters read and updated from 2 worker processes at once (run at
%% +S 2): first N lookups each, then N update_counter each. BEAM twin of table.lua.
%% Usage: erl -noshell -pa build/bench -run table main [N] [K]
-module(table).
-export([main/0, main/1]).

-define(WORKERS, 2).

main() -> main([]).

main(Args) ->
    N = bench_args:arg(Args, 1, 1000000),
    K = bench_args:arg(Args, 2, 1000),
    T = ets:new(bench, [set, public, {read_concurrency, true}, {write_concurrency, true}]),
    [ets:insert(T, {I, 0}) || I <- lists:seq(1, K)],
    LookupNs = phase(T, lookup, N, K),
    UpdateNs = phase(T, update, N, K),
    Total = ets:foldl(fun({_, V}, Acc) -> Acc + V end, 0, T),
    Total = N * ?WORKERS,
    io:format("lookup: ~p workers x ~p in a table of ~p: ~.1f ns per lookup~n",
              [?WORKERS, N, K, LookupNs]),
    io:format("update_counter: ~p workers x ~p: ~.1f ns per update~n", [?WORKERS, N, UpdateNs]),
    io:format("RESULT lookup_ns=~.1f update_ns=~.1f~n", [LookupNs, UpdateNs]),
    erlang:halt(0).

phase(T, Kind, N, K) ->
    Self = self(),
    Pids = [spawn(fun() -> worker(Self, T, Kind, N, K, W * 7919) end)
            || W <- lists:seq(1, ?WORKERS)],
    T0 = erlang:monotonic_time(nanosecond),
    [P ! go || P <- Pids],
    [receive done -> ok end || _ <- Pids],
    (erlang:monotonic_time(nanosecond) - T0) / (N * ?WORKERS).

worker(Parent, T, Kind, N, K, Seed) ->
    receive go -> ok end,
    run(T, Kind, N, K, Seed rem K + 1, 0),
    Parent ! done.

run(_, _, 0, _, _, Acc) -> Acc;
run(T, lookup, C, K, Key, Acc) ->
    [{_, V}] = ets:lookup(T, Key),
    run(T, lookup, C - 1, K, Key rem K + 1, Acc + V);
run(T, update, C, K, Key, Acc) ->
    ets:update_counter(T, Key, 1),
    run(T, update, C - 1, K, Key rem K + 1, Acc).
