/* intern: the values of the Erlang distribution that Lua holds as light userdata, atoms and
 * the pids of other nodes. Each distinct one is one record of a fixed process-wide array,
 * made once and never freed (as a BEAM node keeps its atoms), so the same atom or pid is
 * always the same pointer: == and table keys work, and a message carries the pointer. */
#ifndef SMARM_BASE_INTERN_H
#define SMARM_BASE_INTERN_H

#include <stddef.h>
#include <stdint.h>

#define INTERN_MAX (1u << 19) /* records, atoms and pids together */
#define INTERN_ATOM_MAX 255   /* bytes in an atom's name, as in Erlang */

enum intern_kind { INTERN_ATOM = 1, INTERN_PID = 2 };

typedef struct intern_rec {
    uint32_t kind, len;             /* len: the atom's name length (a pid: its node's) */
    const char *name;               /* an atom's name, or a pid's node name (both NUL-terminated) */
    uint32_t num, serial, creation; /* a pid's fields */
    uint32_t next;                  /* hash chain: index + 1, 0 ends */
} intern_rec;

/* The atom named s[0..n), or NULL (a name longer than INTERN_ATOM_MAX, the table full, out
 * of memory). */
const intern_rec *intern_atom(const char *s, size_t n);
/* The pid (node, num, serial, creation), or NULL (bad node name, table full). */
const intern_rec *intern_pid(const char *node, size_t nlen, uint32_t num, uint32_t serial,
                             uint32_t creation);
/* A record's position in the table, from 1. */
uint32_t intern_index(const intern_rec *r);
/* The record p points at, or NULL if p is not one (any pointer may be asked about). */
const intern_rec *intern_lookup(const void *p);

#endif
