%% dist_pingpong: round trips between this node and an echo node (dist_echo) on the same
%% machine. BEAM twin of dist_pingpong.lua.
%% Usage: erl -noshell -sname a@localhost -setcookie C -pa build/bench -run dist_pingpong main ECHO_NODE [R]
-module(dist_pingpong).
-export([main/1]).

main([Node | Args]) ->
    Rounds = bench_args:arg(Args, 1, 20000),
    N = list_to_atom(Node),
    pong = net_adm:ping(N),
    rounds({echo, N}, 1, 1000),
    T0 = erlang:monotonic_time(nanosecond),
    rounds({echo, N}, 1, Rounds),
    T1 = erlang:monotonic_time(nanosecond),
    io:format("RESULT ns_per_round_trip=~.1f~n", [(T1 - T0) / Rounds]),
    erlang:halt(0).

rounds(_Dest, I, Rounds) when I > Rounds -> ok;
rounds(Dest, I, Rounds) ->
    Dest ! {self(), I},
    receive I -> ok end,
    rounds(Dest, I + 1, Rounds).
