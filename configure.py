#!/usr/bin/env python3
"""Writes build.ninja for one build flavour of smarm-lua.

    ./configure.py                       release, ./build.ninja, builds into build/
    ./configure.py --flavour asan        build-asan/build.ninja, builds into build-asan/
    ./configure.py -o -                  print to stdout (the drift test uses this)

Sources are globbed when this runs (sorted, so the output is deterministic):
add a .c/.S/.lua file, rerun ./configure.py. Paths in the output are relative
to the repository root; run ninja from there (`ninja -f build-asan/build.ninja`).
LuaJIT comes from build/deps/luajit (scripts/setup) for every flavour.
"""

import argparse
import glob
import os
import sys

ROOT = os.path.dirname(os.path.abspath(__file__))

LUAJIT_DIR = "build/deps/luajit/src"
LUAJIT_A = LUAJIT_DIR + "/libluajit.a"
FFI_HEADER = "bindings/smarm_ffi.h"
# the shared library's soname carries the major version of smarm.h (0 while it may change)
def smarm_version():
    """SMARM_VERSION of runtime/include/smarm.h (the shared library's file name carries it)."""
    with open(os.path.join(ROOT, "runtime/include/smarm.h")) as f:
        for line in f:
            if line.startswith("#define SMARM_VERSION"):
                return line.split('"')[1]
    raise SystemExit("configure.py: no SMARM_VERSION in runtime/include/smarm.h")


SO_VERSION = smarm_version()
SO_ABI = SO_VERSION.split(".")[0]
SONAME = "libsmarm.so." + SO_ABI

COMMON_CFLAGS = [
    "-std=c11", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Wno-unused-parameter",
    "-fno-omit-frame-pointer", "-g", "-fPIC",
]

FLAVOURS = {
    "release": {"cc": "cc", "cflags": ["-O3", "-DNDEBUG", "-flto=auto", "-ffat-lto-objects"],
                "ldflags": ["-flto=auto", "-O3"]},
    "debug": {"cc": "cc", "cflags": ["-O0", "-DSMARM_DEBUG"], "ldflags": []},
    "asan": {
        "cc": "clang",
        "cflags": ["-O1", "-fsanitize=address,undefined",
                   "-fno-sanitize-recover=undefined", "-DSMARM_ASAN"],
        "ldflags": ["-fsanitize=address,undefined"],
    },
    "tsan": {
        "cc": "clang",
        "cflags": ["-O1", "-fsanitize=thread", "-DSMARM_TSAN"],
        "ldflags": ["-fsanitize=thread"],
    },
    # libFuzzer targets (tests/fuzz/*_fuzz.c) over ASan+UBSan runtime objects; the
    # default target is `fuzz` (the fuzzers alone).
    "fuzz": {
        "cc": "clang",
        "cflags": ["-O1", "-fsanitize=fuzzer-no-link,address,undefined",
                   "-fno-sanitize-recover=undefined", "-DSMARM_ASAN"],
        "ldflags": ["-fsanitize=address,undefined"],
        "fuzz": True,
    },
}

# runtime/src's folders, lowest layer first: each calls only downward
LAYERS = ["base", "core", "io", "vm", "lib"]



def find_ei():
    """erl_interface (Debian's erlang-dev): the newest
    /usr/lib/erlang/lib/erl_interface-*/ with include/ei.h and lib/libei.a; ERL_INTERFACE_DIR
    overrides. The distribution's term codec is built on it."""
    cands = [os.environ["ERL_INTERFACE_DIR"]] if os.environ.get("ERL_INTERFACE_DIR") else []
    roots = ["/usr/lib/erlang/lib", "/usr/local/lib/erlang/lib"]
    for root in roots:
        found = glob.glob(root + "/erl_interface-*")

        def version(p):
            return [int(x) if x.isdigit() else 0
                    for x in p.rsplit("-", 1)[1].split(".")]
        cands += sorted(found, key=version, reverse=True)
    for d in cands:
        if os.path.exists(d + "/include/ei.h") and os.path.exists(d + "/lib/libei.a"):
            return d
    sys.exit("configure.py: erl_interface not found (install erlang-dev, or set "
             "ERL_INTERFACE_DIR)")


EI_DIR = find_ei()
EI_A = EI_DIR + "/lib/libei.a"
LIBS = ["-lm", "-ldl", "-lpthread"]
TEST_LIBS = ["-lcmocka"] + LIBS
# the command line alone: its shell edits lines with libedit (BSD licence)
CLI_LIBS = ["-ledit"] + LIBS


