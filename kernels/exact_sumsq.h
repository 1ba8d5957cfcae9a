/* A sum of squares of float32 values that is exact, so that it does not
 * depend on which rank adds which element or in what order: the norm of
 * the gradients under ZeRO, where each rank holds a different 1/dp of them
 * depending on the gradient buckets (train/zero_shards.c), and under TP.
 * A float or double sum of each rank's part, summed over the ranks, gives
 * different last bits for different splits, and so a different clip factor
 * and different weights (seen as bucketed != unbucketed ZeRO, issue 36).
 *
 * Each square x = v * v is exact in double (24-bit mantissa squared). It
 * is truncated to a multiple of 2^-96 and added as an unsigned integer of
 * EXACT_SUMSQ_WORDS 64-bit words (bit 0 weighs 2^-96): integer addition is
 * associative, so the total is the same for any split and order. Squares
 * below 2^-96 (|v| < 2^-48) add nothing; a square of 2^96 or more (|v| >=
 * 2^48), an infinity or a NaN sets a flag instead and makes the sum
 * infinite or NaN. 2^64 elements below 2^96 sum to below 2^160: no carry
 * leaves the words.
 *
 * Across ranks the sum travels as EXACT_SUMSQ_PIECES floats (8 bits of it
 * each, then the NaN and the overflow flag as 0 or 1): a float all-reduce
 * (SUM) of up to 65536 ranks adds integers below 2^24 there, exactly in any
 * order. exact_sumsq_value turns the reduced pieces into one double.
 * Compiles for host (C11) and device (CUDA), so both backends agree bit
 * for bit. */
#ifndef KERNELS_EXACT_SUMSQ_H
#define KERNELS_EXACT_SUMSQ_H

#include <math.h>
#include <stdint.h>

#include "util/rng_core.h" /* TG_HD */

#define EXACT_SUMSQ_WORDS 4
#define EXACT_SUMSQ_BITS (64 * EXACT_SUMSQ_WORDS)
#define EXACT_SUMSQ_PIECES (EXACT_SUMSQ_BITS / 8 + 2)
#define EXACT_SUMSQ_NAN 1u      /* exact_sumsq.flags: a NaN was added */
#define EXACT_SUMSQ_OVERFLOW 2u /* an infinity or a square of 2^96 or more */

typedef struct exact_sumsq {
    uint64_t w[EXACT_SUMSQ_WORDS]; /* little-endian words; bit 0 weighs 2^-96 */
    uint64_t flags;                /* EXACT_SUMSQ_NAN | EXACT_SUMSQ_OVERFLOW */
} exact_sumsq;

/* w[at..] += v: v at word `at`, the carry upwards. */
static inline TG_HD void exact_sumsq_add_word(exact_sumsq *s, int at, uint64_t v) {
    for (int i = at; i < EXACT_SUMSQ_WORDS && v; i++) {
        s->w[i] += v;
        v = s->w[i] < v; /* the carry */
    }
}

static inline TG_HD void exact_sumsq_merge(exact_sumsq *s, const exact_sumsq *o) {
    for (int i = 0; i < EXACT_SUMSQ_WORDS; i++) exact_sumsq_add_word(s, i, o->w[i]);
    s->flags |= o->flags;
}

/* s += v * v, truncated to a multiple of 2^-96. Every step below is exact:
 * scalings by powers of two, truncations of values below 2^64, and the
 * subtraction of a value's own leading bits. */
static inline TG_HD void exact_sumsq_add(exact_sumsq *s, float v) {
    const double x = (double)v * (double)v;
    if (!(x < 0x1p96)) { /* also NaN */
        s->flags |= x != x ? EXACT_SUMSQ_NAN : EXACT_SUMSQ_OVERFLOW;
        return;
    }
    double t = x * 0x1p96; /* below 2^192 */
    const uint64_t w2 = (uint64_t)(t * 0x1p-128);
    t -= (double)w2 * 0x1p128;
    const uint64_t w1 = (uint64_t)(t * 0x1p-64);
    t -= (double)w1 * 0x1p64;
    exact_sumsq_add_word(s, 0, (uint64_t)t);
    exact_sumsq_add_word(s, 1, w1);
    exact_sumsq_add_word(s, 2, w2);
}

/* The pieces that ranks add in a float all-reduce (above). */
static inline TG_HD void exact_sumsq_pieces(const exact_sumsq *s, float *pieces) {
    for (int i = 0; i < EXACT_SUMSQ_BITS / 8; i++) pieces[i] = (float)((s->w[i / 8] >> (8 * (i % 8))) & 0xff);
    pieces[EXACT_SUMSQ_BITS / 8] = s->flags & EXACT_SUMSQ_NAN ? 1.0f : 0.0f;
    pieces[EXACT_SUMSQ_BITS / 8 + 1] = s->flags & EXACT_SUMSQ_OVERFLOW ? 1.0f : 0.0f;
}

/* The sum that pieces (summed over ranks) stand for, in double: the
 * carries are taken in integers first, from the lowest piece up, so that
 * equal sums give the same bytes and so the same bits. No array is
 * indexed at run time (a GPU would keep it in local memory). */
static inline TG_HD double exact_sumsq_value(const float *pieces) {
    if (pieces[EXACT_SUMSQ_BITS / 8] > 0.0f) return NAN;
    if (pieces[EXACT_SUMSQ_BITS / 8 + 1] > 0.0f) return INFINITY;
    double total = 0.0;
    uint64_t carry = 0;
    for (int i = 0; i < EXACT_SUMSQ_BITS / 8; i++) { /* a piece is an integer below 2^24 */
        const uint64_t v = (uint64_t)pieces[i] + carry;
        total += ldexp((double)(v & 0xff), 8 * i - 96);
        carry = v >> 8;
    }
    return carry ? INFINITY : total; /* a carry out of 256 bits: more than 65536 ranks' worth */
}

#endif
