/* Counter-based random numbers: every draw is a pure function of
 * (seed, stream, index), so any rank can generate exactly its own slice of a
 * tensor and get the numbers the whole tensor would have had. */
#ifndef UTIL_RNG_H
#define UTIL_RNG_H

#include <stdint.h>

/* 64 well-mixed bits for (seed, stream, index). */
uint64_t rng_bits(uint64_t seed, uint64_t stream, uint64_t index);

/* Uniform in [0, 1) with 24 bits of precision (exactly representable). */
float rng_uniform(uint64_t seed, uint64_t stream, uint64_t index);

/* Standard normal via Box-Muller on the two 32-bit halves of rng_bits. */
float rng_normal(uint64_t seed, uint64_t stream, uint64_t index);

/* A stream id derived from a name (FNV-1a), e.g. a tensor's checkpoint name,
 * so streams do not depend on the order tensors are declared in. */
uint64_t rng_stream_of(const char *name);

#endif
