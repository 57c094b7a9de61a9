%% idle_mem: N processes parked in receive; resident memory (VmRSS) added per process.
%% BEAM twin of idle_mem.lua.  Usage: erl -noshell -pa build/bench -run idle_mem main [N]
-module(idle_mem).
-export([main/0, main/1]).

main() -> main([]).

main(Args) ->
    N = bench_args:arg(Args, 1, 10000),
    Self = self(),
    Before = rss(),
    Pids = [spawn(fun() -> idler(Self) end) || _ <- lists:seq(1, N)],
    [receive ready -> ok end || _ <- Pids],
    After = rss(),
    [Pid ! stop || Pid <- Pids],
    io:format("RESULT bytes_per_actor=~B~n", [round((After - Before) / N)]),
    erlang:halt(0).

%% Say ready, then park until any message arrives.
idler(Parent) ->
    Parent ! ready,
    receive _ -> ok end.

%% Resident set size of the BEAM OS process in bytes, from /proc/self/status.
rss() ->
    {ok, Status} = file:read_file("/proc/self/status"),
    {match, [Kb]} = re:run(Status, "VmRSS:\\s*(\\d+)", [{capture, all_but_first, list}]),
    list_to_integer(Kb) * 1024.
