%% call: gen_server:call round trips from the root to one server N times.
%% BEAM twin of call.lua.  Usage: erl -noshell -pa build/bench -run call main [N]
-module(call).
-behaviour(gen_server).
-export([main/0, main/1]).
-export([init/1, handle_call/3, handle_cast/2]).

main() -> main([]).

main(Args) ->
    N = bench_args:arg(Args, 1, 100000),
    {ok, Pid} = gen_server:start(?MODULE, 0, []),
    T0 = erlang:monotonic_time(nanosecond),
    calls(Pid, 1, N),
    T1 = erlang:monotonic_time(nanosecond),
    ok = gen_server:stop(Pid),
    io:format("RESULT ns_per_call=~.1f~n", [(T1 - T0) / N]),
    erlang:halt(0).

calls(_Pid, I, N) when I > N -> ok;
calls(Pid, I, N) ->
    R = gen_server:call(Pid, I),
    R = I + 1,
    calls(Pid, I + 1, N).

%% The server: replies request + 1.
init(N) -> {ok, N}.
handle_call(Req, _From, State) -> {reply, Req + 1, State}.
handle_cast(_Msg, State) -> {noreply, State}.
