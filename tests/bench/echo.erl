%% echo: TCP echo over 127.0.0.1 with gen_tcp. BEAM twin of echo.lua: a process per
%% accepted connection sends back what it reads; C client processes each make R round
%% trips of a 64-byte message.
%% Usage: erl -noshell -pa build/bench -run echo main [C] [R]
-module(echo).
-export([main/0, main/1]).

main() -> main([]).

main(Args) ->
    Clients = bench_args:arg(Args, 1, 16),
    Rounds = bench_args:arg(Args, 2, 20000),
    Opts = [binary, {packet, raw}, {active, false}, {nodelay, true}],
    {ok, Listen} = gen_tcp:listen(0, [{ip, {127, 0, 0, 1}}, {reuseaddr, true},
                                      {backlog, 1024} | Opts]),
    {ok, Port} = inet:port(Listen),
    spawn(fun() -> acceptor(Listen, Clients) end),
    Self = self(),
    Pids = [spawn(fun() -> client(Self, Port, Rounds, Opts) end)
            || _ <- lists:seq(1, Clients)],
    [receive ready -> ok after 30000 -> exit(timeout) end || _ <- Pids],
    T0 = erlang:monotonic_time(nanosecond),
    [P ! go || P <- Pids],
    [receive done -> ok after 300000 -> exit(timeout) end || _ <- Pids],
    T1 = erlang:monotonic_time(nanosecond),
    io:format("RESULT ns_per_round_trip=~.1f~n", [(T1 - T0) / (Clients * Rounds)]),
    erlang:halt(0).

acceptor(_Listen, 0) -> ok;
acceptor(Listen, N) ->
    {ok, Sock} = gen_tcp:accept(Listen, 30000),
    Pid = spawn(fun() -> receive go -> echoer(Sock) end end),
    ok = gen_tcp:controlling_process(Sock, Pid),
    Pid ! go,
    acceptor(Listen, N - 1).

echoer(Sock) ->
    case gen_tcp:recv(Sock, 0) of
        {ok, Data} ->
            case gen_tcp:send(Sock, Data) of
                ok -> echoer(Sock);
                _ -> gen_tcp:close(Sock)
            end;
        _ -> gen_tcp:close(Sock)
    end.

client(Parent, Port, Rounds, Opts) ->
    {ok, Sock} = gen_tcp:connect({127, 0, 0, 1}, Port, Opts, 10000),
    Msg = binary:copy(<<"x">>, 64),
    Parent ! ready,
    receive go -> ok end,
    rounds(Sock, Msg, Rounds),
    gen_tcp:close(Sock),
    Parent ! done.

rounds(_Sock, _Msg, 0) -> ok;
rounds(Sock, Msg, N) ->
    ok = gen_tcp:send(Sock, Msg),
    {ok, Msg} = gen_tcp:recv(Sock, 64),
    rounds(Sock, Msg, N - 1).
