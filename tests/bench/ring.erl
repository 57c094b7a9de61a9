%% ring: N processes in a ring (the root is one of them) pass a small map M laps.
%% BEAM twin of ring.lua.  Usage: erl -noshell +S 1 -pa build/bench -run ring main [N] [M]
-module(ring).
-export([main/0, main/1]).

main() -> main([]).

main(Args) ->
    N = bench_args:arg(Args, 1, 1000),
    Laps = bench_args:arg(Args, 2, 1000),
    First = build(N - 1, self()),
    %% one lap before the clock starts, as in ring.lua (whose members boot at their first run)
    First ! #{hop => 0},
    receive #{hop := _} -> ok end,
    T0 = erlang:monotonic_time(nanosecond),
    H = laps(First, Laps, 0),
    T1 = erlang:monotonic_time(nanosecond),
    H = N * Laps,
    First ! #{hop => -1},
    receive #{hop := -1} -> ok end,
    io:format("RESULT ns_per_hop=~.1f~n", [(T1 - T0) / (N * Laps)]),
    erlang:halt(0).

%% Build the ring backwards: the last member points at the root.
build(0, Next) -> Next;
build(K, Next) -> build(K - 1, spawn(fun() -> member(Next) end)).

%% Forward #{hop => K} as #{hop => K + 1}; a negative hop is the stop token.
member(Next) ->
    receive
        #{hop := K} = M when K < 0 -> Next ! M;
        #{hop := K} -> Next ! #{hop => K + 1}, member(Next)
    end.

laps(_First, 0, H) -> H;
laps(First, Left, H) ->
    First ! #{hop => H},
    receive #{hop := K} -> laps(First, Left - 1, K + 1) end.
