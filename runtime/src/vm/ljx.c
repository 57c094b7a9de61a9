/* ljx: the few LuaJIT internals the runtime needs (yieldability, int64 cdata, JIT set-up).
 * Layout-dependent: must be compiled against the headers of the very LuaJIT it links with. */
#include "vm/ljx.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "base/sanitize.h"

#include "lj_obj.h"   /* TValue/GCcdata layout, G(L), global_State.gc.total */
#include "lj_state.h" /* incr_top: push a GC object we built ourselves */
#include "lj_tab.h"
#include "lj_alloc.h" /* lj_alloc_create/_f/_destroy: the arena of a large heap */
#include "lj_prng.h"
#include "lj_str.h"      /* GCtab array part and hash nodes, lj_tab_len, lj_tab_getint */
#include "lj_frame.h"    /* cframe_canyield: the bit lua_yield itself tests */
#include "lj_ctype.h"    /* CTState, CTID_INT64/UINT64, ctype_raw for typedef'd ints */
#include "lj_cdata.h"    /* lj_cdata_new: allocate a boxed 64-bit integer */
#include "lj_jit.h"      /* jit_State flags and param[] */
#include "lj_dispatch.h" /* L2J, lj_dispatch_update: switch the dispatch table to JIT mode */
#include "lj_trace.h"    /* GCtrace: mcode, szmcode, spadjust */
#include "lj_vm.h"       /* lj_vm_exit_handler, lj_vm_exit_interp, lj_vm_cpcall */
#include "lj_gc.h"       /* lj_gc_step_jit */
#include "lj_debug.h"    /* lj_debug_line, VARNAME_* */
#include "lj_bc.h"       /* bytecode operands and modes: keep_template_keys */
#include "lj_buf.h"      /* lj_buf_ruleb128: a function's variable ranges */

/* From LuaJIT's lualib.h, declared here because runtime/src has a lualib.h of its own. */
LUALIB_API int luaopen_ffi(lua_State *L);

#if !LJ_HASFFI || !LJ_HASJIT
#error "ljx needs a LuaJIT built with the FFI and the JIT"
#endif

/* lua_yield succeeds iff the innermost C frame of L is the one lua_resume entered with
 * (CFRAME_RESUME set); a lua_call/pcall from C in between installs a frame without it. */
int ljx_can_yield(lua_State *L) { return cframe_canyield(L->cframe) ? 1 : 0; }

/* Public API gives no cdata type id: lua_topointer returns the payload, the GCcdata header
 * sits right before it (also for variable-length cdata). */
int ljx_cdata_int64(lua_State *L, int idx, uint64_t *bits, int *is_unsigned)
{
    if (lua_type(L, idx) != LUA_TCDATA)
        return 0;
    const void *p = lua_topointer(L, idx);
    const GCcdata *cd = (const GCcdata *)p - 1;
    if (cd->ctypeid == CTID_INT64 || cd->ctypeid == CTID_UINT64) {
        *is_unsigned = cd->ctypeid == CTID_UINT64;
    } else {
        /* A cdata exists, so the ctype state does too. Resolve typedefs and attributes
         * (e.g. "long", "int64_t __attribute__((aligned(8)))") to the underlying number. */
        CTState *cts = ctype_ctsG(G(L));
        if (cts == NULL || cd->ctypeid >= cts->top)
            return 0;
        CType *ct = ctype_raw(cts, cd->ctypeid);
        if (!ctype_isinteger(ct->info) || ctype_isbool(ct->info) || ct->size != 8)
            return 0;
        *is_unsigned = (ct->info & CTF_UNSIGNED) != 0;
    }
    memcpy(bits, p, sizeof *bits);
    return 1;
}

