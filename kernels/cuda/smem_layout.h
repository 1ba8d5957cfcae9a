/* Shared-memory address math of Hopper's warpgroup MMA (wgmma, sm_90a): the
 * 64-bit matrix descriptor, the swizzle modes and the canonical operand
 * layouts, as the PTX ISA defines them ("Matrix Descriptor Format", "Shared
 * Memory Matrix Layout"). Pure integer arithmetic, usable from C and CUDA,
 * on the host and the device: the emulator reads wgmma operands through
 * these same functions (tests/emu/emu_wgmma.cpp), and
 * tests/emu/test_smem_layout.c checks them against tables written from the
 * ISA's figures.
 *
 * Descriptor (a 64-bit register): bits 0-13 start address >> 4, 16-29
 * leading-dimension byte offset (LBO) >> 4, 32-45 stride-dimension byte
 * offset (SBO) >> 4, 49-51 base offset, 62-63 swizzle mode (0 none, 1 128B,
 * 2 64B, 3 32B); the other bits are zero. Addresses and offsets are taken
 * modulo 2^18 (the shared window) and are multiples of 16.
 *
 * Swizzle (applied by the hardware on the absolute shared address, as the
 * bulk tensor copy writes it): the 16-byte chunk index within a span of S =
 * 128, 64 or 32 bytes (address bits 4-6, 4-5 or bit 4) is XORed with the
 * address bits above the 128-byte row (bits 7-9, 7-8 or bit 7). So the
 * pattern repeats every 1024, 512 or 256 bytes, and a tile whose first row
 * sits on that boundary needs base offset 0 (what CUTLASS and FA3 use).
 * A non-zero base offset b: the rows are counted from a pattern that starts
 * b rows of 128 bytes above a boundary ((address >> 7) - b), our reading
 * of the ISA's one sentence on it, not yet checked on a GPU.
 *
 * Canonical layouts, T = 16 / element bytes elements per 16-byte chunk, the
 * byte offset (before the swizzle) of element (mn, k) of an operand (mn:
 * the row m of A, or the column n of B), W the swizzle span in bytes:
 *   K-major, none:    (mn % 8) * 16 + (mn / 8) * SBO + (k % T) * e + (k / T) * LBO
 *   K-major, W:       (mn % 8) * W  + (mn / 8) * SBO + k * e        (k * e < W: LBO unused)
 *   MN-major, none:   (mn % T) * e  + (mn / T) * SBO + (k % 8) * 16 + (k / 8) * LBO
 *   MN-major, W:      (mn * e % W)  + (mn * e / W) * LBO + (k % 8) * W + (k / 8) * SBO
 * i.e. 8 rows of 16 bytes (no swizzle: "core matrices") or of W bytes (the
 * swizzle atom), contiguous; LBO and SBO step between those blocks. K-major
 * is A as [m][k] and B as [n][k] (K of Q K^T); MN-major is B as [k][n] (V in
 * P V, wgmma's tnspB). */
#ifndef KERNELS_CUDA_SMEM_LAYOUT_H
#define KERNELS_CUDA_SMEM_LAYOUT_H

#include <stdint.h>

#if defined(__CUDACC__)
#define SMEM_HD __host__ __device__ __forceinline__
#else
#define SMEM_HD inline
#endif

/* The descriptor's codes (bits 62-63). */
enum smem_swizzle { SMEM_SWIZZLE_NONE = 0, SMEM_SWIZZLE_128B = 1, SMEM_SWIZZLE_64B = 2, SMEM_SWIZZLE_32B = 3 };
/* Which index of an operand is contiguous: k (tnsp 0) or m / n (tnsp 1). */
enum smem_major { SMEM_K_MAJOR = 0, SMEM_MN_MAJOR = 1 };

/* A descriptor's fields in bytes (start, lbo, sbo: below 2^18, multiples of 16). */
typedef struct smem_desc_fields {
    uint32_t start, lbo, sbo;
    uint32_t base_offset; /* 0..7 */
    uint32_t swizzle;     /* enum smem_swizzle */
} smem_desc_fields;

/* Bits of a descriptor that must be zero (14-15, 30-31, 46-48, 52-61). */
#define SMEM_DESC_RESERVED 0x3ff1c000c000c000ull

