%% responsive: BEAM twin of responsive.lua. Spawn N processes that loop forever, then one
%% that replies at once; time both. Usage: erl -noshell -pa build/bench -run responsive main [N]
-module(responsive).
-export([main/0, main/1]).

main() -> main([]).

main(Args) ->
    N = bench_args:arg(Args, 1, 10000),
    Self = self(),
    T0 = erlang:monotonic_time(nanosecond),
    spawn_hogs(N),
    T1 = erlang:monotonic_time(nanosecond),
    spawn(fun() -> Self ! here end),
    receive here -> ok after 600000 -> erlang:halt(1) end,
    T2 = erlang:monotonic_time(nanosecond),
    io:format("RESULT spawn_ms=~.1f first_reply_ms=~.1f~n", [(T1 - T0) / 1.0e6, (T2 - T1) / 1.0e6]),
    erlang:halt(0).

spawn_hogs(0) -> ok;
spawn_hogs(I) -> spawn(fun() -> loop(0) end), spawn_hogs(I - 1).

loop(X) -> loop(X + 1).