void ljx_push_int64(lua_State *L, uint64_t bits, int is_unsigned)
{
    /* Same as the lexer's ctype_loadffi for a 1LL literal: a bare lj_ctype_init would leave
     * cdata without the FFI metatable (no tostring "1LL", no arithmetic), and a later
     * require("ffi") would replace (and leak) that ctype state. */
    if (ctype_ctsG(G(L)) == NULL) {
        /* luaopen_ffi anchors its module (which holds the cdata finalizer table) in
         * registry._LOADED, if that exists: a state whose package library is not open yet
         * (a spawn's int64 argument) would lose it to the next GC, and lua_close would then
         * read a freed finalizer table */
        luaL_findtable(L, LUA_REGISTRYINDEX, "_LOADED", 16);
        lua_pop(L, 1);
        lua_pushcfunction(L, luaopen_ffi);
        lua_call(L, 0, 0);
    }
    CTState *cts = ctype_cts(L);
    GCcdata *cd = lj_cdata_new(cts, is_unsigned ? CTID_UINT64 : CTID_INT64, 8);
    memcpy(cdataptr(cd), &bits, sizeof bits);
    setcdataV(L, L->top, cd);
    incr_top(L);
}

/* What luaopen_jit's jit_init does, minus jit_cpudetect (cpuid): flags and params come from a
 * state that already paid for it. lj_dispatch_update sees the off->on transition, resets the
 * hot counters from param[JIT_P_hotloop] and installs the recording dispatch. */
void ljx_jit_copy(lua_State *to, lua_State *from)
{
    jit_State *jt = L2J(to);
    const jit_State *jf = L2J(from);
    jt->flags = jf->flags | JIT_F_ON;
    memcpy(jt->param, jf->param, sizeof jt->param);
    lj_dispatch_update(G(to));
}

/* jit.opt.start("sizemcode=N") writes the same slot; lj_mcode reads it per new area. */
void ljx_jit_set_sizemcode(lua_State *L, int kb) { L2J(L)->param[JIT_P_sizemcode] = kb; }

void ljx_jit_set_maxmcode(lua_State *L, int kb) { L2J(L)->param[JIT_P_maxmcode] = kb; }

/* The parameter defaults, as lib_jit.c builds them from the same table. */
static const int32_t jit_param_default[JIT_P__MAX + 1] = {
#define JIT_PARAMINIT(len, name, value) (value),
    JIT_PARAMDEF(JIT_PARAMINIT)
#undef JIT_PARAMINIT
        0};

int ljx_jit_retune(lua_State *L)
{
    global_State *g = G(L);
    jit_State *J = L2J(L);
    /* in a finalizer, or while a trace is being recorded (a hook runs beside the recorder) */
    if ((g->hookmask & HOOK_GC) || J->state != LJ_TRACE_IDLE)
        return -1;
    if (lj_trace_flushall(L) != 0)
        return -1;
    memcpy(J->param, jit_param_default, sizeof J->param);
    lj_dispatch_init_hotcount(g);
    return 0;
}

void *ljx_lightud(lua_State *L, uint64_t bits)
{
    TValue o;
    o.u64 = bits;
    return lightudV(G(L), &o);
}

/* -- Dumping a function for another state ----------------------------------------------- */

/* A table constructor with a computed field ({hop = k + 1}) keeps the key in its template
 * with a nil value, so the table it duplicates already has the node and the store that
 * follows fills it. lua_dump writes only the non-nil fields, so a state that loads the dump
 * gets an empty template and every such constructor rehashes its table on the store (a
 * ring member spent ~160 instructions and a second allocation per message on it). Such a
 * key gets false in the template instead, when the bytecode proves that nothing can see
 * the table before the store:
 *  - the TDUP writes a temporary, not a named local (a local may be captured by a closure
 *    made earlier, which a call before the store could run);
 *  - the store (TSETS into the same register, key the same string constant) follows in
 *    straight-line code: no branch, closure creation, tail call or return before it, and
 *    no instruction in between reads or writes the register;
 *  - the key is compared by address with a string constant of the function. A nil-valued
 *    key keeps nothing alive, so {unset = nil} may name a string the GC has freed: such a
 *    key is never read. ({unset = nil} has no store and keeps its nil.) */
