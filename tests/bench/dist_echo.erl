%% dist_echo: the peer node of the distribution benchmarks; a process registered as echo
%% sends every {From, Msg} back to From as Msg.
%% Usage: erl -noshell -sname echo@localhost -setcookie C -pa build/bench -run dist_echo main
-module(dist_echo).
-export([main/0]).

main() ->
    register(echo, self()),
    io:format("ready~n"),
    loop().

loop() ->
    receive
        {From, Msg} -> From ! Msg, loop()
    end.
