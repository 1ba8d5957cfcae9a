#include "util/rng.h"
#include "util/rng_core.h"

#include <math.h>

uint64_t rng_bits(uint64_t seed, uint64_t stream, uint64_t index) { return rng_bits_core(seed, stream, index); }

float rng_uniform(uint64_t seed, uint64_t stream, uint64_t index) { return rng_uniform_core(seed, stream, index); }

float rng_normal(uint64_t seed, uint64_t stream, uint64_t index) {
    uint64_t b = rng_bits(seed, stream, index);
    /* u1 in (0, 1] so that log(u1) is finite; computed in double so the
     * result does not depend on the float math library's rounding. */
    double u1 = ((double)(b >> 32) + 1.0) / 4294967296.0;
    double u2 = (double)(b & 0xffffffffULL) / 4294967296.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
}

uint64_t rng_stream_of(const char *name) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
        h ^= *p;
        h *= 0x100000001b3ULL;
    }
    return h;
}