static int slot_is_local(const GCproto *pt, BCPos pc, BCReg slot)
{
    const uint8_t *p = proto_varinfo(pt);
    BCPos lastpc = 0;
    BCReg active = 0;
    for (;;) {
        uint32_t vn = *p;
        if (vn < VARNAME__MAX) {
            if (vn == VARNAME_END)
                break;
        } else {
            while (*p)
                p++;
        }
        p++;
        const char *q = (const char *)p;
        BCPos startpc = lastpc + lj_buf_ruleb128(&q);
        lastpc = startpc;
        if (startpc > pc)
            break;
        BCPos endpc = startpc + lj_buf_ruleb128(&q);
        p = (const uint8_t *)q;
        if (pc < endpc)
            active++;
    }
    /* the active locals fill the lowest slots, in order */
    return slot < active;
}

/* Whether an operand of mode m with value v may touch register r. */
static int operand_touches(uint32_t m, BCReg v, BCReg r)
{
    if (m == BCMdst || m == BCMvar)
        return v == r;
    if (m == BCMbase || m == BCMrbase)
        return v <= r; /* a range from v upward */
    return 0;
}

static void keep_stored_keys(GCproto *pt, BCPos pc, GCtab *t)
{
    BCIns *bc = proto_bc(pt);
    BCReg r = bc_a(bc[pc]);
    Node *node = noderef(t->node);
    for (BCPos i = pc + 1; i < pt->sizebc; i++) {
        BCIns ins = bc[i];
        BCOp op = bc_op(ins);
        if (op <= BC_ISNUM || op == BC_FNEW || op == BC_UCLO || op >= BC_CALLMT)
            return; /* a branch, a closure, a tail call, a return, a loop */
        if ((op == BC_TSETS || op == BC_TSETB || op == BC_TSETV || op == BC_TSETR) &&
            bc_b(ins) == r) {
            if (bc_a(ins) == r || ((op == BC_TSETV || op == BC_TSETR) && bc_c(ins) == r))
                return;
            if (op != BC_TSETS)
                continue;
            GCobj *key = proto_kgc(pt, ~(ptrdiff_t)bc_c(ins));
            for (uint32_t j = 0; j <= t->hmask; j++)
                if (tvisnil(&node[j].val) && tvisstr(&node[j].key) && gcV(&node[j].key) == key)
                    setboolV(&node[j].val, 0);
            continue;
        }
        if (operand_touches(bcmode_a(op), bc_a(ins), r))
            return;
        if (bcmode_hasd(op)) {
            if (operand_touches(bcmode_d(op), bc_d(ins), r))
                return;
        } else if (operand_touches(bcmode_b(op), bc_b(ins), r) ||
                   operand_touches(bcmode_c(op), bc_c(ins), r)) {
            return;
        }
    }
}

static void keep_template_keys(GCproto *pt, int depth)
{
    for (MSize i = 0; i < pt->sizekgc; i++) {
        GCobj *o = proto_kgc(pt, -(ptrdiff_t)(i + 1));
        if (o->gch.gct == ~LJ_TPROTO && depth < 200)
            keep_template_keys(gco2pt(o), depth + 1);
    }
    if (!proto_varinfo(pt))
        return; /* stripped: which slots are locals is unknown */
    BCIns *bc = proto_bc(pt);
    for (BCPos pc = 0; pc < pt->sizebc; pc++) {
        if (bc_op(bc[pc]) != BC_TDUP)
            continue;
        GCtab *t = gco2tab(proto_kgc(pt, ~(ptrdiff_t)bc_d(bc[pc])));
        if (t->hmask && !slot_is_local(pt, pc, bc_a(bc[pc])))
            keep_stored_keys(pt, pc, t);
    }
}

int ljx_dump(lua_State *L, lua_Writer writer, void *ud)
{
    cTValue *o = L->top - 1;
    if (o >= L->base && tvisfunc(o) && isluafunc(funcV(o)))
        keep_template_keys(funcproto(funcV(o)), 0);
    return lua_dump(L, writer, ud);
}