/* The ISA's matrix-descriptor-encode(x) = (x & 0x3FFFF) >> 4. */
static SMEM_HD uint64_t smem_desc_field(uint32_t bytes) { return (uint64_t)((bytes & 0x3ffffu) >> 4); }

static SMEM_HD uint64_t smem_desc_encode(smem_desc_fields f) {
    return smem_desc_field(f.start) | smem_desc_field(f.lbo) << 16 | smem_desc_field(f.sbo) << 32 |
           (uint64_t)(f.base_offset & 7u) << 49 | (uint64_t)(f.swizzle & 3u) << 62;
}

static SMEM_HD smem_desc_fields smem_desc_decode(uint64_t d) {
    smem_desc_fields f;
    f.start = (uint32_t)(d & 0x3fff) << 4;
    f.lbo = (uint32_t)(d >> 16 & 0x3fff) << 4;
    f.sbo = (uint32_t)(d >> 32 & 0x3fff) << 4;
    f.base_offset = (uint32_t)(d >> 49 & 7);
    f.swizzle = (uint32_t)(d >> 62 & 3);
    return f;
}

/* A descriptor with base offset 0: start is the tile's shared address. */
static SMEM_HD uint64_t smem_desc_make(uint32_t start, uint32_t lbo, uint32_t sbo, unsigned swizzle) {
    smem_desc_fields f;
    f.start = start, f.lbo = lbo, f.sbo = sbo, f.base_offset = 0, f.swizzle = swizzle;
    return smem_desc_encode(f);
}

/* The swizzle span in bytes (the row of the swizzle atom): 16 for none. */
static SMEM_HD uint32_t smem_swizzle_span(unsigned swizzle) {
    return swizzle == SMEM_SWIZZLE_128B ? 128u : swizzle == SMEM_SWIZZLE_64B ? 64u : swizzle == SMEM_SWIZZLE_32B ? 32u : 16u;
}

/* The address the hardware reads for the unswizzled shared address addr. */
static SMEM_HD uint32_t smem_swizzle_apply(uint32_t addr, unsigned swizzle, unsigned base_offset) {
    const uint32_t mask = smem_swizzle_span(swizzle) / 16u - 1u; /* 7, 3, 1, or 0: no swizzle */
    const uint32_t row = ((addr >> 7) - base_offset) & mask;
    return addr ^ (row << 4);
}

/* Byte offset, before the swizzle, of element (mn, k) in a canonical layout
 * (see the table above); e: element bytes (2 for bf16). */
static SMEM_HD uint32_t smem_canonical_offset(unsigned major, unsigned swizzle, uint32_t lbo, uint32_t sbo, uint32_t mn,
                                              uint32_t k, uint32_t e) {
    const uint32_t t = 16u / e, w = smem_swizzle_span(swizzle);
    if (major == SMEM_K_MAJOR) {
        if (swizzle == SMEM_SWIZZLE_NONE) return (mn % 8u) * 16u + (mn / 8u) * sbo + (k % t) * e + (k / t) * lbo;
        return (mn % 8u) * w + (mn / 8u) * sbo + k * e;
    }
    if (swizzle == SMEM_SWIZZLE_NONE) return (mn % t) * e + (mn / t) * sbo + (k % 8u) * 16u + (k / 8u) * lbo;
    return (mn * e) % w + (mn * e / w) * lbo + (k % 8u) * w + (k / 8u) * sbo;
}

/* The shared address of element (mn, k) of the operand that descriptor f
 * describes: what the tensor core reads. */
static SMEM_HD uint32_t smem_element_address(smem_desc_fields f, unsigned major, uint32_t mn, uint32_t k, uint32_t e) {
    const uint32_t at = f.start + smem_canonical_offset(major, f.swizzle, f.lbo, f.sbo, mn, k, e);
    return smem_swizzle_apply(at, f.swizzle, f.base_offset);
}

/* The first 1024-aligned byte at or after p (a kernel's dynamic shared
 * array: the swizzled tiles start there, base offset 0), by pointer
 * arithmetic on p: from an integer cast, nvcc no longer knows the result
 * points into shared memory, and plain accesses through it compile to
 * generic ones on 64-bit addresses (the wgmma backward's dS^T stores were,
 * 7 registers more at head size 64). */
static SMEM_HD unsigned char *smem_align_1k(unsigned char *p) {
    return p + ((1024u - (uint32_t)((uintptr_t)p & 1023u)) & 1023u);
}

#endif
