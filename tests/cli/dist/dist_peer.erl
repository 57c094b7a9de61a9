%% The BEAM node of tests/cli/dist_test.sh: checks against a smarm-lua node, and a kv
%% gen_server, a sink and victims for the smarm-lua client.
-module(dist_peer).
-behaviour(gen_server).
-export([against_lua/1, serve/0, wrong_cookie/1]).
-export([init/1, handle_call/3, handle_cast/2, handle_info/2]).

check(Name, true) -> io:format("OK ~s~n", [Name]);
check(Name, Other) -> io:format("FAIL ~s ~w~n", [Name, Other]).

against_lua(Lua) ->
    check("ping", net_adm:ping(Lua) =:= pong),
    {echo, Lua} ! {self(), hello},
    check("send_both_ways", receive {echo, hello} -> true after 5000 -> timeout end),
    check("call", gen_server:call({counter, Lua}, {add, 5}, 5000) =:= 5),
    gen_server:cast({counter, Lua}, {add, 2}),
    check("cast_then_call", gen_server:call({counter, Lua}, get, 5000) =:= 7),
    T = {a, 1, <<"b">>, [1, 2], #{k => 2.5}, 1 bsl 60, -3, 1.5, true},
    R = gen_server:call({counter, Lua}, {echo, T}, 5000),
    check("terms", R =:= T orelse R),
    Ref = make_ref(),
    check("ref_round_trip", gen_server:call({counter, Lua}, {echo, Ref}, 5000) =:= Ref),
    check("pid_round_trip", gen_server:call({counter, Lua}, {echo, self()}, 5000) =:= self()),
    {echo, Lua} ! {self(), victim},
    V = receive {victim, P} -> P after 5000 -> timeout end,
    check("remote_pid", is_pid(V) andalso node(V) =:= Lua),
    M = erlang:monitor(process, V),
    V ! die,
    check("monitor_lua", receive {'DOWN', M, process, V, bye} -> true;
                                 Other -> Other after 5000 -> timeout end),
    {echo, Lua} ! {self(), victim},
    V2 = receive {victim, P2} -> P2 after 5000 -> timeout end,
    process_flag(trap_exit, true),
    link(V2),
    timer:sleep(200),
    V2 ! die,
    check("link_lua", receive {'EXIT', V2, bye} -> true; O2 -> O2 after 5000 -> timeout end),
    check("monitor_noproc", begin
        M2 = erlang:monitor(process, {nobody, Lua}),
        receive {'DOWN', M2, process, _, noproc} -> true after 5000 -> timeout end end),
    [{sink, Lua} ! {seq, I} || I <- lists:seq(1, 100000)],
    {sink, Lua} ! {done, self()},
    check("100k_to_lua", receive {count, 100000, true} -> true; O3 -> O3
                         after 60000 -> timeout end),
    halt().

wrong_cookie(Lua) ->
    check("wrong_cookie_refused", net_adm:ping(Lua) =:= pang),
    halt().

serve() ->
    {ok, _} = gen_server:start({local, kv}, ?MODULE, #{}, []),
    register(esink, spawn(fun() -> sink(0, true) end)),
    register(victims, spawn(fun victims/0)),
    io:format("ready~n"),
    receive after infinity -> ok end.

sink(N, Ok) ->
    receive
        {seq, I} -> sink(N + 1, Ok andalso I =:= N + 1);
        {done, From} -> From ! {count, N, Ok}, sink(0, true)
    end.

victims() ->
    receive {From, new} ->
        P = spawn(fun victim/0),
        From ! {victim, P},
        victims()
    end.

%% A victim ends with bye on die; it also reports how many links and monitors it has, links
%% to a process, sends an exit signal, and registers a name, when asked.
victim() ->
    receive
        die -> exit(bye);
        {From, info} ->
            {links, L} = process_info(self(), links),
            {monitored_by, M} = process_info(self(), monitored_by),
            From ! {info, length(L), length(M)},
            victim();
        {link_to, To} -> link(To), victim();
        {register_as, Name, From} -> register(Name, self()), From ! {registered, Name}, victim();
        {exit_to, To, Reason} -> exit(To, Reason), victim()
    end.

init(S) -> {ok, S}.
handle_call({put, K, V}, _From, S) -> {reply, ok, S#{K => V}};
handle_call({get, K}, _From, S) -> {reply, maps:get(K, S, undefined), S};
handle_call({echo, X}, _From, S) -> {reply, X, S}.
handle_cast({incr, K}, S) -> {noreply, S#{K => maps:get(K, S, 0) + 1}}.
handle_info(halt, S) -> erlang:halt(), {noreply, S};
handle_info(_, S) -> {noreply, S}.
