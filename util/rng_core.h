/* The mixing of util/rng.c as inline functions that compile for both host
 * and device, so the CUDA dropout masks are bit-identical to the CPU's. */
#ifndef UTIL_RNG_CORE_H
#define UTIL_RNG_CORE_H

#include <stdint.h>

#ifdef __CUDACC__
#define TG_HD __host__ __device__
#else
#define TG_HD
#endif

/* splitmix64's finaliser: a bijective mixer with full avalanche. */
static inline TG_HD uint64_t rng_mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Three chained mixes keep (seed, stream, index) tuples from colliding
 * through simple additive relations between the fields. */
static inline TG_HD uint64_t rng_bits_core(uint64_t seed, uint64_t stream, uint64_t index) {
    uint64_t h = rng_mix64(seed + 0x9e3779b97f4a7c15ULL);
    h = rng_mix64(h ^ (stream + 0x632be59bd9b4e019ULL));
    return rng_mix64(h ^ (index * 0x9e3779b97f4a7c15ULL + 0x85ebca6bULL));
}

/* Uniform in [0, 1) with 24 bits (exactly representable as a float). */
static inline TG_HD float rng_uniform_core(uint64_t seed, uint64_t stream, uint64_t index) {
    return (float)(rng_bits_core(seed, stream, index) >> 40) * (1.0f / 16777216.0f);
}

/* The dropout factor of element `index` of a site: 0 (dropped) or 1/(1-p). */
static inline TG_HD float rng_dropout_scale(float p, uint64_t seed, uint64_t stream, uint64_t index) {
    return rng_uniform_core(seed, stream, index) >= p ? 1.0f / (1.0f - p) : 0.0f;
}

#endif