def sorted_glob(pattern):
    return sorted(glob.glob(pattern, recursive=True))


def stem(path):
    return os.path.splitext(os.path.basename(path))[0]


def obj(builddir, src):
    """build/obj/<src path without extension>.o (generated sources keep their place)."""
    if src.startswith(builddir + "/"):
        src = src[len(builddir) + 1:]
    return "%s/obj/%s.o" % (builddir, os.path.splitext(src)[0])


class Writer:
    def __init__(self):
        self.lines = []

    def line(self, text=""):
        self.lines.append(text)

    def var(self, name, value, indent=0):
        if isinstance(value, list):
            value = " ".join(value)
        self.line(("%s%s = %s" % ("  " * indent, name, value)).rstrip())

    def build(self, outputs, rule, inputs=(), implicit=(), order_only=(),
              implicit_outputs=(), variables=()):
        text = "build " + " ".join(outputs)
        if implicit_outputs:
            text += " | " + " ".join(implicit_outputs)
        text += ": " + rule
        if inputs:
            text += " " + " ".join(inputs)
        if implicit:
            text += " | " + " ".join(implicit)
        if order_only:
            text += " || " + " ".join(order_only)
        self.line(text)
        for name, value in variables:
            self.var(name, value, indent=1)

    def rule(self, name, command, description, **extra):
        self.line("rule " + name)
        self.var("command", command, indent=1)
        self.var("description", description, indent=1)
        for key in sorted(extra):
            self.var(key, extra[key], indent=1)
        self.line()

    def text(self):
        return "\n".join(self.lines) + "\n"


