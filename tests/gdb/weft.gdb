# weft.gdb - what tests/gdb/run.sh asks gdb (tools/weft-gdb.py is sourced
# on the command line first).  Stops in gdb_ready() with prog's Gs parked.
set pagination off
set confirm off
set print thread-events off
break gdb_ready
run
echo == info weft\n
info weft
echo == bt receiver\n
python gdb.execute("weft bt %d" % int(gdb.parse_and_eval("receiver_id")))
echo == bt sleeper\n
python gdb.execute("weft bt %d" % int(gdb.parse_and_eval("sleeper_id")))
echo == bt spinner\n
python gdb.execute("weft bt %d" % int(gdb.parse_and_eval("spinner_id")))
echo == bt deep\n
python if int(gdb.parse_and_eval("deep_id")): gdb.execute("weft bt %d" % int(gdb.parse_and_eval("deep_id")))
echo == own bt\n
bt 1
