/* The growable arrays and hash maps of data/tokenizer.c, kept apart to keep
 * that file short. Static functions: include from tokenizer.c only. */
#ifndef DATA_TOKENIZER_MAPS_H
#define DATA_TOKENIZER_MAPS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"

/* ---- small helpers ------------------------------------------------------ */

static void *xrealloc(void *p, size_t bytes, const char *what) {
    void *q = realloc(p, bytes ? bytes : 1);
    if (!q) {
        fprintf(stderr, "error: out of memory growing %s to %zu bytes\n", what, bytes);
        exit(1);
    }
    return q;
}

/* Makes room for `more` elements of `size` bytes in a doubling array. */
static void reserve(void **arr, size_t *cap, size_t used, size_t more, size_t size, const char *what) {
    if (used + more <= *cap) return;
    size_t c = *cap ? *cap : 64;
    while (c < used + more) c *= 2;
    *arr = xrealloc(*arr, c * size, what);
    *cap = c;
}

/* ---- string -> (v0, v1) hash map with an arena of keys ------------------ */

#define SLOT_EMPTY UINT32_MAX

typedef struct strmap_slot {
    uint32_t hash, off, len; /* len == SLOT_EMPTY: unused */
    uint32_t v0, v1;
} strmap_slot;

typedef struct strmap {
    strmap_slot *slots;
    size_t cap, count; /* cap: 0 or a power of two, at most half full */
    char *keys;
    size_t keys_n, keys_cap;
} strmap;

static uint32_t hash_bytes(const char *s, size_t n) {
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

static strmap_slot *strmap_find(const strmap *m, const char *s, size_t n, uint32_t h) {
    for (size_t i = h & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        strmap_slot *sl = &m->slots[i];
        if (sl->len == SLOT_EMPTY) return sl;
        if (sl->hash == h && sl->len == n && memcmp(m->keys + sl->off, s, n) == 0) return sl;
    }
}

static int strmap_get(const strmap *m, const char *s, size_t n, uint32_t *v0, uint32_t *v1) {
    if (!m->cap) return 0;
    const strmap_slot *sl = strmap_find(m, s, n, hash_bytes(s, n));
    if (sl->len == SLOT_EMPTY) return 0;
    if (v0) *v0 = sl->v0;
    if (v1) *v1 = sl->v1;
    return 1;
}

static void strmap_grow(strmap *m) {
    strmap old = *m;
    m->cap = old.cap ? old.cap * 2 : 1024;
    m->slots = tg_malloc(m->cap * sizeof *m->slots, "tokenizer hash table");
    memset(m->slots, 0xff, m->cap * sizeof *m->slots);
    for (size_t i = 0; i < old.cap; i++) {
        const strmap_slot *sl = &old.slots[i];
        if (sl->len != SLOT_EMPTY) *strmap_find(m, old.keys + sl->off, sl->len, sl->hash) = *sl;
    }
    free(old.slots);
}

/* Inserts or overwrites. Keys must be shorter than 4 GiB in all. */
static void strmap_put(strmap *m, const char *s, size_t n, uint32_t v0, uint32_t v1) {
    if (2 * (m->count + 1) > m->cap) strmap_grow(m);
    uint32_t h = hash_bytes(s, n);
    strmap_slot *sl = strmap_find(m, s, n, h);
    if (sl->len == SLOT_EMPTY) {
        reserve((void **)&m->keys, &m->keys_cap, m->keys_n, n, 1, "tokenizer hash keys");
        memcpy(m->keys + m->keys_n, s, n);
        *sl = (strmap_slot){h, (uint32_t)m->keys_n, (uint32_t)n, 0, 0};
        m->keys_n += n;
        m->count++;
    }
    sl->v0 = v0;
    sl->v1 = v1;
}

static void strmap_free(strmap *m) {
    free(m->slots);
    free(m->keys);
    memset(m, 0, sizeof *m);
}

/* ---- (left id, right id) -> (rank, merged id) hash map ------------------ */

#define PAIR_EMPTY UINT64_MAX

typedef struct pair_slot {
    uint64_t key; /* left << 32 | right */
    int32_t rank, merged;
} pair_slot;

typedef struct pairmap {
    pair_slot *slots;
    size_t cap, count;
} pairmap;

static uint64_t pair_key(int32_t a, int32_t b) { return (uint64_t)(uint32_t)a << 32 | (uint32_t)b; }

static pair_slot *pair_find(const pairmap *m, uint64_t key) {
    size_t i = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 32) & (m->cap - 1);
    for (;; i = (i + 1) & (m->cap - 1))
        if (m->slots[i].key == key || m->slots[i].key == PAIR_EMPTY) return &m->slots[i];
}

static const pair_slot *pair_get(const pairmap *m, int32_t a, int32_t b) {
    const pair_slot *s = pair_find(m, pair_key(a, b));
    return s->key == PAIR_EMPTY ? NULL : s;
}

static void pair_put(pairmap *m, int32_t a, int32_t b, int32_t rank, int32_t merged) {
    if (2 * (m->count + 1) > m->cap) {
        pairmap old = *m;
        m->cap = old.cap ? old.cap * 2 : 1 << 16;
        m->slots = tg_malloc(m->cap * sizeof *m->slots, "BPE merge table");
        for (size_t i = 0; i < m->cap; i++) m->slots[i].key = PAIR_EMPTY;
        for (size_t i = 0; i < old.cap; i++)
            if (old.slots[i].key != PAIR_EMPTY) *pair_find(m, old.slots[i].key) = old.slots[i];
        free(old.slots);
    }
    pair_slot *s = pair_find(m, pair_key(a, b));
    if (s->key == PAIR_EMPTY) m->count++;
    *s = (pair_slot){pair_key(a, b), rank, merged};
}

#endif
