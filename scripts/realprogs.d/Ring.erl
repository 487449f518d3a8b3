%% Ring.erl - Erlang/OTP's BEAM (a scheduler thread per CPU, dirty
%% schedulers, async threads, its own futex-based locks): a ring of 2,000
%% processes passing a token 20,000 times, 8 writers into one ETS table,
%% 50 clients echoing 200 messages each through gen_tcp on loopback.
%% Prints the ETS sum and the echo count (the same on every good run).
-module('Ring').
-export([main/0]).
ring(N, M) ->
    Self = self(),
    First = lists:foldl(fun(_, Next) -> spawn(fun() -> loop(Next) end) end, Self, lists:seq(1, N)),
    First ! {tok, M},
    wait_ring(First).
loop(Next) -> receive {tok, 0} -> Next ! {tok, 0}; {tok, K} -> Next ! {tok, K - 1}, loop(Next) end.
wait_ring(First) -> receive {tok, 0} -> ok; {tok, K} -> First ! {tok, K - 1}, wait_ring(First) end.
echo() ->
    {ok, L} = gen_tcp:listen(0, [binary, {active, false}, {reuseaddr, true}, {ip, {127,0,0,1}}, {nodelay, true}]),
    {ok, Port} = inet:port(L),
    spawn(fun() -> acc(L) end),
    Ps = [spawn_monitor(fun() -> cli(Port, I) end) || I <- lists:seq(1, 50)],
    lists:sum([receive {'DOWN', R, process, P, {done, C}} -> C end || {P, R} <- Ps]).
acc(L) -> {ok, S} = gen_tcp:accept(L), spawn(fun() -> srv(S) end), acc(L).
srv(S) -> case gen_tcp:recv(S, 0) of {ok, B} -> gen_tcp:send(S, B), srv(S); _ -> ok end.
cli(Port, I) ->
    {ok, S} = gen_tcp:connect({127,0,0,1}, Port, [binary, {active, false}, {nodelay, true}]),
    Msg = list_to_binary(io_lib:format("hello ~p ~s", [I, lists:duplicate(I * 100, $x)])),
    [begin ok = gen_tcp:send(S, Msg), {ok, Msg} = recv_n(S, byte_size(Msg), <<>>) end || _ <- lists:seq(1, 200)],
    gen_tcp:close(S),
    exit({done, 200}).
recv_n(_, 0, Acc) -> {ok, Acc};
recv_n(S, N, Acc) -> {ok, B} = gen_tcp:recv(S, 0), recv_n(S, N - byte_size(B), <<Acc/binary, B/binary>>).
main() ->
    ok = ring(2000, 20000),
    T = ets:new(t, [set, public]),
    Ws = [spawn_monitor(fun() -> [ets:insert(T, {{W, K}, K * K}) || K <- lists:seq(1, 5000)] end) || W <- lists:seq(1, 8)],
    [receive {'DOWN', R, process, P, normal} -> ok end || {P, R} <- Ws],
    io:format("ets sum ~p~n", [ets:foldl(fun({_, V}, A) -> A + V end, 0, T)]),
    io:format("echoed ~p~n", [echo()]),
    halt(0).
