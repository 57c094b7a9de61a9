%% preempt: the root pings a responder process every 1 ms while 4 hog processes
%% spin, and measures each pong's lateness against the ping's scheduled send
%% time (T0 + K ms), so a late wake-up of the root counts as well as a late pong.
%% BEAM twin of preempt.lua.  BEAM has no JIT/FFI distinction to make, so every
%% KIND (interp, jit, alloc, ffi) runs the same busy loop, except that alloc
%% builds a tuple per step, syscall and ffi_syscall read 64 bytes of /dev/zero
%% per step (a raw file read: a system call, which BEAM makes on a dirty I/O
%% scheduler), and cwork encodes a 300-element list per step (term_to_binary:
%% a BIF doing some microseconds of work).
%% Usage: erl -noshell +S 1 -pa build/bench -run preempt main KIND [N]
-module(preempt).
-export([main/0, main/1]).

-define(HOGS, 4).

main() -> main([]).

main(Args) ->
    Kind = case Args of [K | _] -> K; [] -> "jit" end,
    Pings = bench_args:arg(Args, 2, 500),
    Root = self(),
    Echo = spawn(fun() -> responder(Root) end),
    Hogs = [spawn(fun() -> hog(Root, Kind, 1) end) || _ <- lists:seq(1, ?HOGS)],
    receive after 50 -> ok end,
    T0 = (erlang:monotonic_time(microsecond) div 1000 + 1) * 1000, % on a ms boundary
    Lat = lists:sort(ping(Echo, T0, 1, Pings, [])),
    [H ! stop || H <- Hogs],
    Echo ! stop,
    [receive {done, H} -> ok end || H <- Hogs],
    P50 = nth_pct(Lat, Pings, 0.5),
    P99 = nth_pct(Lat, Pings, 0.99),
    Max = lists:last(Lat),
    io:format("RESULT p50_ms=~.3f p99_ms=~.3f max_ms=~.3f~n",
              [P50 / 1000, P99 / 1000, Max / 1000]),
    erlang:halt(0).

%% Ping K is due at T0 + K ms (microseconds here).  BEAM's millisecond timers
%% fire up to 1 ms late, so wait on one set 1 ms early, then yield until the due
%% time; then time the round trip's end against the due time.
ping(_Echo, _T0, K, Pings, Acc) when K > Pings -> Acc;
ping(Echo, T0, K, Pings, Acc) ->
    Due = T0 + K * 1000,
    Wait = Due - erlang:monotonic_time(microsecond),
    if
        Wait > 0 ->
            erlang:send_after(Due div 1000 - 1, self(), tick, [{abs, true}]),
            receive tick -> ok end,
            sleep_until(Due);
        true -> ok
    end,
    Echo ! {ping, K},
    receive {ping, K} -> ok end,
    ping(Echo, T0, K + 1, Pings, [erlang:monotonic_time(microsecond) - Due | Acc]).

%% Yield to the hogs until the due time.
sleep_until(Due) ->
    case erlang:monotonic_time(microsecond) < Due of
        true -> erlang:yield(), sleep_until(Due);
        false -> ok
    end.

responder(Root) ->
    receive
        stop -> ok;
        Msg -> Root ! Msg, responder(Root)
    end.

%% Spin in rounds of busy work; between rounds, end on stop.
hog(Root, Kind, X) ->
    X1 = case Kind of
             "alloc" -> alloc_round(300000, X);
             "syscall" -> syscall_round(250, X);
             "ffi_syscall" -> syscall_round(250, X);
             "cwork" -> cwork_round(500, X);
             _ -> arith_round(2000000, X)
         end,
    receive
        stop -> Root ! {done, self()}
    after 0 -> hog(Root, Kind, X1)
    end.

arith_round(0, X) -> X;
arith_round(N, X) -> arith_round(N - 1, (X * 75 + 74) rem 65537). % stays a small integer

alloc_round(0, X) -> X;
alloc_round(N, X) ->
    T = {N, X},
    alloc_round(N - 1, X + element(1, T) rem 7).

syscall_round(N, X) ->
    {ok, Fd} = file:open("/dev/zero", [read, raw, binary]),
    X1 = read_round(Fd, N, X),
    ok = file:close(Fd),
    X1.

read_round(_Fd, 0, X) -> X;
read_round(Fd, N, X) ->
    {ok, B} = file:read(Fd, 64),
    read_round(Fd, N - 1, (X + byte_size(B)) rem 65537).

cwork_round(N, X) ->
    cwork_round(N, lists:seq(1, 300), X).

cwork_round(0, _L, X) -> X;
cwork_round(N, L, X) ->
    B = term_to_binary([N | L]),
    cwork_round(N - 1, L, (X + byte_size(B)) rem 65537).

nth_pct(Sorted, N, P) -> lists:nth(max(1, ceil(P * N)), Sorted).
