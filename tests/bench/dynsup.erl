%% dynsup: a simple_one_for_one supervisor grown to N children (N = 100000), each a
%% process that reports it is up and waits. Times start_child over the first and the last 1,000
%% children, count_children at N children, and the restart of K children killed at N.
%% BEAM twin of dynsup.lua. Logging is off (the kills would print reports).
%% Usage: erl -noshell -pa build/bench -run dynsup main [N] [K]
-module(dynsup).
-behaviour(supervisor).
-export([main/0, main/1, init/1, start_worker/1]).

main() -> main([]).

main(Args) ->
    N = bench_args:arg(Args, 1, 100000),
    K = min(N, bench_args:arg(Args, 2, 1000)),
    logger:set_primary_config(level, none),
    {ok, Sup} = supervisor:start_link(?MODULE, {K + 1, self()}),
    B = min(1000, N),
    T0 = now_ns(),
    {Pids, First, LastStart} = start_all(Sup, 1, N, B, T0, [], 0, T0),
    T1 = now_ns(),
    collect(N),
    Calls = 1000,
    C0 = now_ns(),
    count_loop(Sup, N, Calls),
    C1 = now_ns(),
    R0 = now_ns(),
    [exit(P, kill) || P <- lists:sublist(Pids, K)],
    collect(K),
    R1 = now_ns(),
    N = proplists:get_value(active, supervisor:count_children(Sup)),
    io:format("RESULT us_start_first_1k=~.3f us_start_last_1k=~.3f us_per_start=~.3f "
              "us_count_children=~.3f us_per_restart=~.3f~n",
              [First / 1000 / B, (T1 - LastStart) / 1000 / B, (T1 - T0) / 1000 / N,
               (C1 - C0) / 1000 / Calls, (R1 - R0) / 1000 / K]),
    erlang:halt(0).

now_ns() -> erlang:monotonic_time(nanosecond).

%% Starts children I..N; notes the time the first B took and when the last B began.
start_all(_Sup, I, N, _B, _T0, Acc, First, Last) when I > N -> {lists:reverse(Acc), First, Last};
start_all(Sup, I, N, B, T0, Acc, First, Last) ->
    Last1 = if I == N - B + 1 -> now_ns(); true -> Last end,
    {ok, Pid} = supervisor:start_child(Sup, []),
    First1 = if I == B -> now_ns() - T0; true -> First end,
    start_all(Sup, I + 1, N, B, T0, [Pid | Acc], First1, Last1).

count_loop(_Sup, _N, 0) -> ok;
count_loop(Sup, N, Left) ->
    N = proplists:get_value(active, supervisor:count_children(Sup)),
    count_loop(Sup, N, Left - 1).

collect(0) -> ok;
collect(Left) -> receive up -> collect(Left - 1) after 60000 -> exit(lost) end.

init({Intensity, Collector}) ->
    {ok, {#{strategy => simple_one_for_one, intensity => Intensity, period => 3600},
          [#{id => w, start => {?MODULE, start_worker, [Collector]},
             shutdown => brutal_kill}]}}.

start_worker(Collector) ->
    {ok, spawn_link(fun() -> Collector ! up, receive stop -> ok end end)}.
