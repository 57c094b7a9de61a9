/* ljx: the few LuaJIT internals the runtime needs (yieldability, int64 cdata, JIT set-up).
 * Layout-dependent: must be compiled against the headers of the very LuaJIT it links with. */
#include "vm/ljx.h"
#include "base/bytes.h"

#include <stdatomic.h>
#include <stddef.h>
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
#include "lj_func.h"     /* lj_func_newL_empty: a body from a kept prototype */
#include "lj_udata.h"    /* lj_lightud_intern: a light userdata key for a raw lookup */
#include "lj_meta.h"     /* lj_meta_fastg: whether a userdata's metatable has a __gc */

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

/* Loops and functions the runtime's parameters blacklisted (a message loop whose first act
 * is a C call: minstitch) may compile under LuaJIT's: their bytecode is unpatched, as jit.on
 * does, except in the prototypes jit.off marked (their patch is the user's, and is made
 * again lazily anyway). Every prototype is on the GC's root list. */
static void reenable_blacklisted(global_State *g)
{
    for (GCobj *o = gcref(g->gc.root); o; o = gcref(o->gch.nextgc))
        if (o->gch.gct == ~LJ_TPROTO) {
            GCproto *pt = gco2pt(o);
            if ((pt->flags & PROTO_ILOOP) && !(pt->flags & PROTO_NOJIT))
                lj_trace_reenableproto(pt);
        }
}

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
    reenable_blacklisted(g);
    lj_dispatch_init_hotcount(g);
    return 0;
}

/* The frame of the C function L is in (a wait's), if Lua code called it; else NULL. Its
 * frame_pc is the return address in the caller. */
static inline cTValue *called_from_lua(lua_State *L)
{
    cTValue *f = L->base - 1;
    return f > tvref(L->stack) + LJ_FR2 && frame_islua(f) ? f : NULL;
}

/* The function that made the call of frame f (called_from_lua), if it is a Lua function. */
static inline GCfunc *caller_lua_func(cTValue *f)
{
    GCfunc *fn = frame_func(frame_prevl(f));
    return isluafunc(fn) ? fn : NULL;
}

/* The penalty that makes a loop's next aborted recording its last: LuaJIT doubles a loop's
 * penalty at each abort and blacklists the loop once that passes PENALTY_MAX. As a hot
 * count (two per pass of a loop) it puts the next recording off for about 16,000 passes. */
#define WAIT_LOOP_PENALTY 0x7fffu
_Static_assert(2u * WAIT_LOOP_PENALTY > PENALTY_MAX, "the next abort blacklists");
_Static_assert(WAIT_LOOP_PENALTY <= 0xffffu, "a hot count holds it");

/* Whether the bytecode at pc lies in the body of the loop whose instruction is at start. */
static int in_loop_body(const BCIns *start, const BCIns *pc)
{
    switch (bc_op(*start)) {
    case BC_LOOP: /* at the loop's head: its jump leaves the loop */
        return pc > start && pc <= start + 1 + bc_j(*start);
    case BC_FORL: /* at the loop's foot: their jump goes back to the body */
    case BC_ITERL:
        return pc >= start + 1 + bc_j(*start) && pc <= start;
    default: /* ITERN and the patched ones: LuaJIT's own rules */
        return 0;
    }
}

int ljx_jit_defer_wait_loop(lua_State *L)
{
    jit_State *J = L2J(L);
    /* the slots in use: they are taken in turn from the first, and each is its loop's from
     * its first abort on (the newest is the loop that aborted first most lately; a
     * gen_server's receive loop aborts in turn with the loops around it). A state that
     * never aborted reads two words here */
    uint32_t used =
        mref(J->penalty[PENALTY_SLOTS - 1].pc, const BCIns) ? PENALTY_SLOTS : J->penaltyslot;
    if (!used || J->state != LJ_TRACE_IDLE)
        return 0;
    /* the waiting call's Lua caller: the loop must be its own, around the call */
    cTValue *f = called_from_lua(L);
    GCfunc *fn = f ? caller_lua_func(f) : NULL;
    if (!fn)
        return 0;
    const BCIns *pc = frame_pc(f);
    const GCproto *pt = funcproto(fn);
    const BCIns *lo = proto_bc(pt), *hi = lo + pt->sizebc;
    int n = 0;
    for (uint32_t i = 0; i < used; i++) {
        HotPenalty *hp = &J->penalty[i];
        const BCIns *start = mref(hp->pc, const BCIns);
        if (start < lo || start >= hi || hp->reason != LJ_TRERR_TRACEUV ||
            hp->val >= WAIT_LOOP_PENALTY || !in_loop_body(start, pc))
            continue;
        hp->val = (uint16_t)WAIT_LOOP_PENALTY;
        hotcount_set(J2GG(J), start + 1, WAIT_LOOP_PENALTY);
        n++;
    }
    return n;
}

void *ljx_alloc_data(lua_State *L) { return G(L)->allocd; }

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

/* -- A wait's anchor ---------------------------------------------------------------------- */

static TValue *slot_of(lua_State *L, GCtab *t, int32_t i)
{
    return (uint32_t)i < t->asize ? arrayslot(t, i) : lj_tab_setint(L, t, i);
}

/* registry[key] if it is a table, found without a push (lua_rawgeti's index2adr, its copy to
 * the stack and the pop), or NULL */
static GCtab *anchor_of(lua_State *L, int32_t key)
{
    cTValue *o = lj_tab_getint(tabV(registry(L)), key);
    return o && tvistab(o) ? tabV(o) : NULL;
}

void ljx_anchor_store(lua_State *L, int32_t key, int nslots, double head, int from, int n)
{
    GCtab *tab = anchor_of(L, key);
    if (!tab) {
        /* (no collector step runs between the two allocations: the new table needs no
         * anchor of its own until the registry holds it) */
        tab = lj_tab_new_ah(L, nslots, 0);
        GCtab *reg = tabV(registry(L));
        settabV(L, lj_tab_setint(L, reg, key), tab);
        lj_gc_anybarriert(L, reg);
    }
    setnumV(slot_of(L, tab, 1), head);
    for (int i = 0; i < n; i++)
        copyTV(L, slot_of(L, tab, 2 + i), L->base + from - 1 + i);
    for (uint32_t i = (uint32_t)n + 2; i < tab->asize; i++)
        setnilV(arrayslot(tab, i));
    lj_gc_anybarriert(L, tab);
}

