%% timers: N processes each sleeping 10 ms (total ms and mean lateness), then N
%% erlang:send_after of 1 ms to one process. BEAM twin of timers.lua.
%% Usage: erl -noshell -pa build/bench -run timers main [N]
-module(timers).
-export([main/0, main/1]).

main() -> main([]).

main(Args) ->
    N = bench_args:arg(Args, 1, 100000),
    Self = self(),
    T0 = erlang:monotonic_time(nanosecond),
    spawn_sleepers(Self, N),
    Late = collect(N, 0),
    SleepMs = (erlang:monotonic_time(nanosecond) - T0) / 1.0e6,
    Sink = spawn(fun() -> sink(Self, N) end),
    T1 = erlang:monotonic_time(nanosecond),
    send_afters(Sink, 1, N),
    receive all -> ok end,
    SendMs = (erlang:monotonic_time(nanosecond) - T1) / 1.0e6,
    io:format("sleep: ~p processes x 10 ms in ~.1f ms, mean lateness ~.3f ms~n",
              [N, SleepMs, Late / N / 1.0e6]),
    io:format("send_after: ~p timers to one process in ~.1f ms~n", [N, SendMs]),
    io:format("RESULT total_ms=~.1f~n", [SleepMs + SendMs]),
    erlang:halt(0).

%% Counted loops, as the Lua side's: a list comprehension would also build the
%% list of N integers and the list of N results, work the Lua side does not do.
spawn_sleepers(_Self, 0) -> ok;
spawn_sleepers(Self, K) ->
    spawn(fun() -> sleeper(Self) end),
    spawn_sleepers(Self, K - 1).

send_afters(_Sink, I, N) when I > N -> ok;
send_afters(Sink, I, N) ->
    erlang:send_after(1, Sink, I),
    send_afters(Sink, I + 1, N).

sleeper(Parent) ->
    T0 = erlang:monotonic_time(nanosecond),
    receive after 10 -> ok end,
    Parent ! {late, erlang:monotonic_time(nanosecond) - T0 - 10000000}.

collect(0, Acc) -> Acc;
collect(K, Acc) -> receive {late, L} -> collect(K - 1, Acc + L) end.

sink(Parent, 0) -> Parent ! all;
sink(Parent, K) -> receive _ -> sink(Parent, K - 1) end.
