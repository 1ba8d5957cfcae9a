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
#include <string.h>

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

/* The same as exact_sumsq_add, from v's bits in integer operations only:
 * no conversions between doubles and 64-bit integers, no carry loops, which
 * made grad_sumsq's exact sum bound by its instructions on an H200 (about
 * 50 an element there: 877 GB/s). v = m 2^(e - 150) with m the 24-bit
 * significand and e the biased exponent, so v^2 2^96 = m^2 2^(2e - 204),
 * m^2 < 2^48: shifted into place across the words and added with one carry
 * chain. |v| < 2^-48 (e < 79, subnormals too) adds nothing, as v^2 < 2^-96;
 * |v| >= 2^48 (bits 0x57800000 and up: v^2 >= 2^96), an infinity or a NaN
 * sets the flags as exact_sumsq_add does. tests/kernels/optimizer.c holds
 * the two to the same words over every exponent. */
static inline TG_HD void exact_sumsq_add_int(exact_sumsq *s, float v) {
    uint32_t a;
    memcpy(&a, &v, sizeof a);
    a &= 0x7fffffffu;
    if (a >= 0x57800000u) {
        s->flags |= a > 0x7f800000u ? EXACT_SUMSQ_NAN : EXACT_SUMSQ_OVERFLOW;
        return;
    }
    const int e = (int)(a >> 23);
    if (e < 79) return;
    const uint64_t m = (a & 0x7fffffu) | 0x800000u, sq = m * m;
    const int sh = 2 * e - 204; /* -46 .. 144 */
    uint64_t lo, hi = 0;
    int q = 0; /* lo goes to word q, hi to q + 1 */
    if (sh < 0) {
        lo = sq >> -sh;
    } else {
        const int r = sh & 63;
        q = sh >> 6;
        lo = sq << r;
        hi = r ? sq >> (64 - r) : 0; /* 0 at q = 2: the value is below 2^192 */
    }
    const uint64_t a0 = q == 0 ? lo : 0, a1 = q == 1 ? lo : q == 0 ? hi : 0, a2 = q == 2 ? lo : q == 1 ? hi : 0;
    uint64_t t = s->w[0] + a0, c = t < a0;
    s->w[0] = t;
    t = s->w[1] + a1;
    uint64_t c1 = t < a1;
    t += c;
    c1 |= t < c;
    s->w[1] = t;
    t = s->w[2] + a2;
    uint64_t c2 = t < a2;
    t += c1;
    c2 |= t < c1;
    s->w[2] = t;
    s->w[3] += c2;
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
