/* Small blocks each thread keeps (see blocks.h). */
#include "base/blocks.h"

#include <pthread.h>

__thread blocks_tls blocks_mine __attribute__((tls_model("initial-exec")));

static pthread_key_t blocks_key;
static pthread_once_t blocks_once = PTHREAD_ONCE_INIT;
static int blocks_key_ok;

/* The thread's end: its lists go back to malloc. */
static void blocks_drain(void *p)
{
    blocks_tls *t = p;
    for (int k = 0; k < 2; k++) {
        while (t->lists[k].head) {
            void *b = t->lists[k].head;
            t->lists[k].head = *(void **)b;
            free(b);
        }
        t->lists[k].n = 0;
    }
    t->registered = 0; /* a later put in another destructor registers again */
}

static void blocks_key_make(void)
{
    blocks_key_ok = pthread_key_create(&blocks_key, blocks_drain) == 0;
}

void blocks_put_slow(void *b, block_list *l)
{
    if (l->n < BLOCKS_KEEP && !blocks_mine.registered) {
        pthread_once(&blocks_once, blocks_key_make);
        if (blocks_key_ok && pthread_setspecific(blocks_key, &blocks_mine) == 0) {
            blocks_mine.registered = 1;
            blocks_push(l, b);
            return;
        }
    }
    free(b);
}