/* -- Raw writes for the decoder: what lua_createtable, lua_rawset and lua_rawseti do, without
 * the API's index lookups and GC check (the decoder holds the GC, and reserved the stack) -- */

void *ljx_new_table(lua_State *L, uint32_t narr, uint32_t nhash)
{
    GCtab *t = lj_tab_new_ah(L, (int32_t)narr, (int32_t)nhash);
    settabV(L, L->top, t);
    incr_top(L);
    return t;
}

void ljx_set_pair(lua_State *L, void *table)
{
    GCtab *t = table;
    TValue *o = lj_tab_set(L, t, L->top - 2);
    copyTV(L, o, L->top - 1);
    lj_gc_anybarriert(L, t);
    L->top -= 2;
}

void ljx_set_index(lua_State *L, void *table, uint32_t i)
{
    GCtab *t = table;
    TValue *o = lj_tab_setint(L, t, (int32_t)i);
    copyTV(L, o, L->top - 1);
    lj_gc_anybarriert(L, t);
    L->top--;
}

/* -- Raw reads for the encoder: TValues classified once, no index2adr per access ---------- */

static void classify(cTValue *o, ljx_val *v)
{
    if (tvisnum(o)) {
        v->type = LUA_TNUMBER;
        v->num = numV(o);
    } else if (tvisint(o)) {
        v->type = LUA_TNUMBER;
        v->num = (double)intV(o);
    } else if (tvisstr(o)) {
        v->type = LUA_TSTRING;
        v->str = strVdata(o);
        v->len = strV(o)->len;
    } else if (tvistab(o)) {
        v->type = LUA_TTABLE;
        v->table = tabV(o);
    } else if (tvisnil(o)) {
        v->type = LUA_TNIL;
    } else if (tvisbool(o)) {
        v->type = LUA_TBOOLEAN;
        v->num = tvistrue(o);
    } else if (tviscdata(o)) {
        GCcdata *cd = cdataV(o);
        v->type = LJX_TCDATA;
        if (cd->ctypeid == CTID_INT64 || cd->ctypeid == CTID_UINT64) {
            v->type = cd->ctypeid == CTID_INT64 ? LJX_TINT64 : LJX_TUINT64;
            memcpy(&v->bits, cdataptr(cd), 8);
        }
    } else if (tvisfunc(o)) {
        v->type = LUA_TFUNCTION;
    } else if (tvisthread(o)) {
        v->type = LUA_TTHREAD;
    } else if (tvisudata(o)) {
        GCudata *ud = udataV(o);
        v->type = LUA_TUSERDATA;
        v->ud = ud->udtype == UDTYPE_USERDATA ? uddata(ud) : NULL;
        v->len = ud->len;
    } else if (tvislightud(o)) {
        v->type = LUA_TLIGHTUSERDATA;
        v->bits = o->u64; /* ljx_lightud makes it a pointer (it needs the state) */
    } else {
        v->type = LUA_TNONE;
    }
}

void ljx_read(lua_State *L, int idx, ljx_val *v)
{
    cTValue *o;
    if (idx > 0) {
        o = L->base + (idx - 1);
    } else if (idx > LUA_REGISTRYINDEX) {
        o = L->top + idx;
    } else { /* pseudo-index: the source keeps the object alive after the pop */
        lua_pushvalue(L, idx);
        classify(L->top - 1, v);
        lua_pop(L, 1);
        goto cdata;
    }
    if (o < L->base || o >= L->top) {
        v->type = LUA_TNONE;
        return;
    }
    classify(o, v);
cdata:
    /* Typedef'd 64-bit integers ("long", attributes) take the slow, general check. */
    if (v->type == LJX_TCDATA) {
        int uns;
        if (ljx_cdata_int64(L, idx, &v->bits, &uns))
            v->type = uns ? LJX_TUINT64 : LJX_TINT64;
    }
}

size_t ljx_table_len(const void *table) { return lj_tab_len((GCtab *)table); }