def generate(flavour, cc, regen_path):
    configure_cmd = "python3 configure.py --flavour " + flavour
    if cc != FLAVOURS[flavour]["cc"]:
        configure_cmd += " --cc " + cc
    conf = FLAVOURS[flavour]
    builddir = "build" if flavour == "release" else "build-" + flavour
    gen = builddir + "/gen"

    # the layers, lowest first (see docs/DESIGN.md), then the file that wires them
    runtime_srcs = []
    for layer in LAYERS:
        runtime_srcs += sorted_glob("runtime/src/%s/*.c" % layer)
        runtime_srcs += sorted_glob("runtime/src/%s/*.S" % layer)
    runtime_srcs += sorted_glob("runtime/src/*.c")
    cli_srcs = sorted_glob("runtime/cli/*.c")
    test_srcs = sorted_glob("tests/c/*_test.c")
    helper_srcs = sorted_glob("tests/c/*_helper.c")
    lua_srcs = sorted_glob("lua/**/*.lua")

    cdef_lua = gen + "/smarm_cdef.lua"
    embedded_c = gen + "/smarm_embedded.c"
    embedded_h = gen + "/smarm_embedded.h"

    w = Writer()
    w.line("# Generated by configure.py (flavour %s); do not edit." % flavour)
    w.line("# Regenerate: ./configure.py%s" % ("" if flavour == "release"
                                                 else " --flavour " + flavour))
    w.line("ninja_required_version = 1.10")
    w.line()
    w.var("builddir", builddir)
    w.var("cc", cc)
    w.var("cflags", COMMON_CFLAGS + conf["cflags"] + [
        # project headers are included by layer folder ("core/chan.h")
        "-Iruntime/include", "-Iruntime/src", "-Ibindings", "-I" + LUAJIT_DIR,
        "-I" + EI_DIR + "/include", "-I" + gen])
    w.var("ldflags", conf["ldflags"])
    # LuaJIT as linked: its allocator's mmap, munmap and mremap renamed to the runtime's
    # (runtime/src/base/arena_map.h), the rest as scripts/setup built it
    luajit_a = builddir + "/luajit/libluajit.a"
    w.var("luajit_a", luajit_a)
    w.var("ei_a", EI_A)
    w.var("libs", LIBS)
    w.var("test_libs", TEST_LIBS)
    w.line()

    w.rule("cc", "$cc -MMD -MF $out.d $cflags -c $in -o $out", "CC $out",
           deps="gcc", depfile="$out.d")
    w.rule("gen_cdef", "python3 scripts/gen-cdef $in $out", "GEN $out")
    w.rule("embed_lua",
           "python3 scripts/embed-lua --c $out --h $header --module smarm.cdef=$cdef $in",
           "EMBED $out", restat="1")
    # Runtime objects and all of LuaJIT merged into one archive (ar's MRI mode
    # keeps LuaJIT's members as they are instead of nesting the archive).
    w.rule("ar_merge",
           "rm -f $out && { echo \"CREATE $out\"; echo \"ADDLIB $luajit_a\"; "
           "echo \"ADDLIB $ei_a\"; "
           "for o in $in; do echo \"ADDMOD $$o\"; done; echo SAVE; echo END; } "
           "| ar -M && ranlib $out",
           "AR $out")
    # LuaJIT's objects carry link-time optimization bytecode beside their machine code
    # (scripts/setup): lj_alloc.o loses it, or the release link would compile its calls
    # from the bytecode, where they still name mmap. Its two static workers, malloc and
    # free, become global under smarm_ names: an arena's allocation function calls them
    # straight, without lj_alloc_f's dispatch on its arguments (vm/ljx.h).
    w.rule("luajit_redirect",
           "d=$out.x && rm -rf $$d && mkdir -p $$d && (cd $$d && ar x \"$$OLDPWD/$in\" lj_alloc.o) "
           "&& objcopy -R '.gnu.lto_*' -R '.gnu.debuglto_*' --strip-symbol __gnu_lto_v1 "
           "--strip-symbol __gnu_lto_slim --redefine-sym mmap64=smarm_arena_mmap "
           "--redefine-sym munmap=smarm_arena_munmap --redefine-sym mremap=smarm_arena_mremap "
           "--redefine-sym lj_alloc_malloc=smarm_lj_alloc_malloc "
           "--redefine-sym lj_alloc_free=smarm_lj_alloc_free "
           "--globalize-symbol smarm_lj_alloc_malloc --globalize-symbol smarm_lj_alloc_free "
           "$$d/lj_alloc.o "
           "&& ! nm $$d/lj_alloc.o | grep -Eq ' U (mmap|mmap64|munmap|mremap)$$' "
           "&& nm $$d/lj_alloc.o | grep -q ' U smarm_arena_mmap$$' "
           "&& nm $$d/lj_alloc.o | grep -q ' T smarm_lj_alloc_malloc$$' "
           "&& nm $$d/lj_alloc.o | grep -q ' T smarm_lj_alloc_free$$' "
           "&& cp $in $out.tmp && ar r $out.tmp $$d/lj_alloc.o && ranlib $out.tmp "
           "&& mv $out.tmp $out && rm -rf $$d",
           "REDIRECT $out")
    w.rule("link_shared",
           "$cc -shared -Wl,-soname,$soname -o $out $in "
           "-Wl,--whole-archive $luajit_a -Wl,--no-whole-archive $ei_a $ldflags $libs",
           "SO $out")
    # Executables carry all of LuaJIT and export it (-Wl,-E), so Lua C modules
    # such as Debian's lpeg.so resolve lua_* against the binary.
    w.rule("link_exe",
           "$cc -o $out $in -Wl,-E -Wl,--whole-archive $luajit_a -Wl,--no-whole-archive "
           "$ei_a $ldflags $extra_libs",
           "LINK $out")
    w.rule("symlink", "ln -sf $target $out", "LN $out")
    # PREFIX (default /usr/local) and DESTDIR come from the environment: see scripts/install
    w.rule("install", "scripts/install $builddir", "INSTALL", pool="console")
    w.rule("configure", configure_cmd + " -o $out",
           "CONFIGURE $out", generator="1")

    w.line("# Generated sources: the FFI cdefs and the embedded Lua modules.")
    w.build([cdef_lua], "gen_cdef", [FFI_HEADER], implicit=["scripts/gen-cdef"])
    w.build([embedded_c], "embed_lua", lua_srcs,
            implicit=[cdef_lua, "scripts/embed-lua"], implicit_outputs=[embedded_h],
            variables=[("header", embedded_h), ("cdef", cdef_lua)])
    w.line()

    # Every compile waits for the generated header (first build); afterwards
    # the compiler's depfiles say who really includes it.
    order = [embedded_h]

    w.line("# LuaJIT's allocator maps its arenas' memory through the runtime (base/arena_map.c).")
    w.build([luajit_a], "luajit_redirect", [LUAJIT_A])
    w.line()

    w.line("# libsmarm: runtime objects (PIC, shared by the archive, the .so and executables).")
    runtime_objs = []
    for src in runtime_srcs + [embedded_c]:
        o = obj(builddir, src)
        runtime_objs.append(o)
        w.build([o], "cc", [src], order_only=order)
    w.build([builddir + "/libsmarm.a"], "ar_merge", runtime_objs, implicit=[luajit_a])
    so_real = builddir + "/libsmarm.so." + SO_VERSION
    so_libs = [so_real, builddir + "/" + SONAME, builddir + "/libsmarm.so"]
    w.build([so_real], "link_shared", runtime_objs, implicit=[luajit_a],
            variables=[("soname", SONAME)])
    for link in so_libs[1:]:
        w.build([link], "symlink", [so_real],
                variables=[("target", os.path.basename(so_real))])
    w.line()

    w.line("# smarm-lua")
    cli_objs = []
    for src in cli_srcs:
        o = obj(builddir, src)
        cli_objs.append(o)
        w.build([o], "cc", [src], order_only=order)
    exe = builddir + "/smarm-lua"
    w.build([exe], "link_exe", cli_objs + runtime_objs, implicit=[luajit_a],
            variables=[("extra_libs", CLI_LIBS)])
    w.line()

    w.line("# C unit tests: one cmocka executable per tests/c/*_test.c.")
    helper_objs = []
    for src in helper_srcs:
        o = obj(builddir, src)
        helper_objs.append(o)
        w.build([o], "cc", [src], order_only=order)
    tests = []
    for src in test_srcs:
        o = obj(builddir, src)
        w.build([o], "cc", [src], order_only=order)
        t = "%s/tests/c/%s" % (builddir, stem(src))
        tests.append(t)
        w.build([t], "link_exe", [o] + helper_objs + runtime_objs, implicit=[luajit_a],
                variables=[("extra_libs", "$test_libs")])
    w.line()

    fuzzers = []
    if conf.get("fuzz"):
        w.line("# libFuzzer targets: one executable per tests/fuzz/*_fuzz.c.")
        for src in sorted_glob("tests/fuzz/*_fuzz.c"):
            o = obj(builddir, src)
            w.build([o], "cc", [src], order_only=order)
            t = "%s/tests/fuzz/%s" % (builddir, stem(src))
            fuzzers.append(t)
            w.build([t], "link_exe", [o] + runtime_objs, implicit=[luajit_a],
                    variables=[("extra_libs", "-fsanitize=fuzzer $libs")])
        w.line()

    w.build([regen_path], "configure", implicit=["configure.py"])
    w.build(["tests"], "phony", tests)
    if fuzzers:
        w.build(["fuzz"], "phony", fuzzers)
    w.build(["all"], "phony", [exe, builddir + "/libsmarm.a"] + so_libs + tests + fuzzers)
    w.build(["install"], "install", [],
            implicit=[exe, builddir + "/libsmarm.a"] + so_libs + ["scripts/install"])
    w.line("default " + ("fuzz" if fuzzers else "all"))
    return w.text()


