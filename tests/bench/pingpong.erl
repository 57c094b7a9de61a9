%% pingpong: the root and one process bounce a small map R times.
%% BEAM twin of pingpong.lua.  Usage: erl -noshell -pa build/bench -run pingpong main [R]
-module(pingpong).
-export([main/0, main/1]).

main() -> main([]).

main(Args) ->
    Rounds = bench_args:arg(Args, 1, 1000000),
    Self = self(),
    Pid = spawn(fun() -> ponger(Self) end),
    T0 = erlang:monotonic_time(nanosecond),
    rounds(Pid, 1, Rounds),
    T1 = erlang:monotonic_time(nanosecond),
    Pid ! #{n => -1},
    receive #{n := -1} -> ok end,
    io:format("RESULT ns_per_round_trip=~.1f~n", [(T1 - T0) / Rounds]),
    erlang:halt(0).

%% Echo every message back to the parent; a negative n ends the process.
ponger(Parent) ->
    receive
        #{n := N} = M ->
            Parent ! M,
            if N < 0 -> ok; true -> ponger(Parent) end
    end.

rounds(_Pid, I, Rounds) when I > Rounds -> ok;
rounds(Pid, I, Rounds) ->
    Pid ! #{n => I},
    receive #{n := I} -> rounds(Pid, I + 1, Rounds) end.