void ljx_table_geti(const void *table, size_t i, ljx_val *v)
{
    GCtab *t = (GCtab *)table;
    cTValue *o = i <= 0x7fffffff ? lj_tab_getint(t, (int32_t)i) : NULL;
    if (o == NULL)
        v->type = LUA_TNIL;
    else
        classify(o, v);
}

/* Array part slots first (pos = the key), then the hash nodes; nil values are skipped. */
int ljx_table_next(const void *table, size_t *pos, ljx_val *k, ljx_val *v)
{
    const GCtab *t = table;
    size_t i = *pos;
    for (; i < t->asize; i++) {
        cTValue *o = arrayslot(t, i);
        if (!tvisnil(o)) {
            k->type = LUA_TNUMBER;
            k->num = (double)i;
            classify(o, v);
            *pos = i + 1;
            return 1;
        }
    }
    const Node *node = noderef(t->node);
    for (; i - t->asize <= t->hmask; i++) {
        const Node *n = &node[i - t->asize];
        if (!tvisnil(&n->val)) {
            classify(&n->key, k);
            classify(&n->val, v);
            *pos = i + 1;
            return 1;
        }
    }
    *pos = i;
    return 0;
}

/* hook_enter and hook_vmevent set HOOK_ACTIVE around every call from those C functions
 * into Lua (lj_dispatch_ins/call, lj_trace_hot/exit/stitch), which are the ones that keep
 * errno's address across it (ERRNO_SAVE). */
int ljx_in_hook(lua_State *L) { return hook_active(G(L)) != 0; }

/* lua_gc(LUA_GCCOUNT/COUNTB) gives the same in two calls; this is one load. */
size_t ljx_gc_total(lua_State *L) { return (size_t)G(L)->gc.total; }

/* lj_str_resize: a new state's string table has 256 buckets (2 KB on GC64),
 * more than an actor that interns a few dozen strings needs. */
void ljx_str_shrink(lua_State *L, unsigned slots) { lj_str_resize(L, (MSize)(slots - 1)); }

/* J->mcarea chains the state's machine-code areas (lj_mcode.c: each starts
 * with an MCLink {next, size}; the newest area's size is J->szmcarea). Read
 * from a signal handler on the thread that runs the state: the chain only
 * changes while a trace is compiled, and then the PC is in C code, not here. */
int ljx_pc_in_mcode(lua_State *L, uintptr_t pc)
{
    jit_State *J = L2J(L);
    MCode *mc = J->mcarea;
    size_t size = J->szmcarea;
    while (mc) {
        if (pc >= (uintptr_t)mc && pc < (uintptr_t)mc + size)
            return 1;
        MCLink *link = (MCLink *)mc;
        mc = link->next;
        size = mc ? ((MCLink *)mc)->size : 0;
    }
    return 0;
}

/* -- The return address of the innermost call from Lua into C ------------------------------ */

/* Where the interpreter's BC_FUNCC handler resumes after a C function returns
 * (`call KBASE` in vm_x64.dasc): learned once from a probe that it calls. */
static _Atomic uintptr_t funcc_ret;

static int funcc_probe(lua_State *L)
{
    lua_pushlightuserdata(L, __builtin_return_address(0));
    return 1;
}

void ljx_init(lua_State *L)
{
    if (atomic_load_explicit(&funcc_ret, memory_order_relaxed))
        return;
    lua_pushcfunction(L, funcc_probe);
    lua_call(L, 0, 1);
    atomic_store_explicit(&funcc_ret, (uintptr_t)lua_touserdata(L, -1), memory_order_relaxed);
    lua_pop(L, 1);
}

/* Whether ret is a return address inside T's machine code, just after a call
 * instruction: E8 rel32 (to target, if given), or FF /2 through a register. */