double ljx_anchor_take(lua_State *L, int32_t key, int (*count)(double head))
{
    GCtab *tab = anchor_of(L, key);
    cTValue *h = tab ? lj_tab_getint(tab, 1) : NULL;
    double head = h && tvisnum(h) ? numV(h) : 0;
    int n = count(head);
    lj_state_checkstack(L, (MSize)n);
    for (int i = 0; i < n; i++) {
        cTValue *o = tab ? lj_tab_getint(tab, 2 + i) : NULL;
        if (o) {
            copyTV(L, L->top, o);
        } else {
            setnilV(L->top);
        }
        incr_top(L);
    }
    for (int i = 1; tab && i <= n + 1; i++) {
        cTValue *o = lj_tab_getint(tab, i);
        if (o)
            setnilV((TValue *)o);
    }
    return head;
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

/* lj_gc_freeall marks the phase: it sets the current white to both whites and the
 * super-fixed bit, a value no collection cycle uses, and nothing sets it back. */
int ljx_freeing_all(lua_State *L) { return G(L)->gc.currentwhite == (LJ_GC_WHITES | LJ_GC_SFIXED); }

/* lj_str_resize: a new state's string table has 256 buckets (2 KB on GC64),
 * more than an actor that interns a few dozen strings needs. In a table where no chain ever
 * passed LuaJIT's collision bound (g->str.second is 0, as in every fresh state) each string
 * is hashed the primary way, no chain head carries the secondary mark, and a string goes to
 * the new slot its hash names. lj_str_resize's loop also asks each slot and string about
 * secondary hashes, about 10 instructions per slot of the old table; most slots are empty
 * (a fresh state holds some 50 strings), and this one skips them four at a time (a fresh
 * state's shrink: 1,900 instructions, 3,300 with lj_str_resize). */
static inline __attribute__((always_inline)) void str_reinsert(GCobj *o, GCRef *newtab,
                                                               MSize newmask)
{
    while (o) {
        GCobj *next = gcnext(o);
        MSize h = gco2str(o)->hash & newmask;
        /* NOBARRIER: the string table is a GC root */
        setgcrefr(o->gch.nextgc, newtab[h]);
        setgcref(newtab[h], o);
        o = next;
    }
}

void ljx_str_shrink(lua_State *L, unsigned slots)
{
    global_State *g = G(L);
    MSize newmask = (MSize)(slots - 1);
    /* Anything but a shrink of a primary-hashed table the collector is not sweeping takes
     * lj_str_resize. A shrink's old table is a power of two above the new one, so the
     * groups of four below fit it once the new one has two slots or more. */
    int fast = newmask >= 1 && newmask < g->str.mask && g->gc.state != GCSsweepstring;
#if LUAJIT_SECURITY_STRHASH
    fast = fast && !g->str.second;
#endif
    if (!fast) {
        lj_str_resize(L, newmask);
        return;
    }
    GCRef *newtab = lj_mem_newvec(L, newmask + 1, GCRef);
    memset(newtab, 0, (newmask + 1) * sizeof(GCRef));
    const GCRef *r = g->str.tab, *end = r + g->str.mask + 1;
    for (; r < end; r += 4) {
        if ((gcrefu(r[0]) | gcrefu(r[1]) | gcrefu(r[2]) | gcrefu(r[3])) == 0)
            continue;
        for (int j = 0; j < 4; j++)
            str_reinsert(gcref(r[j]), newtab, newmask);
    }
    lj_str_freetab(g);
    g->str.tab = newtab;
    g->str.mask = newmask;
}

void ljx_globals_shrink(lua_State *L)
{
    GCtab *t = tabref(L->env);
    size_t pos = 0;
    ljx_val k, v;
    /* lua_newstate leaves it empty; were anything in it, the smaller part might not hold it */
    if (t->hmask + 1 > (1u << LJX_GLOBALS_HBITS) && !ljx_table_next(t, &pos, &k, &v))
        lj_tab_resize(L, t, 0, LJX_GLOBALS_HBITS);
}

void ljx_globals_reserve(lua_State *L, unsigned hbits)
{
    GCtab *t = tabref(L->env);
    if (t->hmask + 1 < (1u << hbits))
        lj_tab_resize(L, t, t->asize, hbits);
}

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
/* Brings L's next cycle within room bytes of allocation, if it is not already. */
void ljx_gc_room(lua_State *L, size_t room)
{
    global_State *g = G(L);
    if (g->gc.state == GCSpause && g->gc.threshold > g->gc.total + room)
        g->gc.threshold = g->gc.total + room;
}

int ljx_gc_room_min(lua_State *L, size_t room)
{
    global_State *g = G(L);
    if (g->gc.state != GCSpause)
        return 0;
    if (g->gc.threshold < g->gc.total + room)
        g->gc.threshold = g->gc.total + room;
    return 1;
}

int ljx_gc_cycle_due(lua_State *L, size_t min_room, unsigned div)
{
    global_State *g = G(L);
    size_t room = g->gc.threshold / div;
    if (room < min_room)
        room = min_room;
    return g->gc.state == GCSpause && (size_t)g->gc.total + room >= (size_t)g->gc.threshold;
}

/* The string table's sweep, every chain at once: what the collector's steps do one chain per
 * step (gc_sweepstr in lj_gc.c, with the same marks: a chain's low bit is kept), each through
 * its whole step dispatch. A state's table has at least 256 chains, so that was about 16,000
 * of the 35,000 instructions of a small state's cycle; the loop takes about 4,000. */
static void sweep_strings(global_State *g)
{
    int ow = otherwhite(g);
    GCSize old = g->gc.total;
    for (MSize i = g->gc.sweepstr; i <= g->str.mask; i++) {
        GCRef *chain = &g->str.tab[i];
        uintptr_t u = gcrefu(*chain);
        GCRef q;
        GCRef *p = &q;
        GCobj *o;
        setgcrefp(q, (u & ~(uintptr_t)1));
        while ((o = gcref(*p)) != NULL) {
            if ((o->gch.marked ^ LJ_GC_WHITES) & ow) { /* black or current white: alive */
                makewhite(g, o);
                p = &o->gch.nextgc;
            } else {
                setgcrefr(*p, o->gch.nextgc);
                lj_str_free(g, gco2str(o));
            }
        }
        setgcrefp(*chain, (gcrefu(q) | (u & 1)));
    }
    g->gc.sweepstr = g->str.mask + 1;
    g->gc.state = GCSsweep;
    g->gc.estimate -= old - g->gc.total;
}

/* The string sweep of a cycle, left out: no string was made since the last one, which is most
 * cycles of a message loop (its keys and tags are interned once), and the walk of every
 * chain and string, cold after a thousand other actors ran, was about 7% of a ring's time.
 * Nothing is freed that is alive: a string the mark found keeps its mark (not white) and is
 * taken for marked by the next cycles until a sweep whitens it; one it did not find keeps the
 * white that now means dead, and is either made again (lj_str_new turns a dead string it
 * finds back to the current white, as it does during any sweep) or still unreached when a
 * later sweep frees it (the whites swap at every cycle, so that may be the one after). So
 * dead strings wait for the next cycle that finds new ones, at most as many as the state
 * had after its last sweep. */
static void skip_string_sweep(global_State *g)
{
    g->gc.sweepstr = g->str.mask + 1;
    g->gc.state = GCSsweep;
}

/* lj_gc_step works off an allocation debt of (GCSTEPSIZE / 100) * stepmul, without a bound
 * when the multiplier is 0. The collector neither runs its atomic phase nor calls a
 * finalizer while a trace's base is set (it would be on a trace), and a step it refuses ends
 * the call: with a stand-in base a call runs the mark phase up to the atomic one, or the
 * sweep to its end, and no further. Between those, with no stand-in and a debt of 10 (a
 * multiplier of 1), one call runs the atomic phase and at most one string chain's sweep
 * (worth 10). Nothing in these phases reads the base otherwise. */
static void gc_cycle_protected(lua_State *L, void *ud)
{
    global_State *g = G(L);
    TValue *stand_in = tvref(L->stack);
    uint32_t *strings = ud;
    /* read before the atomic step, whose sweep of one chain may free a string */
    int none_made = g->str.num == *strings;
    setmref(g->jit_base, stand_in);
    lj_gc_step(L); /* from the pause through the mark phase */
    setmref(g->jit_base, NULL);
    if (g->gc.state != GCSatomic)
        return;
    g->gc.stepmul = 1;
    lj_gc_step(L); /* the atomic phase (and one string chain's sweep) */
    g->gc.stepmul = 0;
    if (g->gc.state == GCSsweepstring) {
        if (none_made)
            skip_string_sweep(g);
        else
            sweep_strings(g);
        *strings = g->str.num;
    }
    setmref(g->jit_base, stand_in);
    lj_gc_step(L); /* the sweep, up to the finalizers it found due (if any) */
    setmref(g->jit_base, NULL);
}

uint32_t ljx_string_count(lua_State *L) { return G(L)->str.num; }

void ljx_gc_cycle(lua_State *L, uint32_t *strings)
{
    global_State *g = G(L);
    if (g->gc.state != GCSpause || tvref(g->jit_base))
        return;
    MSize stepmul = g->gc.stepmul;
    g->gc.stepmul = 0;
    int st = ljx_cpcall(L, gc_cycle_protected, strings);
    g->gc.stepmul = stepmul;
    setmref(g->jit_base, NULL);
    if (st)
        lua_pop(L, 1); /* out of memory: the cycle goes on in later steps */
}

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

/* What the few instructions from pc on read first among the prototype's constants: *tpl, the
 * template table of the first TDUP (a table constructor with constant keys), what a message
 * loop's reply copies after its wait, or NULL; and the return value, the slot of the first
 * GC constant one of them reads (a string key, a global's name, a template), or NULL. */
#define SITE_SCAN 16
static const void *site_constants(const GCproto *pt, const BCIns *pc, const GCtab **tpl)
{
    const BCIns *end = proto_bc(pt) + pt->sizebc;
    GCRef *kgc = mref(pt->k, GCRef);
    const void *slot = NULL;
    *tpl = NULL;
    for (int i = 0; i < SITE_SCAN && pc + i < end && !*tpl; i++) {
        BCIns ins = pc[i];
        ptrdiff_t k;
        switch (bc_op(ins)) {
        case BC_TGETS:
        case BC_TSETS:
            k = ~(ptrdiff_t)bc_c(ins);
            break;
        case BC_TDUP:
            k = ~(ptrdiff_t)bc_d(ins);
            *tpl = gco2tab(gcref(kgc[k]));
            break;
        case BC_GGET:
        case BC_GSET:
        case BC_KSTR:
            k = ~(ptrdiff_t)bc_d(ins);
            break;
        default:
            continue;
        }
        if (!slot)
            slot = &kgc[k];
    }
    return slot;
}

/* The slot of the calling Lua function's frame that the return from the C call at f reads
 * first (the function, below the caller's base). */
static inline const void *caller_frame_slot(cTValue *f) { return frame_prevl(f) - 1; }

/* From inside a C function called from Lua: the calling Lua function's chunk and line,
 * straight from the frame (lua_getstack and lua_getinfo cost a thousand instructions more,
 * most of it formatting a name that rarely changes). The name is formatted only when the
 * chunk is another than *chunk. */
static void caller_where_changed(cTValue *f, const BCIns *pc, const void **chunk, char *file,
                                 size_t n, int32_t *line, const void **at,
                                 _Atomic(const void *) *site);

void ljx_caller_where(lua_State *L, const void **chunk, char *file, size_t n, int32_t *line,
                      const void **at, _Atomic(const void *) *site)
{
    cTValue *f = called_from_lua(L);
    if (!f)
        return;
    const BCIns *pc = frame_pc(f);
    /* the same call site as last time: line and chunk are written already, and the
     * prototype and its line table (cold in a state that waits most of the time) stay
     * untouched. The frame's slot may have moved (the coroutine's stack was grown or kept
     * for another body since): in a ring the hint had gone stale in 97% of the waits */
    if ((const void *)pc == *at) {
        const void *slot = caller_frame_slot(f);
        if (atomic_load_explicit(&site[LJX_SITE_FRAME], memory_order_relaxed) != slot)
            atomic_store_explicit(&site[LJX_SITE_FRAME], slot, memory_order_relaxed);
        return;
    }
    caller_where_changed(f, pc, chunk, file, n, line, at, site);
}

/* The rest, out of line: inlined, it made every wait save the registers it needs. */
static __attribute__((noinline)) void caller_where_changed(cTValue *f, const BCIns *pc,
                                                           const void **chunk, char *file, size_t n,
                                                           int32_t *line, const void **at,
                                                           _Atomic(const void *) *site)
{
    GCfunc *fn = caller_lua_func(f);
    if (!fn)
        return;
    *at = pc;
    GCproto *pt = funcproto(fn);
    /* what the return reads: the call instruction before pc, the frame's function and its
     * prototype's constants (kbase, from the function's bytecode start) */
    atomic_store_explicit(&site[LJX_SITE_PC], (const void *)(pc - 1), memory_order_relaxed);
    atomic_store_explicit(&site[LJX_SITE_PROTO], (const void *)&pt->k, memory_order_relaxed);
    /* the field the return reads: a closure is carved at 16 bytes, and its pc, 32 bytes in,
     * lies on the line after the header one time in two */
    atomic_store_explicit(&site[LJX_SITE_FN], (const void *)&fn->l.pc, memory_order_relaxed);
    atomic_store_explicit(&site[LJX_SITE_FRAME], caller_frame_slot(f), memory_order_relaxed);
    const GCtab *tpl;
    const void *k = site_constants(pt, pc, &tpl);
    atomic_store_explicit(&site[LJX_SITE_TEMPLATE], (const void *)tpl, memory_order_relaxed);
    atomic_store_explicit(&site[LJX_SITE_CONST], k, memory_order_relaxed);
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
    arena_map *map; /* where its pieces come from (NULL: mapped as LuaJIT maps them) */
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
    ar->map = arena_map_new();
    arena_map_creating(ar->map);
    ar->msp = lj_alloc_create(&ar->prng);
    arena_map_creating(NULL);
    if (!ar->msp) {
        arena_map_close(ar->map);
        free(ar);
        return NULL;
    }
    lj_alloc_setprng(ar->msp, &ar->prng);
    return ar;
}

void *ljx_arena_msp(void *ar) { return ((arena *)ar)->msp; }

arena_map *ljx_arena_map(void *ar) { return ((arena *)ar)->map; }

void ljx_arena_free(void *ar)
{
    if (!ar)
        return;
    lj_alloc_destroy(((arena *)ar)->msp);
    arena_map_close(((arena *)ar)->map);
    free(ar);
}

/* -- Resetting a state for reuse (the state pool) ------------------------------------------ */

/* Prefetches the lines of n bytes at p (a hint: p may be NULL when n is 0). Inlined with a
 * constant n, the loop unrolls into one instruction per line (counted by offset: a loop
 * bounded by an end address, which could wrap, stays a loop). */
static inline void prefetch_lines(const void *p, size_t n, int write)
{
    const char *c = p;
#pragma GCC unroll 16
    for (size_t off = 0; off < n; off += 64)
        if (write)
            __builtin_prefetch(c + off, 1);
        else
            __builtin_prefetch(c + off, 0);
}

_Static_assert(offsetof(GG_State, L) == 0, "a main lua_State is the start of its GG_State");

void ljx_state_prefetch(lua_State *L)
{
    /* a main state is its GG_State's first field (lua_newstate): G(L) would read L's line
     * before anything could be asked for */
    GG_State *gg = (GG_State *)(void *)L;
    /* the main state and the collector's fields, the hook's, the registry's and the JIT's */
    __builtin_prefetch(L, 1);
    __builtin_prefetch(&gg->g.gc, 1);
    __builtin_prefetch(&gg->g.hookmask, 1);
    __builtin_prefetch(&gg->g.registrytv);
    __builtin_prefetch(&gg->g.gcroot[GCROOT_BASEMT], 1);
    __builtin_prefetch(&gg->J.state);
    __builtin_prefetch(&gg->J.mcarea);
    __builtin_prefetch(&gg->J.flags, 1);
    __builtin_prefetch(&gg->J.param, 1);
    __builtin_prefetch(&gg->J.penaltyslot);
    __builtin_prefetch(&gg->J.penalty[PENALTY_SLOTS - 1]);
    prefetch_lines(gg->hotcount, sizeof gg->hotcount, 1);
}

void ljx_wake_prefetch(lua_State *L, lua_State *co, _Atomic(const void *) *site, int dispatch)
{
    GG_State *gg = (GG_State *)(void *)L;
    /* first: a core keeps a few dozen misses in flight and drops the prefetches past them (a
     * hint not set yet is NULL: a prefetch never faults) */
#pragma GCC unroll 6
    for (int i = 0; i < LJX_SITE_HINTS; i++)
        __builtin_prefetch(atomic_load_explicit(&site[i], memory_order_relaxed), 0);
    /* issued in this order: the compiler would mix them with the ones below */
    __asm__ volatile("" ::: "memory");
    /* the coroutine, the collector's counters (the resume's collection check), the VM state
     * and current thread the resume writes, the hot counters its loops count down */
    __builtin_prefetch(co, 1);
    prefetch_lines(&gg->g.gc, sizeof gg->g.gc, 1);
    __builtin_prefetch((const char *)gg + offsetof(GG_State, g.vmstate), 1); /* volatile */
    __builtin_prefetch(&gg->g.cur_L, 1);
    prefetch_lines(gg->hotcount, sizeof gg->hotcount, 1);
    /* the interpreter's dispatch table, a handler's address per bytecode (each state has its
     * own): the first run of a loop after a wait reads a line of it per opcode. Not for a
     * wake that runs next (see core/scheduler.c's make_runnable): the branch predictor runs
     * ahead of those reads, and its 13 prefetches held the waker up */
    if (dispatch)
        prefetch_lines(gg->dispatch, BC__MAX * sizeof(ASMFunction), 0);
}

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
     * yet swept, one whose metatable has a __gc must have it run at this actor's end. One
     * without (a released channel object: its spent metatable has none) is inert: the reset
     * leaves it unreachable, and the next tenant's collector frees it with nothing to run. */
    for (GCobj *o = gcref(mainthread(g)->nextgc); o != NULL; o = gcref(o->gch.nextgc)) {
        if (o->gch.gct != ~LJ_TUDATA)
            return 0;
        /* gcref before tabref: the latter takes a member's address, a null one's too */
        if (gcref(gco2ud(o)->metatable) != NULL &&
            lj_meta_fastg(g, tabref(gco2ud(o)->metatable), MM_gc) != NULL)
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

/* -- The image of a pooled state ---------------------------------------------------------
 *
 * What a reset would otherwise empty and the next actor's boot build again (the globals and
 * their metatable, the libraries the last actors opened, the runtime's per-state tables) is
 * kept instead, as it was right after it was made: every table reachable from the registry,
 * the globals and the base-type metatables has its array part, hash nodes and metatable
 * copied into a userdata, and every object those copies refer to is anchored in a table of
 * the registry (a tenant may drop a library function from its table; the copy still names
 * it). A reset then writes the copies back over the tables, so whatever a tenant stored,
 * replaced or removed in them is undone. Without the debug library (the caller does not
 * restore a state whose tenant opened it) and the FFI (such a state is never reset), Lua
 * code can change nothing else of these objects: a C function's environment and upvalues
 * are out of reach (setfenv refuses one), strings are immutable, and the one userdata of
 * the standard libraries (math.random's state) is copied too. Threads, cdata
 * and userdata of other kinds make the image impossible (ljx_image_take fails), as does a
 * Lua function with upvalues (of one without, its environment and its prototype's JIT flags
 * are kept). */

typedef struct img_tab {
    GCtab *t, *mt;
    uint32_t asize, hmask;
    Node *node; /* t's node array, which the copy's chain links point into (moved with it) */
    Node *freetop;
    TValue *array; /* t's array part: where the write-back's prefetch looks */
    size_t off;    /* the copy in image.bytes: asize TValues, then hmask + 1 Nodes */
} img_tab;

typedef struct img_ud {
    GCudata *u;
    size_t off;
} img_ud;

/* A Lua function of a library (LuaJIT writes a few in Lua: table.remove, string.len...):
 * setfenv may give it another environment, jit.off(f) marks its prototype. */
typedef struct img_fn {
    GCfunc *fn;
    GCtab *env;
    uint8_t ptflags; /* of which PROTO_NOJIT is written back */
} img_fn;

#define IMG_MAGIC 0x696d6731u
#define IMG_MAXOBJ 256 /* tables, functions and userdata; more and there is no image */
#define IMG_NBASEMT (GCROOT_BASEMT_NUM - GCROOT_BASEMT + 1)

struct ljx_image {
    uint32_t magic, ntab, nud, nfn;
    GCtab *reg, *env;
    GCtab *keep; /* the anchor: registry[key] (see ljx_image_take) */
    /* the last body loaded (ljx_image_keep_load): keep[2] and keep[0], which anchor them,
     * read from here by the next boot (one line, which the pool's take asks for early) */
    GCstr *body_bc;
    GCfunc *body_fn;
    /* where the state's kept coroutine and its stack were at the last reset: only ever
     * prefetched (ljx_image_boot_prefetch), never read through */
    const void *co_hint, *co_stack_hint;
    GCRef basemt[IMG_NBASEMT];
    size_t total; /* the heap right after the image was taken */
    size_t size;  /* of the whole payload */
    /* img_tab[ntab], img_ud[nud], img_fn[nfn], then the bytes */
};
typedef struct ljx_image image;

static img_tab *img_tabs(image *im) { return (img_tab *)(im + 1); }
static img_ud *img_uds(image *im) { return (img_ud *)(img_tabs(im) + im->ntab); }
static img_fn *img_fns(image *im) { return (img_fn *)(img_uds(im) + im->nud); }
static char *img_bytes(image *im) { return (char *)(img_fns(im) + im->nfn); }

typedef struct img_walk {
    GCobj *obj[IMG_MAXOBJ]; /* tables, functions and userdata seen (in that order found) */
    int nobj;
    int failed;
} img_walk;

static void walk_add(img_walk *w, GCobj *o)
{
    if (o == NULL || w->failed)
        return;
    for (int i = 0; i < w->nobj; i++)
        if (w->obj[i] == o)
            return;
    if (w->nobj == IMG_MAXOBJ) {
        w->failed = 1;
        return;
    }
    w->obj[w->nobj++] = o;
}

static void walk_tv(img_walk *w, cTValue *o)
{
    if (tvistab(o) || tvisfunc(o) || tvisudata(o))
        walk_add(w, gcV(o));
    else if (tvisthread(o) || tviscdata(o))
        w->failed = 1;
}

/* Visits everything reachable from the objects in w (which grows as it goes). */
static void walk_all(img_walk *w)
{
    for (int i = 0; i < w->nobj && !w->failed; i++) {
        GCobj *o = w->obj[i];
        if (o->gch.gct == ~LJ_TTAB) {
            GCtab *t = gco2tab(o);
            for (uint32_t j = 0; j < t->asize; j++)
                walk_tv(w, arrayslot(t, j));
            Node *node = noderef(t->node);
            for (uint32_t j = 0; t->hmask && j <= t->hmask; j++) {
                if (tvisnil(&node[j].val))
                    continue;
                walk_tv(w, &node[j].key);
                walk_tv(w, &node[j].val);
            }
            walk_add(w, gcref(t->metatable));
        } else if (o->gch.gct == ~LJ_TFUNC) {
            GCfunc *fn = gco2func(o);
            if (isluafunc(fn) && fn->l.nupvalues != 0) {
                w->failed = 1;
                return;
            }
            walk_add(w, gcref(fn->c.env));
            if (isluafunc(fn))
                continue;
            for (int u = 0; u < fn->c.nupvalues; u++)
                walk_tv(w, &fn->c.upvalue[u]);
        } else { /* userdata */
            GCudata *ud = gco2ud(o);
            if (ud->udtype != UDTYPE_USERDATA || gcref(ud->metatable) != NULL) {
                w->failed = 1;
                return;
            }
            walk_add(w, gcref(ud->env));
        }
    }
}

static size_t tab_bytes(const GCtab *t)
{
    size_t n = t->asize * sizeof(TValue);
    if (t->hmask)
        n += (t->hmask + 1) * sizeof(Node);
    return n;
}

/* Pushes v onto the anchor table (at its next array index). */
static void anchor(lua_State *L, GCtab *keep, GCobj *o, int32_t *n)
{
    TValue v;
    setgcV(L, &v, o, ~(uint32_t)o->gch.gct);
    int32_t i = ++*n; /* lj_tab_setint is a macro that reads its key twice */
    copyTV(L, lj_tab_setint(L, keep, i), &v);
    lj_gc_anybarriert(L, keep);
}

/* The strings among a table's keys and values (its other objects are in the image). */
static void anchor_strings(lua_State *L, GCtab *keep, const GCtab *t, int32_t *n)
{
    for (uint32_t j = 0; j < t->asize; j++)
        if (tvisstr(arrayslot(t, j)))
            anchor(L, keep, gcV(arrayslot(t, j)), n);
    Node *node = noderef(t->node);
    for (uint32_t j = 0; t->hmask && j <= t->hmask; j++) {
        if (tvisnil(&node[j].val))
            continue;
        if (tvisstr(&node[j].key))
            anchor(L, keep, gcV(&node[j].key), n);
        if (tvisstr(&node[j].val))
            anchor(L, keep, gcV(&node[j].val), n);
    }
}

static uint32_t count_strings(const GCtab *t)
{
    uint32_t n = 0;
    for (uint32_t j = 0; j < t->asize; j++)
        n += tvisstr(arrayslot(t, j));
    Node *node = noderef(t->node);
    for (uint32_t j = 0; t->hmask && j <= t->hmask; j++)
        if (!tvisnil(&node[j].val))
            n += tvisstr(&node[j].key) + tvisstr(&node[j].val);
    return n;
}

/* Gives t room for `room` more keys in its hash part and `aroom` more integer keys in its
 * array part: a table written back full would be rehashed by the first key an actor adds,
 * and resized back by the next reset. With fit, a larger hash part is shrunk to that (the
 * globals table of a new state has 64 slots, for one key until a library opens). */
static void make_room(lua_State *L, GCtab *t, uint32_t aroom, uint32_t room, int fit)
{
    uint32_t used = 0;
    Node *node = noderef(t->node);
    for (uint32_t j = 0; t->hmask && j <= t->hmask; j++)
        used += !tvisnil(&node[j].val);
    uint32_t hbits = 0;
    while ((1u << hbits) < used + room)
        hbits++;
    uint32_t asize = t->asize;
    while (asize > 1 && tvisnil(arrayslot(t, asize - 1)))
        asize--;
    asize += aroom;
    uint32_t have = t->hmask ? t->hmask + 1 : 0;
    if (have < (1u << hbits) || (fit && have > (1u << hbits)) || t->asize < asize)
        lj_tab_resize(L, t, asize > t->asize ? asize : t->asize, hbits);
}

ljx_image *ljx_image_take(lua_State *L, const void *key)
{
    global_State *g = G(L);
    if (!tvistab(registry(L)))
        return NULL;
    GCtab *reg = tabV(registry(L));
    /* an actor's own entries: its coroutine, a smarm.exit reason, channel endpoints, caches,
     * and the image's anchor */
    make_room(L, reg, 4, 9, 0);
    GCtab *env = tabref(L->env);
    if (env != reg)
        make_room(L, env, 0, 8, 1);
    /* the anchor's key goes in now (with a stand-in value): the copies are sized from the
     * walk, and the registry must not grow in between */
    lua_pushlightuserdata(L, (void *)key);
    lua_pushboolean(L, 1);
    lua_rawset(L, LUA_REGISTRYINDEX);
    img_walk *w = calloc(1, sizeof *w);
    if (w == NULL)
        return NULL;
    walk_add(w, obj2gco(reg));
    walk_add(w, obj2gco(env));
    for (int i = 0; i < IMG_NBASEMT; i++)
        walk_add(w, gcref(g->gcroot[GCROOT_BASEMT + i]));
    walk_all(w);
    if (w->failed) {
        free(w);
        return NULL;
    }
    uint32_t ntab = 0, nud = 0, nfn = 0, nstr = 0;
    size_t bytes = 0;
    for (int i = 0; i < w->nobj; i++) {
        GCobj *o = w->obj[i];
        if (o->gch.gct == ~LJ_TTAB) {
            ntab++;
            bytes += tab_bytes(gco2tab(o));
            nstr += count_strings(gco2tab(o));
        } else if (o->gch.gct == ~LJ_TUDATA) {
            nud++;
            bytes += gco2ud(o)->len;
        } else if (isluafunc(gco2func(o))) {
            nfn++;
        }
    }
    size_t size = sizeof(image) + ntab * sizeof(img_tab) + nud * sizeof(img_ud) +
                  nfn * sizeof(img_fn) + bytes;
    /* the anchor goes into the registry before the copies, so that the registry's copy holds
     * it: keep[1] the image, keep[0] and keep[2] a body's (ljx_image_load), then the image's
     * objects and strings */
    lua_createtable(L, (int)(2 + w->nobj + nstr), 0);
    GCtab *keep = tabV(L->top - 1);
    lua_pushlightuserdata(L, (void *)key);
    lua_pushvalue(L, -2);
    lua_rawset(L, LUA_REGISTRYINDEX); /* the key is there: no new node, no rehash */
    lua_pop(L, 1);
    image *im = lua_newuserdata(L, size);
    /* from here on nothing allocates but the anchor table, which is not in the image */
    memset(im, 0, sizeof *im);
    im->ntab = ntab;
    im->nud = nud;
    im->nfn = nfn;
    im->reg = reg;
    im->env = env;
    im->keep = keep;
    im->size = size;
    for (int i = 0; i < IMG_NBASEMT; i++)
        im->basemt[i] = g->gcroot[GCROOT_BASEMT + i];
    int32_t n = 0;
    anchor(L, keep, gcV(L->top - 1), &n);
    lua_pop(L, 1);
    n = 2; /* keep[2] and keep[0]: a body's bytecode and function (ljx_image_load) */
    img_tab *tt = img_tabs(im);
    img_ud *uu = img_uds(im);
    img_fn *ff = img_fns(im);
    char *b = img_bytes(im);
    size_t off = 0;
    for (int i = 0; i < w->nobj; i++) {
        GCobj *o = w->obj[i];
        anchor(L, keep, o, &n);
        if (o->gch.gct == ~LJ_TTAB) {
            GCtab *t = gco2tab(o);
            if (off + tab_bytes(t) > bytes) { /* it grew since the walk: no image (no magic) */
                free(w);
                return NULL;
            }
            img_tab *r = tt++;
            r->t = t;
            r->mt = (GCtab *)gcref(t->metatable); /* tabref() of NULL is UB */
            r->asize = t->asize;
            r->hmask = t->hmask;
            r->node = noderef(t->node);
            r->freetop = mref(t->freetop, Node);
            r->array = tvref(t->array);
            r->off = off;
            if (t->asize) /* no array part: a NULL one */
                memcpy(b + off, tvref(t->array), t->asize * sizeof(TValue));
            off += t->asize * sizeof(TValue);
            if (t->hmask) {
                memcpy(b + off, r->node, (t->hmask + 1) * sizeof(Node));
                off += (t->hmask + 1) * sizeof(Node);
            }
        } else if (o->gch.gct == ~LJ_TUDATA) {
            GCudata *ud = gco2ud(o);
            if (off + ud->len > bytes) {
                free(w);
                return NULL;
            }
            img_ud *r = uu++;
            r->u = ud;
            r->off = off;
            memcpy(b + off, uddata(ud), ud->len);
            off += ud->len;
        } else if (isluafunc(gco2func(o))) {
            GCfunc *fn = gco2func(o);
            img_fn *r = ff++;
            r->fn = fn;
            r->env = tabref(fn->l.env);
            r->ptflags = funcproto(fn)->flags;
        }
    }
    free(w);
    /* the strings the copies hold (tables, functions and userdata were anchored above) */
    tt = img_tabs(im);
    for (uint32_t i = 0; i < ntab; i++)
        anchor_strings(L, keep, tt[i].t, &n);
    im->total = (size_t)g->gc.total;
    im->magic = IMG_MAGIC;
    return im;
}

/* Where the last lookups of a key in a state found it, per thread: the index of its node in
 * the registry's hash part, in a table indexed by a hash of the key and the state. A hint is
 * only a guess: it is used when the node it names lies in the registry's node array and
 * holds a light userdata that decodes, in this state, to the key, whatever state the hint
 * was taken from (another state since freed, a registry resized or edited through
 * debug.getregistry since). The full lookup first turns the address into the state's light
 * userdata bits (lj_lightud_intern, a search of the state's segment list), then hashes
 * them: about 150 instructions, seven times in a gen_server call. */
#define REG_HINTS_LOG 6 /* in pairs */
static __thread struct reg_hint {
    const void *key;
    uint32_t idx;
} reg_hints[1 << REG_HINTS_LOG];

/* The pair of hints for key in L's state. */
static inline struct reg_hint *hints_of(lua_State *L, const void *key)
{
    uintptr_t mix = ((uintptr_t)key ^ (uintptr_t)G(L)) * 0x9E3779B97F4A7C15ull;
    return &reg_hints[(mix >> (64 - REG_HINTS_LOG)) & ~(uintptr_t)1];
}

/* The node of L's registry t holding key that one of the pair at h names, or NULL. Its
 * value may be nil (a key set to nil keeps its node until the table is rehashed). */
static inline Node *hinted(lua_State *L, const GCtab *t, const void *key, const struct reg_hint *h)
{
    for (int i = 0; i < 2; i++)
        if (h[i].key == key && h[i].idx <= t->hmask) {
            Node *n = &noderef(t->node)[h[i].idx];
            if (tvislightud(&n->key) && lightudV(G(L), &n->key) == key)
                return n;
        }
    return NULL;
}

/* Leaves a hint in h[0] for key, whose value slot in t is v (if it is in t's hash part); the
 * older hint moves to h[1], so two keys of two states that hash alike both keep theirs. */
static void hint(const GCtab *t, const void *key, cTValue *v, struct reg_hint *h)
{
    /* the value of a key in the hash part is its node's first field */
    const Node *node = noderef(t->node);
    if (v >= &node[0].val && v <= &node[t->hmask].val) {
        h[1] = h[0];
        h[0].key = key;
        h[0].idx = (uint32_t)((const Node *)(const void *)v - node);
    }
}

/* -- The state's roots -----------------------------------------------------------------------
 *
 * An array only the runtime reaches, anchored as the base metatable of upvalues: no Lua value
 * is an upvalue, so nothing in Lua (the debug library included) leads to it, and the
 * collector marks it as a root. Slots [0, LJX_ROOTS_FLAT) are flat.c's; then a cache of the
 * registry's light-userdata keys (the runtime's own: metatables, a wait's anchor), RC_N
 * entries of (the key's address, the value), one per key hash, then the strings the
 * decoder made last (ljx_push_short_string). The registry's cache sits in front of the
 * hinted lookup: a hit is a load of the roots and of the entry, where the lookup checked the
 * hint's node and turned its light userdata back into an address (70 instructions, eight
 * times in a gen_server call). A reset state has the roots of its image (taken with the
 * registry they cache) or none. */
#define RC_BASE LJX_ROOTS_FLAT
#define RC_N 16
#define SC_BASE (RC_BASE + 2 * RC_N) /* then the decoder's strings (ljx_push_short_string) */
#define SC_N 16
#define WAIT_AT (SC_BASE + SC_N) /* what a parked wait scans (ljx_wait_anchor) */
#define ROOTS_SIZE (WAIT_AT + 1)

static inline GCtab *roots_of(lua_State *L)
{
    GCobj *o = gcref(basemt_it(G(L), LJ_TUPVAL));
    /* checked all the same: a wrong guess about reachability must not become a stray write */
    return o && o->gch.gct == ~LJ_TTAB && gco2tab(o)->asize == ROOTS_SIZE ? gco2tab(o) : NULL;
}

void *ljx_roots(lua_State *L) { return roots_of(L); }

/* ljx_roots_made's first use, out of line: its callers (every flat decode, every short
 * string a decoder makes) keep only the test of roots_of inline. */
static __attribute__((noinline)) GCtab *roots_make(lua_State *L)
{
    GCtab *r = lj_tab_new(L, ROOTS_SIZE, 0);
    /* a root: the atomic phase marks the roots again, so no barrier is due */
    setgcref(basemt_it(G(L), LJ_TUPVAL), obj2gco(r));
    return r;
}

void *ljx_roots_made(lua_State *L)
{
    GCtab *r = roots_of(L);
    return r ? r : roots_make(L);
}

/* The entry of r that key hashes to. */
static inline TValue *roots_entry(GCtab *r, const void *key)
{
    uintptr_t h = ((uintptr_t)key * 0x9E3779B97F4A7C15ull) >> 60;
    return tvref(r->array) + RC_BASE + 2 * h;
}

/* The cached entry of key in r (its value non-nil), or NULL. An entry's key is the address's
 * bits as a double's (a user-space address is a denormal number: the collector passes it by),
 * compared without a conversion. */
static inline TValue *roots_cached(GCtab *r, const void *key)
{
    TValue *e = roots_entry(r, key);
    return e[0].u64 == (uint64_t)(uintptr_t)key ? e : NULL;
}

/* Caches registry[key] = v in r (NULL: no roots, nothing to do); a nil v empties key's
 * entry if key holds it. */
static void roots_cache(lua_State *L, GCtab *r, const void *key, cTValue *v)
{
    if (!r)
        return;
    TValue *e = roots_entry(r, key);
    if (tvisnil(v)) {
        if (roots_cached(r, key)) {
            setnilV(&e[0]);
            setnilV(&e[1]);
        }
        return;
    }
    e[0].u64 = (uint64_t)(uintptr_t)key;
    copyTV(L, &e[1], v);
    lj_gc_anybarriert(L, r);
}

/* The roots' slot for a short string: by its length and its first and last bytes (the tags
 * and keys of one protocol differ there). */
static inline TValue *short_slot(GCtab *r, const char *s, size_t n)
{
    unsigned h = n ? (unsigned)n + (unsigned char)s[0] * 5u + (unsigned char)s[n - 1] * 3u : 0;
    return tvref(r->array) + SC_BASE + (h & (SC_N - 1));
}

/* The other slot of e's pair (short_cached). */
static inline TValue *short_pair(GCtab *r, TValue *e)
{
    TValue *base = tvref(r->array) + SC_BASE;
    return base + ((size_t)(e - base) ^ 1);
}

static inline int short_hit(cTValue *e, const char *s, size_t n)
{
    return tvisstr(e) && strV(e)->len == n && bytes_eq(strVdata(e), s, n);
}

/* The string of those n bytes if the cache holds it, else NULL (a miss, a longer string, or
 * a state whose roots are not made yet). Makes no call: its callers need no frame for a hit
 * (a hit took 65 instructions, 19 of them saving and restoring registers). A string is in its
 * slot or in the slot's pair (the slot with the last bit flipped): direct-mapped, two strings
 * that a message decodes one after the other and that share a slot pushed each other out at
 * every message (a gen_server call's protocol tag, random per process, took the slot of one
 * of the request's keys in 5 runs out of 16, and its six strings cost 300 more
 * instructions a call). */
static inline GCstr *short_cached(lua_State *L, const char *s, size_t n)
{
    GCtab *r = n <= LJX_SHORT_STRING ? roots_of(L) : NULL;
    if (!r)
        return NULL;
    TValue *e = short_slot(r, s, n);
    if (short_hit(e, s, n))
        return strV(e);
    TValue *pair = short_pair(r, e);
    return short_hit(pair, s, n) ? strV(pair) : NULL;
}

/* A miss, out of line (both callers reach it by a tail call): the string, kept in its slot
 * (what the slot held moves to the pair: of two strings that share a slot, both stay); the
 * roots are made on a state's first short string. With push, made after a
 * collector step and pushed, as lua_pushlstring would. */
static __attribute__((noinline)) GCstr *short_miss(lua_State *L, const char *s, size_t n, int push)
{
    if (push)
        lj_gc_check(L);
    GCtab *r = n <= LJX_SHORT_STRING ? ljx_roots_made(L) : NULL;
    GCstr *str = lj_str_new(L, s, n);
    if (r) {
        TValue *e = short_slot(r, s, n);
        if (!tvisnil(e))
            copyTV(L, short_pair(r, e), e);
        setstrV(L, e, str);
        lj_gc_anybarriert(L, r);
    }
    if (push) {
        setstrV(L, L->top, str);
        incr_top(L);
    }
    return str;
}

void ljx_push_short_string(lua_State *L, const char *s, size_t n)
{
    GCstr *str = short_cached(L, s, n);
    if (!str) {
        short_miss(L, s, n, 1);
        return;
    }
    setstrV(L, L->top, str);
    incr_top(L);
}

void *ljx_short_string(lua_State *L, const char *s, size_t n)
{
    GCstr *str = short_cached(L, s, n);
    return str ? str : short_miss(L, s, n, 0);
}

int ljx_short_string_cached(lua_State *L, const char *s, size_t n)
{
    return short_cached(L, s, n) != NULL;
}

/* registry_lookup without a usable hint: looks the key up and leaves one. */
static __attribute__((noinline)) cTValue *registry_lookup_slow(lua_State *L, GCtab *t,
                                                               const void *key, struct reg_hint *h)
{
    TValue k;
    setrawlightudV(&k, lj_lightud_intern(L, (void *)key));
    cTValue *v = lj_tab_get(L, t, &k);
    hint(t, key, v, h);
    return v;
}

/* registry[key] for a light userdata key, or NULL when the registry is not a table. The
 * hint's case makes no call, so it needs no frame. */
static inline cTValue *registry_lookup(lua_State *L, const void *key)
{
    if (!tvistab(registry(L)))
        return NULL;
    GCtab *t = tabV(registry(L));
    struct reg_hint *h = hints_of(L, key);
    Node *n = hinted(L, t, key, h);
    return n && !tvisnil(&n->val) ? &n->val : registry_lookup_slow(L, t, key, h);
}

static inline cTValue *stack_slot(lua_State *L, int idx);

void ljx_registry_set(lua_State *L, const void *key, int idx)
{
    TValue v;
    cTValue *o = stack_slot(L, idx); /* NULL for 0 */
    if (o)
        copyTV(L, &v, o);
    else
        setnilV(&v);
    if (!tvistab(registry(L)))
        return;
    GCtab *t = tabV(registry(L));
    struct reg_hint *h = hints_of(L, key);
    Node *n = hinted(L, t, key, h);
    TValue *slot;
    if (n) {
        slot = &n->val;
    } else {
        TValue k;
        setrawlightudV(&k, lj_lightud_intern(L, (void *)key));
        slot = lj_tab_set(L, t, &k); /* may make the node (and rehash) */
        hint(t, key, slot, h);
    }
    copyTV(L, slot, &v);
    lj_gc_anybarriert(L, t);
    /* after the registry's store, which may raise (out of memory) before anything changed */
    roots_cache(L, tvisnil(&v) ? roots_of(L) : ljx_roots_made(L), key, &v);
}

void ljx_wait_anchor(lua_State *L, int idx)
{
    cTValue *o = stack_slot(L, idx); /* NULL for 0 */
    GCtab *r = o ? ljx_roots_made(L) : roots_of(L);
    if (!r)
        return;
    TValue *e = tvref(r->array) + WAIT_AT;
    if (o) {
        copyTV(L, e, o);
        lj_gc_anybarriert(L, r);
    } else {
        setnilV(e);
    }
}

int ljx_wait_anchored(lua_State *L)
{
    GCtab *r = roots_of(L);
    if (!r || tvisnil(tvref(r->array) + WAIT_AT))
        return 0;
    copyTV(L, L->top, tvref(r->array) + WAIT_AT);
    incr_top(L);
    return 1;
}

/* ljx_registry_get past the roots' cache (r: the roots, or NULL). */
static __attribute__((noinline)) int registry_get_slow(lua_State *L, GCtab *r, const void *key)
{
    cTValue *v = registry_lookup(L, key);
    if (v == NULL || tvisnil(v))
        return 0;
    copyTV(L, L->top, v);
    incr_top(L);
    roots_cache(L, r, key, v);
    return 1;
}

/* The cache's hit makes no call, so it needs no frame. */
int ljx_registry_get(lua_State *L, const void *key)
{
    GCtab *r = roots_of(L);
    TValue *e = r ? roots_cached(r, key) : NULL;
    if (__builtin_expect(e == NULL, 0))
        return registry_get_slow(L, r, key);
    copyTV(L, L->top, &e[1]);
    incr_top(L);
    return 1;
}

/* im, if it is L's image, or NULL. The image is anchored in L's registry, which no tenant
 * whose state is written back could reach (it had no debug library), so the pointer the
 * pool kept beside the state names it still: the checks only catch a caller's mix-up. Kept
 * beside the state, the image costs no walk to the registry's node and the anchor table,
 * three misses in a row in a state that has been cold since its boot. */
static image *image_valid(lua_State *L, ljx_image *im)
{
    if (im == NULL || !tvistab(registry(L)) || im->magic != IMG_MAGIC ||
        im->reg != tabV(registry(L)))
        return NULL;
    return im;
}

/* -- A spawned body's function, loaded once per state --------------------------------------
 *
 * Spawns of one function hand each of its actors the same bytecode. A state with an image
 * keeps the last body it loaded (its bytecode, and a closure of its prototype) beside the
 * image, and makes the next actor's body from that prototype when the bytecode is the same:
 * a prototype is constant to Lua code, except through the jit library (jit.util.funck hands
 * out its template tables, jit.off marks it), whose tenants never get a state written back. */

int ljx_image_load(lua_State *L, ljx_image *hint, const char *bc, size_t len)
{
    image *im = image_valid(L, hint);
    if (im == NULL || im->body_bc == NULL)
        return 0;
    GCstr *s = im->body_bc;
    GCfunc *fn = im->body_fn;
    __builtin_prefetch(fn);
    if (s->len != len || memcmp(strdata(s), bc, len) != 0)
        return 0;
    if (funcproto(fn)->flags & PROTO_ILOOP) /* blacklisted loops: a new prototype compiles again */
        return 0;
    /* the kept closure itself is the body (it has no upvalues): its environment, which the
     * last body may have replaced (setfenv), is the globals again */
    GCtab *env = tabref(L->env);
    setgcref(fn->l.env, obj2gco(env));
    lj_gc_objbarrier(L, fn, env);
    setfuncV(L, L->top, fn);
    incr_top(L);
    return 1;
}

void ljx_image_keep_load(lua_State *L, ljx_image *hint, const char *bc, size_t len)
{
    image *im = image_valid(L, hint);
    cTValue *f = L->top - 1;
    if (im == NULL || im->keep->asize <= 2 || !tvisfunc(f) || !isluafunc(funcV(f)))
        return;
    GCtab *keep = im->keep;
    GCfunc *fn = lj_func_newL_empty(L, funcproto(funcV(f)), tabref(L->env));
    setfuncV(L, arrayslot(keep, 0), fn);
    lj_gc_anybarriert(L, keep);
    GCstr *s = lj_str_new(L, bc, len);
    setstrV(L, arrayslot(keep, 2), s);
    im->body_fn = fn;
    im->body_bc = s;
}

static Node *rebased(Node *p, Node *from, Node *to) { return p ? to + (p - from) : NULL; }

static void restore_tab(lua_State *L, img_tab *r, char *bytes)
{
    GCtab *t = r->t;
    if (t->asize != r->asize || t->hmask != r->hmask) {
        /* the tenant grew it: emptied first, nothing is moved over */
        lj_tab_clear(t);
        uint32_t hbits = r->hmask ? (uint32_t)__builtin_ctz(r->hmask + 1) : 0;
        lj_tab_resize(L, t, r->asize, hbits);
        r->array = tvref(t->array); /* where the next write-back's prefetch looks */
    }
    if (r->asize)
        memcpy(tvref(t->array), bytes, r->asize * sizeof(TValue));
    if (r->hmask) {
        Node *node = noderef(t->node);
        Node *copy = (Node *)(bytes + r->asize * sizeof(TValue));
        if (node != r->node) {
            /* the node array moved (resized above, now or at an earlier write-back): the
             * copy's chain links are moved with it, once, and every later write-back is a
             * plain copy again */
            for (uint32_t j = 0; j <= r->hmask; j++)
                setmref(copy[j].next, rebased(mref(copy[j].next, Node), r->node, node));
            r->freetop = rebased(r->freetop, r->node, node);
            r->node = node;
        }
        memcpy(node, copy, (r->hmask + 1) * sizeof(Node));
        setmref(t->freetop, r->freetop);
    }
    setgcrefp(t->metatable, r->mt); /* may be NULL */
    t->nomm = 0;
    lj_gc_anybarriert(L, t);
}

/* The header and the first lines of its table list, without a read of im (it would wait for
 * the first line) */
void ljx_image_prefetch(const ljx_image *im)
{
    __builtin_prefetch(im);
    __builtin_prefetch((const char *)im + 64);
    __builtin_prefetch((const char *)im + 128);
}

void ljx_image_keep_thread(ljx_image *im, lua_State *co)
{
    im->co_hint = co;
    im->co_stack_hint = tvref(co->stack);
}

void ljx_image_boot_prefetch(lua_State *L, ljx_image *hint)
{
    image *im = image_valid(L, hint);
    if (im == NULL)
        return;
    /* the registry's array (its index 1 holds the kept coroutine: the image's first table is
     * the registry), the coroutine and its stack (which the boot clears), the last body */
    img_tab *tt = img_tabs(im);
    if (im->ntab && tt[0].t == im->reg)
        __builtin_prefetch(tt[0].array);
    __builtin_prefetch(im->co_hint, 1);
    if (im->co_stack_hint)
        prefetch_lines(im->co_stack_hint, 128, 1);
    __builtin_prefetch(im->body_bc);
    __builtin_prefetch(im->body_fn);
}

/* Asks for the lines the write-back touches first, all at once. At its actor's end a state's
 * image and the tables it covers were last touched at the boot, so they are cold; taken one
 * after the other, each header and then its array or node part was a miss of its own (in
 * tests/bench/timers.lua the write-back's misses were a tenth of the run). */
static void image_prefetch(image *im)
{
    img_tab *tt = img_tabs(im);
    /* the first line of each part: the copies run from there, where the hardware's own
     * prefetch follows them (every line of every part and of the image's bytes measured the
     * same, for 400 more instructions per reset) */
    for (uint32_t i = 0; i < im->ntab; i++) {
        __builtin_prefetch(tt[i].t, 1);
        __builtin_prefetch(tt[i].array, 1);
        __builtin_prefetch(tt[i].node, 1);
    }
    __builtin_prefetch(img_bytes(im));
}

/* Writes the image back; 0, or -1 if L has none (then nothing was changed). */
static int image_restore(lua_State *L, ljx_image *hint, size_t *total)
{
    global_State *g = G(L);
    image *im = image_valid(L, hint);
    if (im == NULL)
        return -1;
    image_prefetch(im);
    img_tab *tt = img_tabs(im);
    img_ud *uu = img_uds(im);
    char *b = img_bytes(im);
    for (uint32_t i = 0; i < im->ntab; i++)
        restore_tab(L, &tt[i], b + tt[i].off);
    for (uint32_t i = 0; i < im->nud; i++)
        memcpy(uddata(uu[i].u), b + uu[i].off, uu[i].u->len);
    img_fn *ff = img_fns(im);
    for (uint32_t i = 0; i < im->nfn; i++) {
        setgcref(ff[i].fn->l.env, obj2gco(ff[i].env));
        lj_gc_objbarrier(L, ff[i].fn, ff[i].env);
        GCproto *pt = funcproto(ff[i].fn);
        pt->flags = (uint8_t)((pt->flags & ~PROTO_NOJIT) | (ff[i].ptflags & PROTO_NOJIT));
    }
    for (int i = GCROOT_BASEMT; i < GCROOT_MAX; i++)
        setgcrefnull(g->gcroot[i]);
    for (int i = 0; i < IMG_NBASEMT; i++)
        g->gcroot[GCROOT_BASEMT + i] = im->basemt[i];
    setgcref(L->env, obj2gco(im->env));
    *total = im->total;
    return 0;
}

/* lj_state.c's starting stack size, not in a header */
#define THREAD_STACK_START (2 * LUA_MINSTACK + LJ_STACK_EXTRA)

int ljx_thread_renewable(lua_State *co)
{
    return co->status == LUA_OK && cframe_raw(co->cframe) == NULL && gcref(co->openupval) == NULL &&
           co->stacksize <= 8 * THREAD_STACK_START;
}

lua_State *ljx_thread_kept(lua_State *L)
{
    cTValue *o = tvistab(registry(L)) ? lj_tab_getint(tabV(registry(L)), 1) : NULL;
    if (o == NULL || !tvisthread(o))
        return NULL;
    lua_State *co = threadV(o);
    /* as lj_state_new's stack_init: slot 0 holds the thread itself, the frame starts above */
    TValue *st = tvref(co->stack) + 1 + LJ_FR2, *end = tvref(co->stack) + co->stacksize;
    co->base = co->top = st;
    while (st < end)
        setnilV(st++);
    /* NOBARRIER: a thread is never black */
    setgcrefr(co->env, L->env);
    return co;
}

int ljx_state_reset(lua_State *L, lua_State *from, size_t collect_at, ljx_image *im,
                    size_t *image_bytes, lua_State *keep)
{
    global_State *g = G(L);
    jit_State *J = L2J(L);
    lua_settop(L, 0);
    if (keep) { /* anchored on the stack through the reset's collection */
        setthreadV(L, L->top, keep);
        incr_top(L);
    }
    setgcref(g->cur_L, obj2gco(L));
    size_t base = 0;
    int restored = im != NULL && image_restore(L, im, &base) == 0;
    if (!restored) {
        /* NOBARRIER: a cycle under way is redone in full below; in the pause nothing is black */
        GCtab *reg = tvistab(registry(L)) ? tabV(registry(L)) : NULL;
        GCtab *env = tabref(L->env);
        if (env == reg)
            env = NULL;
        settabV(L, registry(L), emptied(L, reg, 16, 4));
        setgcref(L->env, obj2gco(emptied(L, env, 0, LJX_GLOBALS_HBITS)));
        for (int i = GCROOT_BASEMT; i < GCROOT_MAX; i++) /* base metatables, io's default files */
            setgcrefnull(g->gcroot[i]);
    }
    lua_sethook(L, NULL, 0, 0);
    g->gc.pause = LUAI_GCPAUSE;
    g->gc.stepmul = LUAI_GCMUL;
    /* flags (jit.off, optimisations), parameters (a retuned actor's), hot counters, and the
     * penalties of prototypes that are garbage now */
    ljx_jit_copy(L, from);
    lj_dispatch_init_hotcount(g);
    /* the penalty slots are taken in order from penaltyslot, which starts at 0: with it at 0
     * and the last slot empty, none was taken since the last reset (most states never record
     * a trace), and the 512-byte memset is skipped */
    if (J->penaltyslot != 0 || mref(J->penalty[PENALTY_SLOTS - 1].pc, const BCIns) != NULL) {
        memset(J->penalty, 0, sizeof J->penalty);
        J->penaltyslot = 0;
    }
    if (g->gc.state != GCSpause || g->gc.total > base + collect_at)
        lj_gc_fullgc(L);
    /* about the room lua_newstate leaves before the first cycle (collectgarbage("stop") left
     * it at the maximum) */
    g->gc.threshold = g->gc.total + 32 * 1024;
    *image_bytes = base;
    return restored;
}

/* The stack slot at idx (> 0 from the base, < 0 from the top; not a pseudo-index), or NULL
 * past the stack's ends: what lua_type's index2adr does, without its nil node. */
static inline cTValue *stack_slot(lua_State *L, int idx)
{
    cTValue *o;
    if (idx > 0) {
        o = L->base + (idx - 1);
        return o < L->top ? o : NULL;
    }
    if (idx == 0 || idx <= LUA_REGISTRYINDEX)
        return NULL;
    o = L->top + idx;
    return o >= L->base ? o : NULL;
}

int ljx_number_at(lua_State *L, int idx, double *d)
{
    cTValue *o = stack_slot(L, idx);
    if (!o || !tvisnum(o))
        return 0;
    *d = numV(o);
    return 1;
}

const char *ljx_string_at(lua_State *L, int idx, size_t *len)
{
    cTValue *o = stack_slot(L, idx);
    if (!o || !tvisstr(o))
        return NULL;
    *len = strV(o)->len;
    return strVdata(o);
}

void *ljx_udata_at(lua_State *L, int idx, size_t size)
{
    cTValue *o = stack_slot(L, idx);
    if (!o || !tvisudata(o) || udataV(o)->len != size)
        return NULL;
    return uddata(udataV(o));
}
