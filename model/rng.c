#include "model/rng.h"

#include <math.h>

/* splitmix64's finaliser: a bijective mixer with full avalanche. */
static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

uint64_t rng_bits(uint64_t seed, uint64_t stream, uint64_t index) {
    /* Three chained mixes keep (seed, stream, index) tuples from colliding
     * through simple additive relations between the fields. */
    uint64_t h = mix64(seed + 0x9e3779b97f4a7c15ULL);
    h = mix64(h ^ (stream + 0x632be59bd9b4e019ULL));
    return mix64(h ^ (index * 0x9e3779b97f4a7c15ULL + 0x85ebca6b));
}

float rng_uniform(uint64_t seed, uint64_t stream, uint64_t index) {
    return (float)(rng_bits(seed, stream, index) >> 40) * (1.0f / 16777216.0f);
}

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
