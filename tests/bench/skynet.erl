%% skynet: the root spawns 10 children, each of them 10 more, down to N leaves
%% that send their number to their parent; each parent sums its children's
%% replies and sends the sum up.
%% BEAM twin of skynet.lua.  Usage: erl -noshell -pa build/bench -run skynet main [N]
-module(skynet).
-export([main/0, main/1]).

main() -> main([]).

main(Args) ->
    N = bench_args:arg(Args, 1, 1000000),
    Actors = actors(1, 1, N),
    T0 = erlang:monotonic_time(nanosecond),
    Self = self(),
    spawn(fun() -> node(Self, 0, N) end),
    Sum = receive S -> S end,
    T1 = erlang:monotonic_time(nanosecond),
    Sum = N * (N - 1) div 2,
    io:format("RESULT ms=~.1f us_per_actor=~.3f peak_rss_mb=~.1f~n",
              [(T1 - T0) / 1.0e6, (T1 - T0) / 1000 / Actors, peak_rss() / 1048576]),
    erlang:halt(0).

%% 1 + 10 + ... + N, checking that N is a power of 10.
actors(Size, Count, N) when Size =:= N -> Count;
actors(Size, Count, N) when Size < N -> actors(Size * 10, Count + Size * 10, N).

%% Process Num of a subtree with Size leaves.
node(Parent, Num, 1) -> Parent ! Num;
node(Parent, Num, Size) ->
    Self = self(),
    Sub = Size div 10,
    [spawn(fun() -> node(Self, Num + I * Sub, Sub) end) || I <- lists:seq(0, 9)],
    Parent ! collect(10, 0).

collect(0, Sum) -> Sum;
collect(Left, Sum) -> receive S -> collect(Left - 1, Sum + S) end.

%% Peak resident set size of the BEAM OS process in bytes, from /proc/self/status.
peak_rss() ->
    {ok, Status} = file:read_file("/proc/self/status"),
    {match, [Kb]} = re:run(Status, "VmHWM:\\s*(\\d+)", [{capture, all_but_first, list}]),
    list_to_integer(Kb) * 1024.