static int after_call(GCtrace *T, uintptr_t ret, void *target)
{
    uintptr_t mc = (uintptr_t)T->mcode;
    if (ret < mc + 5 || ret >= mc + T->szmcode)
        return 0;
    const uint8_t *p = (const uint8_t *)ret;
    if (p[-5] == 0xe8) {
        int32_t rel;
        memcpy(&rel, p - 4, sizeof rel);
        return !target || (void *)(p + rel) == target;
    }
    return !target && p[-2] == 0xff && (p[-1] & 0xf8) == 0xd0;
}

/* The slot of trace T's call, if it lies in [lo, hi) and holds a return address into T
 * after a call (to target, if given). */
static uintptr_t *trace_slot(GCtrace *T, uintptr_t cf, uintptr_t lo, uintptr_t hi, void *target)
{
    uintptr_t at = cf - 16 - T->spadjust - 8;
    if (!T->mcode || at < lo || at + 8 > hi || !after_call(T, *(uintptr_t *)at, target))
        return NULL;
    return (uintptr_t *)at;
}

/* The rsp of the code that calls out is known from the innermost C frame of
 * the running thread (L->cframe is the interpreter's rsp):
 *   - the interpreter calls a C function (BC_FUNCC) with rsp = cframe, so its
 *     return address sits at cframe - 8, and g->vmstate reads C while it runs
 *     (or GC, when that function allocates);
 *   - a trace runs with rsp = cframe - 16 (BC_JLOOP saves r12 and r13 below
 *     the frame) - T->spadjust (its spill area, fixed for the whole trace), and
 *     g->vmstate holds its number while it or a C function it called runs. A
 *     trace's own GC step (lj_gc_step_jit; g->jit_base is set while on trace)
 *     reads GC instead: the trace is then the one whose slot holds a return
 *     address just after a call to lj_gc_step_jit.
 * The value found there must also be right: the FUNCC return address, or an
 * address inside T's machine code just after a call instruction. Where this
 * cannot tell (the trace exit handler before it has marked its state, the
 * recorder, an asm fast function or the GC called from the interpreter), no slot. */
uintptr_t *ljx_c_return_slot(lua_State *L, uintptr_t pc, uintptr_t lo, uintptr_t hi)
{
    global_State *g = G(L);
    int32_t st = g->vmstate;
    lua_State *cur = gco2th(gcref(g->cur_L));
    if (!cur)
        return NULL;
    uintptr_t cf = (uintptr_t)cframe_raw(cur->cframe);
    if (!cf)
        return NULL;
    jit_State *J = G2J(g);
    if (st == ~LJ_VMST_GC && tvref(g->jit_base)) {
        for (MSize i = 1; i < J->sizetrace; i++) {
            GCtrace *T = (GCtrace *)gcref(J->trace[i]);
            uintptr_t *at = T ? trace_slot(T, cf, lo, hi, (void *)lj_gc_step_jit) : NULL;
            if (at)
                return at;
        }
        return NULL;
    }
    if (st == ~LJ_VMST_C || st == ~LJ_VMST_GC) {
        uintptr_t at = cf - 8;
        uintptr_t want = atomic_load_explicit(&funcc_ret, memory_order_relaxed);
        if (at < lo || at + 8 > hi || !want || *(uintptr_t *)at != want)
            return NULL;
        return (uintptr_t *)at;
    }
    if (st <= 0)
        return NULL;
    /* the exit handler pushes registers before it marks its state EXIT */
    if (pc >= (uintptr_t)(void *)lj_vm_exit_handler && pc < (uintptr_t)(void *)lj_vm_exit_interp)
        return NULL;
    if ((MSize)st >= J->sizetrace)
        return NULL;
    GCtrace *T = (GCtrace *)gcref(J->trace[st]);
    return T ? trace_slot(T, cf, lo, hi, NULL) : NULL;
}

/* lua_gc(LUA_GCSTOP) sets the same threshold, but LUA_GCRESTART cannot give the old one back
 * (it sets it to the current total, so every hold would start a GC step at once). */
size_t ljx_gc_hold(lua_State *L)
{
    global_State *g = G(L);
    size_t held = (size_t)g->gc.threshold;
    g->gc.threshold = LJ_MAX_MEM;
    return held;
}

