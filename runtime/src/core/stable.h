/* Shared tables (smarm.table, OTP's ETS): named key/value stores that any actor of the
 * runtime can read without a global lock. Keys and values are immutable byte blobs (the
 * message format, encoded and decoded by the layers above); a lookup copies a small value,
 * or takes a reference on a bigger one's blob, under a stripe's read lock and decodes it
 * after letting go. Readers count themselves in lines of their own thread's group, so readers
 * on many schedulers share no line that either writes. A table belongs to
 * an actor: when it dies the table passes to its heir, if that is alive, or is deleted. */
#ifndef SMARM_CORE_STABLE_H
#define SMARM_CORE_STABLE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

struct smarm_runtime;
struct actor;

/* An immutable, reference-counted run of bytes. */
typedef struct stab_blob {
    _Atomic uint32_t refs;
    uint32_t len;
    char data[];
} stab_blob;

/* A new blob holding a copy of data[0..len) with one reference, or NULL (out of memory). */
stab_blob *stab_blob_new(const char *data, size_t len);
static inline void stab_blob_retain(stab_blob *b)
{
    atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
}
void stab_blob_release(stab_blob *b);

enum stab_access { STAB_PUBLIC = 0, STAB_PROTECTED, STAB_PRIVATE };

enum stab_rc {
    STAB_OK = 0,
    STAB_EXISTS = -1, /* stab_new: the name is taken by a live table */
    STAB_NOMEM = -2,
    STAB_DEAD = -3,    /* the table was deleted (its owner died without a live heir) */
    STAB_NOTNUM = -4,  /* update_counter: the value is not a number */
    STAB_NOOWNER = -5, /* stab_new: the owner is not alive */
};

typedef struct stab stab;

/* The runtime's table of names (rt->tables). */
int stab_init(struct smarm_runtime *rt);
void stab_free(struct smarm_runtime *rt);

/* A new table named name owned by owner (a live actor), with one reference for the caller.
 * heir: a pid or 0. */
int stab_new(struct smarm_runtime *rt, const char *name, uint64_t owner, int access, uint64_t heir,
             stab **out);
/* The live table called name with a reference for the caller, or NULL. */
stab *stab_open(struct smarm_runtime *rt, const char *name);
void stab_retain(stab *t);
void stab_release(stab *t);

const char *stab_name(const stab *t);
int stab_access(const stab *t);
uint64_t stab_owner(const stab *t); /* 0 once deleted */
int stab_dead(const stab *t);
uint64_t stab_size(const stab *t);
/* Bytes held by the table: entries, blobs and buckets. */
uint64_t stab_memory(const stab *t);
/* Bytes held by the live tables owned by a (for smarm.info); takes the names lock. */
uint64_t stab_owned_memory(struct smarm_runtime *rt, struct actor *a);

/* Key hashing (the blob's bytes). */
uint64_t stab_hash(const char *key, size_t len);

/* Sets key to val, taking over both references (a replaced value is released).
 * STAB_OK, STAB_DEAD (both released) or STAB_NOMEM (both released). */
int stab_insert(stab *t, stab_blob *key, stab_blob *val);
/* The value of key with a reference for the caller, or NULL (absent, or the table is dead). */
stab_blob *stab_lookup(stab *t, const char *key, size_t klen);
/* The same, but a value of at most cap bytes is copied into buf instead (NULL returned), so
 * the lookup writes nothing another reader shares. *len is the value's length either way, or
 * STAB_ABSENT (absent, or the table is dead). */
#define STAB_ABSENT ((size_t)-1)
stab_blob *stab_lookup_small(stab *t, const char *key, size_t klen, char *buf, size_t cap,
                             size_t *len);
/* 1 if key was there and is gone, 0 if absent, STAB_DEAD. */
int stab_delete(stab *t, const char *key, size_t klen);
/* Adds incr to key's number (or to deflt when absent and has_default) atomically; the
 * result in *out. STAB_OK, STAB_NOTNUM, STAB_DEAD, STAB_NOMEM, or 1: absent and no default.
 * A value that is a double already and that no reader holds is written over where it lies:
 * the update of a counter allocates and frees nothing. */
int stab_update_counter(stab *t, const char *key, size_t klen, double incr, int has_default,
                        double deflt, double *out);
/* A consistent snapshot of every entry: n pairs (key, value) of retained blobs in a malloc'd
 * array *out (2n pointers) for the caller to release and free. STAB_OK, STAB_DEAD, STAB_NOMEM. */
int stab_snapshot(stab *t, stab_blob ***out, size_t *n);

/* The death of a: each table it owns passes to its live heir or is deleted. After its slot
 * reads DONE (core/scheduler.c's finalize). */
void stab_finalize(struct smarm_runtime *rt, struct actor *a);

#endif
