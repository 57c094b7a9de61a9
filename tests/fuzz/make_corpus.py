#!/usr/bin/env python3
"""Writes the seed corpus of decode_fuzz into tests/fuzz/corpus/decode/.

Each seed is a small message in the codec's byte format (runtime/src/codec.c; numbers in
x86-64's native little-endian order): one per tag, a few tables, argument lists, and some
malformed inputs near the edges. The files are committed; rerun this after a format change.
"""

import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "decode")


def varint(n):
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def string(s):
    return bytes([0x40 + len(s)]) + s if len(s) < 64 else b"\x09" + varint(len(s)) + s


def table(array=(), pairs=()):
    out = b"\x0a" + varint(len(array)) + varint(len(pairs))
    for v in array:
        out += v
    for k, v in pairs:
        out += k + v
    return out


def fixint(i):
    return bytes([0x80 + i])


NIL, FALSE, TRUE = b"\x00", b"\x01", b"\x02"

SEEDS = {
    "nil": NIL,
    "scalars": table([NIL, FALSE, TRUE, fixint(0), fixint(127), b"\x04" + struct.pack("<b", -5),
                      b"\x05" + struct.pack("<h", -300), b"\x06" + struct.pack("<i", 1 << 20)]),
    "doubles": table([b"\x03" + struct.pack("<d", x)
                      for x in (0.5, -0.0, float("inf"), float("nan"), 1e300)]),
    "int64": table([b"\x07" + struct.pack("<q", -(1 << 62)),
                    b"\x08" + struct.pack("<Q", (1 << 64) - 1)],
                   [(b"\x07" + struct.pack("<q", 3), string(b"cdata key"))]),
    "short_string": string(b"hello\x00world"),
    "long_string": string(bytes(range(64, 164))),
    "record": table([], [(string(b"from"), b"\x06" + struct.pack("<i", 4096)),
                         (string(b"n"), fixint(7)), (string(b"text"), string(b"hi"))]),
    "array_holes": table([fixint(1), NIL, fixint(3), NIL, string(b"x")]),
    "nested": table([table([table([table([fixint(1)])])])],
                    [(TRUE, table([], [(string(b"k"), FALSE)]))]),
    "table_key": table([], [(table([fixint(1)]), string(b"v"))]),
    "args": varint(3) + fixint(1) + string(b"two") + table([fixint(3)]),
    "args_none": varint(0),
    "truncated": table([fixint(1), fixint(2), fixint(3)])[:-1],
    "trailing": fixint(1) + fixint(2),
    "bad_tag": table([b"\x30"]),
    "nil_key": table([], [(NIL, TRUE)]),
    "huge_count": b"\x0a" + varint(1 << 40) + varint(0) + fixint(1),
    # Found by decode_fuzz: a table count read when the enclosing table still needs more
    # bytes than are left (codec_test: table_count_inside_a_truncated_table_is_rejected).
    "truncated_parent_huge_count": table([], [(b"\x0a" + varint((1 << 28) - 1) + varint(0),
                                               b"")]),
}


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, data in sorted(SEEDS.items()):
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    print("make_corpus: %d seeds in %s" % (len(SEEDS), os.path.relpath(OUT)))


if __name__ == "__main__":
    main()