def main():
    ap = argparse.ArgumentParser(description="Write build.ninja for smarm-lua.")
    ap.add_argument("--flavour", choices=sorted(FLAVOURS), default="release")
    ap.add_argument("--cc", help="C compiler (default: cc for release/debug, clang for sanitizers)")
    ap.add_argument("-o", dest="output",
                    help="output file, '-' for stdout (default: build.ninja for release, "
                         "build-<flavour>/build.ninja otherwise)")
    args = ap.parse_args()

    default_out = "build.ninja" if args.flavour == "release" else \
        "build-%s/build.ninja" % args.flavour
    if args.output in (None, "-"):
        out_path = os.path.join(ROOT, default_out)
    else:
        out_path = os.path.abspath(args.output)
    regen_path = os.path.relpath(out_path, ROOT)
    if regen_path.startswith(".."):
        regen_path = out_path

    os.chdir(ROOT)
    text = generate(args.flavour, args.cc or FLAVOURS[args.flavour]["cc"], regen_path)

    if args.output == "-":
        sys.stdout.write(text)
        return
    # Always written (never "only if changed"): ninja's regeneration rule
    # needs the new mtime, or it would run configure again and again.
    os.makedirs(os.path.dirname(out_path), exist_ok=True)
    with open(out_path, "w") as f:
        f.write(text)

if __name__ == "__main__":
    main()
