%% The BEAM side of dist_pg_test.sh: OTP's pg scope against a smarm-lua node's.
%% Prints "OK <case>" or "FAIL <case> ..." lines.
-module(dist_pg_peer).
-export([run/1]).

run(Lua) ->
    try
        steps(list_to_atom(Lua))
    catch
        C:E:S -> io:format("FAIL crash ~p:~p ~p~n", [C, E, S])
    end,
    halt().

report(Case, true) -> io:format("OK ~s~n", [Case]);
report(Case, Why) -> io:format("FAIL ~s ~p~n", [Case, Why]).

%% polls Fun for up to N tenths of a second
poll(_Fun, 0) -> false;
poll(Fun, N) ->
    case Fun() of
        true -> true;
        _ -> timer:sleep(100), poll(Fun, N - 1)
    end.

on(Node) -> [P || P <- pg:get_members(workers), node(P) =:= Node].

ask(Lua, Req) ->
    {ctl, Lua} ! {Req, self()},
    receive
        R when is_tuple(R), element(1, R) =/= hello_from_lua -> R;
        R when is_atom(R) -> R
    after 15000 -> timeout
    end.

steps(Lua) ->
    {ok, _} = pg:start_link(),
    report(connect, net_kernel:connect_node(Lua)),
    report(erl_sees_lua_member, poll(fun() -> length(on(Lua)) =:= 1 end, 100)),
    %% the same sync brought every group of the smarm-lua node that is seen across nodes
    report(dollar_group_stays_local, pg:get_members('$private') =:= []),
    Self = self(),
    E = spawn(fun() ->
                      receive M -> Self ! {member_got, M} end,
                      receive stop -> ok end
              end),
    ok = pg:join(workers, E),
    case ask(Lua, check_remote) of
        {remote_seen, 1, E, 2} -> report(lua_sees_erl_member, true);
        Other -> report(lua_sees_erl_member, Other)
    end,
    receive
        {member_got, {hello_from_lua, _}} -> report(lua_sends_to_erl_member, true)
    after 5000 -> report(lua_sends_to_erl_member, timeout)
    end,
    %% pick and dispatch there choose among both members, E's messages arrive here
    case ask(Lua, spread) of
        {spread, Picked, Sent} when Picked > 0, Picked < 64, Sent > 0, Sent < 64 ->
            report(lua_picks_across_nodes, true),
            report(lua_dispatches_across_nodes, poll(fun() ->
                {message_queue_len, Sent} =:= process_info(E, message_queue_len) end, 50));
        Other0 -> report(lua_picks_across_nodes, Other0)
    end,
    ok = pg:leave(workers, E),
    report(lua_sees_erl_leave, ask(Lua, check_gone) =:= {gone, 0}),
    report(lua_leave_answered, ask(Lua, leave_local) =:= {left, true}),
    report(erl_sees_lua_leave, poll(fun() -> on(Lua) =:= [] end, 100)),
    joined = ask(Lua, join_and_die),
    report(erl_sees_lua_join, poll(fun() -> length(on(Lua)) =:= 1 end, 100)),
    ok = ask(Lua, die),
    report(erl_sees_lua_death, poll(fun() -> on(Lua) =:= [] end, 100)),
    ok = pg:join(workers, E),
    case ask(Lua, check_remote) of
        {remote_seen, 1, E, 1} -> report(lua_sees_erl_rejoin, true);
        Other2 -> report(lua_sees_erl_rejoin, Other2)
    end,
    ok = ask(Lua, await_halt).
