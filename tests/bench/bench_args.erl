%% The command-line arguments of the BEAM twins, read as the Lua programs read theirs.
-module(bench_args).
-export([arg/3]).

%% Argument I of Args as an integer, or Default when there are fewer.
arg(Args, I, _Default) when length(Args) >= I -> to_int(lists:nth(I, Args));
arg(_, _, Default) -> Default.

%% Accepts "1000" and "1e6" like Lua's tonumber.
to_int(S) ->
    case string:to_integer(S) of
        {I, ""} -> I;
        {I, [E | Exp]} when E =:= $e; E =:= $E -> I * round(math:pow(10, list_to_integer(Exp)))
    end.
