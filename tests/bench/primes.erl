%% primes: count primes below N by trial division, split into C chunks done by
%% C processes that each send their count to the root.
%% BEAM twin of primes.lua.  Usage: erl -noshell +S 1 -pa build/bench -run primes main [N] [C]
-module(primes).
-export([main/0, main/1]).

main() -> main([]).

main(Args) ->
    Limit = bench_args:arg(Args, 1, 3000000),
    Chunks = bench_args:arg(Args, 2, 64),
    T0 = erlang:monotonic_time(nanosecond),
    Root = self(),
    [spawn(fun() -> Root ! {count, I, count(Lo, Hi, 0)} end)
     || I <- lists:seq(0, Chunks - 1),
        Lo <- [I * Limit div Chunks], Hi <- [(I + 1) * Limit div Chunks]],
    Total = collect(Chunks, 0),
    T1 = erlang:monotonic_time(nanosecond),
    case Limit of
        3000000 -> Total = 216816;
        _ -> ok
    end,
    io:format("primes=~b~nRESULT ms=~.1f~n", [Total, (T1 - T0) / 1.0e6]),
    erlang:halt(0).

collect(0, Total) -> Total;
collect(Left, Total) -> receive {count, _I, C} -> collect(Left - 1, Total + C) end.

%% Primes in [N, Hi) by odd trial divisors, as in primes.lua.
count(N, Hi, C) when N >= Hi -> C;
count(N, Hi, C) when N =:= 2; N =:= 3 -> count(N + 1, Hi, C + 1);
count(N, Hi, C) when N > 4, N rem 2 =/= 0 -> count(N + 1, Hi, C + is_prime(N, 3));
count(N, Hi, C) -> count(N + 1, Hi, C).

is_prime(N, D) when D * D > N -> 1;
is_prime(N, D) when N rem D =:= 0 -> 0;
is_prime(N, D) -> is_prime(N, D + 2).
