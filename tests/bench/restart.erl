%% restart: a one_for_one supervisor whose only child exits with reason crash as
%% soon as it starts; the supervisor restarts it N times, then its intensity (N
%% within an hour) trips and it stops; then again with N = 1000. BEAM twin of restart.lua. Logging is off,
%% so that the supervisor's child_terminated reports cost nothing to print.
%% Usage: erl -noshell -pa build/bench -run restart main [N]
-module(restart).
-behaviour(supervisor).
-export([main/0, main/1, init/1, start_worker/0]).

main() -> main([]).

main(Args) ->
    N = bench_args:arg(Args, 1, 20000),
    logger:set_primary_config(level, none),
    process_flag(trap_exit, true),
    Us = cycles(N),
    Us1k = cycles(1000),
    io:format("RESULT us_per_restart=~.3f us_per_restart_1k=~.3f~n", [Us, Us1k]),
    erlang:halt(0).

%% us per cycle over Restarts restarts, the intensity allowing exactly that many.
cycles(Restarts) ->
    T0 = erlang:monotonic_time(nanosecond),
    {ok, Sup} = supervisor:start_link(?MODULE, Restarts),
    receive {'EXIT', Sup, shutdown} -> ok end,
    T1 = erlang:monotonic_time(nanosecond),
    (T1 - T0) / 1000 / Restarts.

init(N) ->
    {ok, {#{strategy => one_for_one, intensity => N, period => 3600},
          [#{id => crasher, start => {?MODULE, start_worker, []}}]}}.

start_worker() -> {ok, spawn_link(fun() -> exit(crash) end)}.