void ljx_gc_resume(lua_State *L, size_t held) { G(L)->gc.threshold = (GCSize)held; }

void ljx_gc_check(lua_State *L) { lj_gc_check(L); }

struct ljx_cp {
    void (*fn)(lua_State *L, void *ud);
    void *ud;
};

/* fn's errors unwind through this frame (see base/sanitize.h) */
LUA_UNWOUND static TValue *ljx_cp_run(lua_State *L, lua_CFunction dummy, void *ud)
{
    struct ljx_cp *cp = ud;
    (void)dummy;
    cp->fn(L, cp->ud);
    return NULL; /* no Lua frame to call: lj_vm_cpcall just returns */
}

/* As lua_cpcall (which first allocates a C closure to call) without the closure: the
 * C frame lj_vm_cpcall installs catches what fn raises and leaves the error value on top. */
int ljx_cpcall(lua_State *L, void (*fn)(lua_State *L, void *ud), void *ud)
{
    global_State *g = G(L);
    uint8_t oldh = hook_save(g);
    struct ljx_cp cp = {fn, ud};
    int st = lj_vm_cpcall(L, NULL, &cp, ljx_cp_run);
    if (st)
        hook_restore(g, oldh);
    return st;
}

/* From inside a C function called from Lua: the calling Lua function's chunk and line,
 * straight from the frame (lua_getstack and lua_getinfo cost a thousand instructions more,
 * most of it formatting a name that rarely changes). The name is formatted only when the
 * chunk is another than *chunk. */
void ljx_caller_where(lua_State *L, const void **chunk, char *file, size_t n, int32_t *line,
                      const void **at)
{
    cTValue *f = L->base - 1;
    if (f <= tvref(L->stack) + LJ_FR2 || !frame_islua(f))
        return;
    const BCIns *pc = frame_pc(f);
    /* the same call site as last time: line and chunk are written already, and the
     * prototype and its line table (cold in a state that waits most of the time) stay
     * untouched */
    if ((const void *)pc == *at)
        return;
    GCfunc *fn = frame_func(frame_prevl(f));
    if (!isluafunc(fn))
        return;
    *at = pc;
    GCproto *pt = funcproto(fn);
    BCPos pos = proto_bcpos(pt, pc) - 1;
    *line = pos <= pt->sizebc ? (int32_t)lj_debug_line(pt, pos) : (int32_t)pt->firstline;
    GCstr *name = proto_chunkname(pt);
    if ((const void *)name == *chunk)
        return;
    *chunk = name;
    const char *s = strdata(name);
    size_t len = name->len;
    if (*s == '@' || *s == '=') {
        s++;
        len--;
    }
    if (len >= n) { /* the tail of a long path says more than its head */
        s += len - (n - 1);
        len = n - 1;
    }
    memcpy(file, s, len);
    file[len] = 0;
}

/* ---- arenas ---- */

typedef struct arena {
    void *msp;
    PRNGState prng; /* the allocator asks it for mmap hints; it must live as long */
} arena;

void *ljx_arena_new(void)
{
    arena *ar = malloc(sizeof *ar);
    if (!ar)
        return NULL;
    if (!lj_prng_seed_secure(&ar->prng)) {
        /* hints only: a fixed seed is as good */
        ar->prng.u[0] = 0x9e3779b97f4a7c15ull, ar->prng.u[1] = 0xbf58476d1ce4e5b9ull;
        ar->prng.u[2] = 0x94d049bb133111ebull, ar->prng.u[3] = 0x2545f4914f6cdd1dull;
    }
    ar->msp = lj_alloc_create(&ar->prng);
    if (!ar->msp) {
        free(ar);
        return NULL;
    }
    lj_alloc_setprng(ar->msp, &ar->prng);
    return ar;
}

void *ljx_arena_msp(void *ar) { return ((arena *)ar)->msp; }

void ljx_arena_free(void *ar)
{
    if (!ar)
        return;
    lj_alloc_destroy(((arena *)ar)->msp);
    free(ar);
}

