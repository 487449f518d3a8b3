# weft-gdb.py - gdb commands for weft's green threads (Gs).
#
#   (gdb) source tools/weft-gdb.py
#   (gdb) info weft            every G: id, state, wait reason, name, where
#   (gdb) weft bt ID           backtrace of G ID (parked or running)
#   (gdb) weft bt ID full      ... with locals (any bt options pass through)
#
# Nothing runs in the inferior: the Gs are read from the runtime's table
# of G descriptors (the list from allghead through g.alllink, static in
# runtime/proc.c; libweft is built with -g), so the commands work on a
# stopped process and on a core file.  A parked G is unwound from the frame its switch left on its
# stack (arch/x86_64/ctx_frame.h: at g->sp the MXCSR and x87 control
# words, then where it resumes and rbp; the stack pointer after the switch
# is g->sp + 24; rbx and r12-r15 are where the CFI of the function that
# switched says its prologue saved them, the switch being inline assembly
# that clobbers them).  In a live process
# "weft bt" points the selected thread's registers at that frame, runs
# gdb's own backtrace (CFI, so split-stack segments and inlined frames
# unwind as usual) and puts them back; where registers cannot be written
# (a core file) it walks the frame-pointer chain instead.  A running G
# is shown by its OS thread's backtrace.  See docs/stacks.md.

import gdb

CTX_FRAME = [("rip", 8), ("rbp", 16)]
CTX_FRAME_BYTES = 24

GSTATUS = {0: "idle", 1: "runnable", 2: "running", 3: "waiting",
           4: "syscall", 5: "dead"}


def _static(name):
    """A variable of the runtime, static or not."""
    try:
        sym = gdb.lookup_static_symbol(name)
        if sym is not None:
            return sym.value()
    except (AttributeError, gdb.error):
        pass
    for expr in ("'proc.c'::%s" % name, name):
        try:
            return gdb.parse_and_eval(expr)
        except gdb.error:
            continue
    raise gdb.GdbError("weft: no symbol %s (is libweft loaded and built with -g?)" % name)


def _enum_names(typename, fallback):
    try:
        t = gdb.lookup_type(typename)
        names = {}
        for f in t.fields():
            n = f.name.lower()
            for prefix in ("g_", "w_"):
                if n.startswith(prefix):
                    n = n[len(prefix):]
            names[int(f.enumval)] = n
        return names
    except gdb.error:
        return fallback


def _waitreason(n):
    try:
        wr = gdb.parse_and_eval("waitreasons")
        if 0 <= n < wr.type.range()[1] + 1:
            s = wr[n]
            if int(s) != 0:
                return s.string()
    except gdb.error:
        pass
    return "reason %d" % n


def all_gs():
    """Every G descriptor the runtime ever made (gdb.Value pointers)."""
    out = []
    gp = _static("allghead")
    while int(gp) != 0:
        out.append(gp)
        gp = gp["alllink"]
    return out


def running_on():
    """G address -> (M id, kernel tid) for the Gs running now."""
    out = {}
    try:
        m = _static("allm")
    except gdb.GdbError:
        return out
    seen = 0
    while int(m) != 0 and seen < 100000:
        g = m["curg"]
        if int(g) != 0:
            out[int(g)] = (int(m["id"]), int(m["tid"]))
        m = m["alllink"]
        seen += 1
    return out


def find_g(gid):
    for g in all_gs():
        if int(g["id"]) == gid and int(g["status"]) != 5:
            return g
    for g in all_gs():
        if int(g["id"]) == gid:
            return g
    return None


def _frame_regs(g):
    """The registers a parked G resumes with."""
    sp = int(g["sp"])
    ptr = gdb.lookup_type("unsigned long").pointer()
    regs = {}
    for name, off in CTX_FRAME:
        regs[name] = int(gdb.Value(sp + off).cast(ptr).dereference())
    regs["rsp"] = sp + CTX_FRAME_BYTES
    return regs


def _in_runtime(pc):
    name = gdb.solib_name(pc) or ""
    return "libweft" in name.rsplit("/", 1)[-1]


def _where(g, status):
    """What a parked G waits in: the innermost function outside libweft
    (its caller into the runtime), else the innermost one."""
    if status not in (1, 3) or int(g["sp"]) == 0:
        return ""
    try:
        regs = _frame_regs(g)
        pcs = _fp_walk(regs["rip"], regs["rbp"], 16)
    except gdb.error:
        return ""
    names = []
    for i, pc in enumerate(pcs):
        look = pc if i == 0 else pc - 1
        name = _funcname(look)
        if not _in_runtime(look):
            return name
        if name in ("gentry", "weft_ctx_start"):
            break
        names.append(name)
    # all in the runtime (the G's function tail-called into it): the
    # outermost runtime call, the one the G made
    return names[-1] if names else ""


def _funcname(pc):
    """The function containing pc (the outermost one, not an inlined
    callee), or what the symbol table says."""
    try:
        b = gdb.block_for_pc(pc)
        name = None
        while b is not None and not b.is_global and not b.is_static:
            if b.function is not None:
                name = b.function.print_name
            b = b.superblock
        if name:
            return name
    except (RuntimeError, gdb.error):
        pass
    try:
        s = gdb.execute("info symbol 0x%x" % pc, to_string=True).split()
        if s and s[0] != "No":
            return s[0]
    except gdb.error:
        pass
    return "??"


