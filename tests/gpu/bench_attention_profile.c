/* bench_attention's profile rows (tests/gpu/bench_attention.h): the
 * TMA forward and the wgmma backward once more, each block writing its
 * phase profile (kernels/cuda/block_profile.h), summed up by
 * tests/gpu/block_profile.c. */
#include <stdio.h>
#include <stdlib.h>

#include "kernels/cuda/kernels.h"
#include "tests/gpu/bench_attention.h"
#include "tests/gpu/block_profile.h"
#include "util/err.h"

/* A profiled kernel (kernels.h's *_profile): what it is, its blocks,
 * its call, the result it writes and the reference to check it by (in
 * the tolerance), and its tiles over all blocks (a record from every
 * block adds up to them). */
typedef struct {
    const char *name, *tile; /* the kernel, and what a tile of its records is */
    size_t blocks;
    int (*run)(tg_o o, const attn_case *c, const attn_buffers *b, cuda_block_profile *records);
    block_phase_name phase;
    void *result;
    const void *want;
    size_t n_result;
    double tiles;
} profiled_kernel;

static int run_forward_profiled(tg_o o, const attn_case *c, const attn_buffers *b, cuda_block_profile *records) {
    return cuda_attention_forward_wgmma_ws_profile(o, b->out, b->lse, b->qkv, c->B, c->T, c->NH, c->HS, records);
}
static int run_backward_profiled(tg_o o, const attn_case *c, const attn_buffers *b, cuda_block_profile *records) {
    return cuda_attention_backward_wgmma_profile(o, b->dqkv, b->dout, b->tuned_out, b->qkv, b->lse, c->B, c->T, c->NH, c->HS,
                                                 records);
}

/* Tiles of `tile` rows from each block's first row (blocks of `block`
 * rows, causal: the forward's key tiles up to its last row, the
 * backward's query tiles from its first key to T), over all blocks. */
static double profile_tiles(const attn_case *c, int block, int tile, int forward) {
    double tiles = 0.0;
    for (int q0 = 0; q0 < c->T; q0 += block) {
        const int rows_end = q0 + block < c->T ? q0 + block : c->T;
        tiles += forward ? (rows_end + tile - 1) / tile : (c->T - q0 + tile - 1) / tile;
    }
    return tiles * c->B * c->NH;
}

/* The kernel k once more with each block's phase profile (its own
 * instance, with the clock reads): '# profile' lines
 * (tests/gpu/block_profile.h) from the second of two calls, so that a GPU
 * tells where a block's time goes. Checked: its result against the tuned
 * shape's (within the tolerance), a whole record from every block (its
 * producer's part too, where it has one), and their tiles. Returns the
 * failed checks. */
static int profile_kernel(tg_o o, const attn_case *c, const attn_buffers *buf, const profiled_kernel *k) {
    char label[96], verdict[96];
    snprintf(label, sizeof label, "%d,%d,%d,%d %s", c->B, c->NH, c->T, c->HS, k->name);
    cuda_block_profile *dev = o->alloc(o, k->blocks * sizeof *dev, "bench_attention: the blocks' profile");
    double ms = 0.0;
    int ran = 1;
    for (int call = 0; call < 2 && ran; call++) {
        o->zero(o, dev, k->blocks * sizeof *dev); /* a block that writes no record leaves a zero start */
        o->zero(o, k->result, k->n_result * 2);
        o->timer_begin(o);
        ran = k->run(o, c, buf, dev);
        ms = o->timer_end_ms(o);
    }
    if (!ran) {
        printf("# profile %s: no profiled instance here (head sizes 64 and 96 on compute capability 9.0)\n", label);
        o->free(o, dev);
        return 0;
    }
    cuda_block_profile *recs = tg_malloc(k->blocks * sizeof *recs, "bench_attention: the blocks' profile");
    o->download(o, recs, dev, k->blocks * sizeof *recs);
    o->free(o, dev);
    block_profile_sum sum;
    block_profile_summarize(recs, (int)k->blocks, &sum);
    free(recs);
    printf("# profile %s: one call with the clock reads took %.4f ms; a tile: %s\n", label, ms, k->tile);
    block_profile_print(stdout, label, &sum, k->phase);
    const int ok = check_shape(o, k->result, k->want, k->n_result, 0, verdict, sizeof verdict) && sum.missing == 0 &&
                   (!k->phase(0, 0) || sum.producer_missing == 0) && sum.tiles == k->tiles;
    printf("# profile %s: %s (result %s; %.0f tiles recorded of %.0f)\n", label, ok ? "ok" : "not ok", verdict, sum.tiles,
           k->tiles);
    return !ok;
}

/* The TMA forward's profile (every run's forward at head size 64). */
int profile_forward(tg_o o, const attn_case *c, const attn_buffers *buf) {
    const profiled_kernel k = {"wgmma_ws", "128 keys against a block's 128 rows",
                               cuda_attention_forward_wgmma_ws_blocks(c->B, c->T, c->NH), run_forward_profiled,
                               cuda_attention_forward_wgmma_ws_phase, buf->out, buf->tuned_out, buf->n_out,
                               profile_tiles(c, 128, 128, 1)};
    return profile_kernel(o, c, buf, &k);
}

/* The wgmma backward's profile (every run's backward at 64 and 96). */
int profile_backward(tg_o o, const attn_case *c, const attn_buffers *buf) {
    const profiled_kernel k = {"wgmma backward", "64 query rows against a block's 128 keys",
                               cuda_attention_backward_wgmma_blocks(c->B, c->T, c->NH), run_backward_profiled,
                               cuda_attention_backward_wgmma_phase, buf->dqkv, buf->tuned_dqkv, buf->n_qkv,
                               profile_tiles(c, 128, 64, 0)};
    return profile_kernel(o, c, buf, &k);
}
