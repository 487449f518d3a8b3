# bench/pin.sh - sourced by bench/{apache,memcached,redis}.sh: the server
# on CPU SCPU and the client on CPU CCPU (PIN=0: neither), as the arrays
# spin and cpin to put before each command.
PIN=${PIN:-1}
SCPU=${SCPU:-0}
CCPU=${CCPU:-1}
spin=() cpin=()
if [ "$PIN" = 1 ] && command -v taskset >/dev/null; then
	spin=(taskset -c "$SCPU")
	cpin=(taskset -c "$CCPU")
fi