def _fp_walk(rip, rbp, limit=64):
    """Return addresses along the frame-pointer chain (libweft and code
    built with -fno-omit-frame-pointer keep it)."""
    ptr = gdb.lookup_type("unsigned long").pointer()
    pcs = [rip]
    while rbp and len(pcs) < limit:
        try:
            nbp = int(gdb.Value(rbp).cast(ptr).dereference())
            ret = int(gdb.Value(rbp + 8).cast(ptr).dereference())
        except gdb.error:
            break
        if ret == 0:
            break
        pcs.append(ret)
        if nbp == rbp:
            break
        rbp = nbp
    return pcs


class InfoWeft(gdb.Command):
    """info weft: every green thread with its id, state, wait reason, name
and the function it waits in (running Gs: the M and kernel thread)."""

    def __init__(self):
        super(InfoWeft, self).__init__("info weft", gdb.COMMAND_STATUS)

    def invoke(self, arg, from_tty):
        status_names = _enum_names("enum gstatus", GSTATUS)
        running = running_on()
        gs = all_gs()
        live = 0
        gdb.write("%8s  %-10s %-22s %-16s %s\n" % ("ID", "STATE", "WAITING ON", "NAME", "WHERE"))
        for g in gs:
            st = int(g["status"])
            if st == 5 and "all" not in arg.split():
                continue  # dead: a descriptor kept for reuse
            live += 1
            state = status_names.get(st, str(st))
            why = ""
            if st == 3:
                why = _waitreason(int(g["waitreason"]))
            name = ""
            if int(g["name"]) != 0:
                try:
                    name = g["name"].string()
                except gdb.error:
                    name = "?"
            where = ""
            if int(g) in running:
                mid, tid = running[int(g)]
                where = "M%d (LWP %d)" % (mid, tid)
                if st != 2:
                    state = state + "*"
            else:
                where = _where(g, st)
            kind = ""
            try:
                if int(g["stack"]["kind"]) == 2:
                    kind = " [segmented]"
            except gdb.error:
                pass
            gdb.write("%8d  %-10s %-22s %-16s %s%s\n" % (int(g["id"]), state, why, name, where, kind))
        gdb.write("%d green threads (%d descriptors)\n" % (live, len(gs)))


class WeftPrefix(gdb.Command):
    """Commands for weft's green threads: weft bt ID."""

    def __init__(self):
        super(WeftPrefix, self).__init__("weft", gdb.COMMAND_STACK, prefix=True)


class WeftBt(gdb.Command):
    """weft bt ID [bt options]: backtrace of green thread ID.
A parked G is unwound from the frame its last switch left on its stack;
a running G shows its OS thread's backtrace."""

    def __init__(self):
        super(WeftBt, self).__init__("weft bt", gdb.COMMAND_STACK)

    def invoke(self, arg, from_tty):
        argv = arg.split()
        if not argv:
            raise gdb.GdbError("usage: weft bt ID [bt options]")
        try:
            gid = int(gdb.parse_and_eval(argv[0]))
        except gdb.error:
            raise gdb.GdbError("weft bt: bad id %s" % argv[0])
        opts = " ".join(argv[1:])
        g = find_g(gid)
        if g is None:
            raise gdb.GdbError("weft bt: no green thread %d" % gid)
        st = int(g["status"])
        running = running_on()
        if int(g) in running:
            self.running_bt(gid, running[int(g)], opts)
            return
        if st == 5:
            raise gdb.GdbError("weft bt: green thread %d has exited" % gid)
        if int(g["sp"]) == 0:
            raise gdb.GdbError("weft bt: green thread %d has no saved frame" % gid)
        regs = _frame_regs(g)
        gdb.write("green thread %d [%s]:\n" % (gid, _enum_names("enum gstatus", GSTATUS).get(st, st)))
        if not self.swapped_bt(regs, opts):
            self.fp_bt(regs)

    def running_bt(self, gid, where, opts):
        mid, tid = where
        gdb.write("green thread %d is running on M%d (LWP %d):\n" % (gid, mid, tid))
        cur = gdb.selected_thread()
        for t in gdb.selected_inferior().threads():
            if t.ptid[1] == tid:
                t.switch()
                try:
                    gdb.execute("bt " + opts)
                finally:
                    if cur is not None and cur.is_valid():
                        cur.switch()
                return
        gdb.write("(no such thread in gdb)\n")

    def swapped_bt(self, regs, opts):
        """gdb's own backtrace, from the G's registers put in frame 0 of
        the selected thread for the duration."""
        names = ["rsp", "rip", "rbp"]
        try:
            gdb.execute("select-frame 0", to_string=True)
            saved = dict((n, int(gdb.parse_and_eval("$" + n))) for n in names)
        except gdb.error:
            return False
        try:
            try:
                for n in names:
                    gdb.execute("set $%s = %d" % (n, regs[n]), to_string=True)
            except gdb.error:
                return False  # e.g. a core file
            gdb.execute("bt " + opts)
            return True
        finally:
            for n in names:
                try:
                    gdb.execute("set $%s = %d" % (n, saved[n]), to_string=True)
                except gdb.error:
                    pass
            try:
                gdb.execute("select-frame 0", to_string=True)
            except gdb.error:
                pass

    def fp_bt(self, regs):
        for i, pc in enumerate(_fp_walk(regs["rip"], regs["rbp"])):
            look = pc if i == 0 else pc - 1
            sal = gdb.find_pc_line(look)
            loc = ""
            if sal.symtab is not None:
                loc = " at %s:%d" % (sal.symtab.filename, sal.line)
            gdb.write("#%-2d 0x%016x in %s ()%s\n" % (i, pc, _funcname(look), loc))


InfoWeft()
WeftPrefix()
WeftBt()