/* -- Resetting a state for reuse (the state pool) ------------------------------------------ */

int ljx_state_resettable(lua_State *L)
{
    global_State *g = G(L);
    jit_State *J = L2J(L);
    if (L->status != LUA_OK || cframe_raw(L->cframe) != NULL || gcref(L->openupval) != NULL)
        return 0;
    /* cdata finalizers, the C type table (luaopen_ffi would make a second one) */
    if (ctype_ctsG(g) != NULL)
        return 0;
    /* no machine code was ever allocated, so no trace exists (a flush frees the areas) */
    if (J->state != LJ_TRACE_IDLE || J->mcarea != NULL || tvref(g->jit_base) != NULL)
        return 0;
    /* in a hook, a finalizer or a vmevent handler; a profiler (process-wide timer) running */
    if ((g->hookmask & ~HOOK_EVENTMASK) != 0 || g->vmevmask != 0)
        return 0;
    if (gcref(g->gc.mmudata) != NULL)
        return 0;
    /* every userdata follows the main thread in the GC's list (lj_udata_new); live or not
     * yet swept, one with a metatable may have a __gc that must run at this actor's end */
    for (GCobj *o = gcref(mainthread(g)->nextgc); o != NULL; o = gcref(o->gch.nextgc)) {
        if (o->gch.gct != ~LJ_TUDATA || gcref(gco2ud(o)->metatable) != NULL)
            return 0;
    }
    return 1;
}

/* t emptied, without a metatable, if it is no bigger than a hash part of 2^hbits slots and an
 * array part of asize (what the last actor left in it is garbage now); else a new table of
 * that shape. Reusing them spares the next collection a table (the globals' is 1.5 KB). */
static GCtab *emptied(lua_State *L, GCtab *t, uint32_t asize, uint32_t hbits)
{
    if (t == NULL || t->hmask + 1 > (1u << hbits) || t->asize > asize)
        return lj_tab_new(L, 0, hbits);
    lj_tab_clear(t);
    setgcrefnull(t->metatable);
    t->nomm = (uint8_t)~0;
    return t;
}

void ljx_state_reset(lua_State *L, lua_State *from, size_t collect_at)
{
    global_State *g = G(L);
    jit_State *J = L2J(L);
    lua_settop(L, 0);
    setgcref(g->cur_L, obj2gco(L));
    /* NOBARRIER: a cycle under way is redone in full below; in the pause nothing is black */
    GCtab *reg = tvistab(registry(L)) ? tabV(registry(L)) : NULL;
    GCtab *env = tabref(L->env);
    if (env == reg)
        env = NULL;
    settabV(L, registry(L), emptied(L, reg, 16, 4));
    setgcref(L->env, obj2gco(emptied(L, env, 0, LJ_MIN_GLOBAL)));
    for (int i = GCROOT_BASEMT; i < GCROOT_MAX; i++) /* base metatables, io's default files */
        setgcrefnull(g->gcroot[i]);
    lua_sethook(L, NULL, 0, 0);
    g->gc.pause = LUAI_GCPAUSE;
    g->gc.stepmul = LUAI_GCMUL;
    /* flags (jit.off, optimisations), parameters (a retuned actor's), hot counters, and the
     * penalties of prototypes that are garbage now */
    ljx_jit_copy(L, from);
    lj_dispatch_init_hotcount(g);
    memset(J->penalty, 0, sizeof J->penalty);
    J->penaltyslot = 0;
    if (g->gc.state != GCSpause || g->gc.total > collect_at)
        lj_gc_fullgc(L);
    /* about the room lua_newstate leaves before the first cycle (collectgarbage("stop") left
     * it at the maximum) */
    g->gc.threshold = g->gc.total + 32 * 1024;
}

int ljx_number_at(lua_State *L, int idx, double *d)
{
    cTValue *o = L->base + (idx - 1);
    if (idx <= 0 || o >= L->top || !tvisnum(o))
        return 0;
    *d = numV(o);
    return 1;
}
