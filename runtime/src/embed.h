/* Embedding (embed.c): what runtime.c needs of it. */
#ifndef SMARM_EMBED_H
#define SMARM_EMBED_H

#include <stddef.h>

struct smarm_runtime;
/* At smarm_runtime_free: stops a running runtime and frees every host handle. */
void embed_free(struct smarm_runtime *rt);
/* The root's boot payload: text\0 u32 argc args\0... (runtime.c), or NULL. */
char *runtime_chunk_payload(const char *text, int argc, char **argv, size_t *len);

#endif
