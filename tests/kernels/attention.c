/* Kernel family: causal self-attention with dropout (attention_*).
 * CPU: each kernel against a double-precision reference and its backward
 * against finite differences (tests/kernels/check.h); with CUDA (or the
 * emulation, tests/emu) also the CUDA backend against the CPU one
 * (tests/kernels/twin.h). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/exp2_poly.cuh"
#include "tests/kernels/check.h"

/* ---- attention ---- */
typedef struct { int B, T, NH, HS; tg_dropout drop; } att_ctx;
static void att_ref(const double *qkv, double *out, void *vctx) {
    att_ctx *k = vctx;
    const int B = k->B, T = k->T, NH = k->NH, HS = k->HS, Cl = NH * HS, C3 = 3 * Cl;
    double *s = malloc(sizeof(double) * T);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                double mx = -INFINITY, sum = 0;
                for (int u = 0; u <= t; u++) {
                    double d = 0;
                    for (int i = 0; i < HS; i++)
                        d += qkv[(b * T + t) * C3 + h * HS + i] * qkv[(b * T + u) * C3 + Cl + h * HS + i];
                    s[u] = d / sqrt((double)HS);
                    mx = fmax(mx, s[u]);
                }
                for (int u = 0; u <= t; u++) sum += (s[u] = exp(s[u] - mx));
                for (int i = 0; i < HS; i++) {
                    double acc = 0;
                    for (int u = 0; u <= t; u++) {
                        double keep = 1.0;
                        if (k->drop.p > 0) {
                            uint64_t seq = k->drop.row0 + (uint64_t)b, head = (uint64_t)(k->drop.head0 + h);
                            keep = cpu_dropout_scale(&k->drop, ((seq * (uint64_t)k->drop.heads_total + head) * (uint64_t)T + (uint64_t)t) * (uint64_t)T + (uint64_t)u);
                        }
                        acc += s[u] / sum * keep * qkv[(b * T + u) * C3 + 2 * Cl + h * HS + i];
                    }
                    out[(b * T + t) * Cl + h * HS + i] = acc;
                }
            }
    free(s);
}
/* lse[b, h, t] = log sum_u exp(q_t . k_u / sqrt(HS)) over u <= t. */
static void att_lse_ref(const double *qkv, double *lse, const att_ctx *k) {
    const int T = k->T, NH = k->NH, HS = k->HS, Cl = NH * HS, C3 = 3 * Cl;
    for (int b = 0; b < k->B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                double sum = 0;
                for (int u = 0; u <= t; u++) {
                    double d = 0;
                    for (int i = 0; i < HS; i++)
                        d += qkv[(b * T + t) * C3 + h * HS + i] * qkv[(b * T + u) * C3 + Cl + h * HS + i];
                    sum += exp(d / sqrt((double)HS));
                }
                lse[(b * NH + h) * T + t] = log(sum);
            }
}
static void test_attention_with(tally *t, tg_dropout drop, const char *fwd_name, const char *bwd_name) {
    att_ctx k = {2, 13, 3, 5, drop};
    const int n_in = k.B * k.T * 3 * k.NH * k.HS, n_out = k.B * k.T * k.NH * k.HS;
    float *qkv = randf(n_in, 40, 1.5f), *R = randf(n_out, 41, 1);
    double *qd = to_d(qkv, n_in), *Rd = to_d(R, n_out), *want = malloc(sizeof(double) * n_out);
    att_ref(qd, want, &k);
    const int n_lse = k.B * k.NH * k.T;
    float *out = poisoned(n_out), *lse = poisoned(n_lse);
    cpu_attention_forward(NULL, out, lse, qkv, k.B, k.T, k.NH, k.HS, drop);
    expect_close(t, fwd_name, out, want, n_out, 1e-5, 1e-6);
    if (drop.p <= 0) { /* lse against the reference's (dropout does not touch it) */
        double *lse_want = malloc(sizeof(double) * n_lse);
        att_lse_ref(qd, lse_want, &k);
        expect_close(t, "attention_forward_lse", lse, lse_want, n_lse, 1e-5, 1e-6);
        free(lse_want);
    }
    float *dqkv = poisoned(n_in);
    cpu_attention_backward(NULL, dqkv, R, out, qkv, lse, k.B, k.T, k.NH, k.HS, drop);
    double *g = fd_grad(att_ref, &k, qd, n_in, Rd, n_out, 1e-5);
    expect_close(t, bwd_name, dqkv, g, n_in, 1e-4, 1e-5);
    free(g); free(qkv); free(R); free(qd); free(Rd); free(want); free(out); free(lse); free(dqkv);
}

/* exp2_poly (kernels/cuda/exp2_poly.cuh: the wgmma_ws forward's
 * polynomial exponentials) against 2^x in double, every 1e-4 over [-130,
 * 0]: within EXP2_POLY_TOL relative where 2^x is a normal float, never
 * negative or NaN below, exactly 0 at -inf and 1 at 0. */
#define EXP2_POLY_TOL 1.1e-4
static void check_exp2_poly(tally *t) {
    double worst = 0.0, worst_x = 0.0;
    int bad_tiny = 0;
    for (int i = 0; i <= 1300000; i++) {
        const float x = -130.0f + 1e-4f * (float)i, y = exp2_poly(x);
        const double want = exp2((double)x);
        if (x >= -126.0f) {
            const double rel = fabs((double)y - want) / want;
            if (!(rel <= worst)) worst = rel, worst_x = x; /* NaN too */
        } else if (!(y >= 0.0f && y < 1.2e-38f)) {
            bad_tiny++;
        }
    }
    report(t, worst <= EXP2_POLY_TOL, "exp2_poly_relative_error", "worst %.3g at x = %.6g (bound %g)", worst, worst_x,
           EXP2_POLY_TOL);
    report(t, bad_tiny == 0, "exp2_poly_below_normal_floats", "%d results outside [0, 2^-126) below x = -126", bad_tiny);
    report(t, exp2_poly(-INFINITY) == 0.0f && exp2_poly(0.0f) == 1.0f && exp2_poly(-1.0f) == 0.5f, "exp2_poly_exact_points",
           "2^-inf %g, 2^0 %g, 2^-1 %g", (double)exp2_poly(-INFINITY), (double)exp2_poly(0.0f), (double)exp2_poly(-1.0f));
}

void kcheck_attention(tally *t) {
    check_exp2_poly(t);
    test_attention_with(t, (tg_dropout){0}, "attention_forward", "attention_backward_fd");
    /* heads 2..4 of 7 of sequences 5.. : a TP rank's slice of the masks */
    tg_dropout drop = {0.3f, 99, 12345, 5, 2, 7, NULL};
    test_attention_with(t, drop, "attention_forward_dropout", "attention_backward_dropout_fd");
}

#ifdef TG_CUDA
/* ---- CUDA against the CPU ---- */
#include "kernels/cuda/cuda_ctx.h"
#include "kernels/cuda/kernels.h"
#include "util/rng_core.h"
#include "tests/kernels/twin.h"
#include "util/err.h"

/* One forward and backward against the CPU: inputs uniform in [-amp, amp)
 * (a large amp peaks the rows, so their running max jumps from key tile to
 * key tile), qkv starting `offset` elements into its buffer (an odd offset
 * is not 16-byte aligned: the kernels' element-wise path). */
static void attention_case(env *e, int B, int T, int NH, int HS, tg_dropout drop, float amp, size_t offset) {
    NEED(e, attention_forward);
    NEED(e, attention_backward);
    const size_t n_qkv = (size_t)B * T * 3 * NH * HS, n_out = (size_t)B * T * NH * HS, n_lse = (size_t)B * NH * T;
    char shape[160];
    snprintf(shape, sizeof shape, "B=%d T=%d NH=%d HS=%d p=%g row0=%llu head0=%d/%d amp=%g qkv+%zu", B, T, NH, HS,
             (double)drop.p, (unsigned long long)drop.row0, drop.head0, drop.heads_total, (double)amp, offset);
    twin qkv_buf = tw_rand(e, ACT, n_qkv + offset, -amp, amp), qkv = qkv_buf;
    qkv.c = (float *)qkv_buf.c + offset;
    qkv.g = (char *)qkv_buf.g + offset * gpu_elem(e, ACT);
    qkv.n = n_qkv;
    twin out = tw_out(e, ACT, n_out), lse = tw_out(e, F32, n_lse);
    e->cpu->attention_forward(e->cpu, out.c, lse.c, qkv.c, B, T, NH, HS, drop);
    e->gpu->attention_forward(e->gpu, out.g, lse.g, qkv.g, B, T, NH, HS, drop);
    check(e, out, e->tol, "attention_forward out %s", shape);
    check(e, lse, e->tol, "attention_forward lse %s", shape);
    /* backward from the reference's output and lse */
    twin out_r = tw_ref(e, out), lse_r = tw_ref(e, lse), dout = tw_rand(e, ACT, n_out, -1, 1), dqkv = tw_out(e, ACT, n_qkv);
    e->cpu->attention_backward(e->cpu, dqkv.c, dout.c, out_r.c, qkv.c, lse_r.c, B, T, NH, HS, drop);
    e->gpu->attention_backward(e->gpu, dqkv.g, dout.g, out_r.g, qkv.g, lse_r.g, B, T, NH, HS, drop);
    check(e, dqkv, e->tol, "attention_backward dqkv %s", shape);
    twin all[] = {qkv_buf, out, lse, out_r, lse_r, dout, dqkv};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) tw_free(e, all[i]);
}

void cuda_test_attention(env *e, int B, int T, int NH, int HS, tg_dropout drop) {
    attention_case(e, B, T, NH, HS, drop, 1.0f, 0);
}

/* The flash kernels' edges: T not a multiple of any tile (and shorter than
 * one), 1 to 3 heads per rank, head sizes 64 and 128 (and 24, padded).
 * With bf16, head sizes that are multiples of 16 run on tensor cores
 * (64-row query tiles against 64-key tiles): T = 130 .. 200 spans several
 * of each with a partial last one, T = 128 none; every head-size instance
 * (16 .. 128) runs somewhere; peaked rows and a misaligned qkv. */
void cuda_test_attention_shapes(env *e) {
    const tg_dropout drop = {0.2f, 1234, 81, 3, 1, 4, NULL}, none = {0};
    cuda_test_attention(e, 1, 5, 1, 64, none);
    cuda_test_attention(e, 2, 77, 2, 64, drop);
    cuda_test_attention(e, 1, 70, 3, 128, none);
    cuda_test_attention(e, 1, 45, 1, 128, drop);
    cuda_test_attention(e, 1, 150, 2, 16, drop);
    cuda_test_attention(e, 2, 130, 1, 32, none);
    cuda_test_attention(e, 1, 128, 1, 80, drop);
    attention_case(e, 1, 150, 1, 64, none, 4.0f, 0);
    attention_case(e, 1, 100, 3, 48, drop, 1.0f, 1);
    if (e->quick) return;
    cuda_test_attention(e, 1, 200, 3, 64, drop);
    cuda_test_attention(e, 1, 200, 2, 128, none);
    cuda_test_attention(e, 1, 150, 1, 96, drop);
    cuda_test_attention(e, 1, 190, 2, 112, none);
    attention_case(e, 2, 200, 2, 128, drop, 3.0f, 1);
}

/* The tensor-core backward (bf16, HS a multiple of 16; kernels/cuda/
 * flash_bwd_mma.cuh) at its edges: T over several 64-row blocks with a
 * partial last one (and a whole number of them), HS 16, 32, 64 and 128, 1
 * to 4 heads, dropout on and off. The 16 pairs of T = 200 outgrow D's
 * scratch under EMU_SCRATCH_BYTES=12000 (15 pairs), so that run splits
 * them in two rounds. In fp32 the same shapes check the CUDA-core path. */
void cuda_test_attention_backward_tiles(env *e) {
    const tg_dropout drop = {0.2f, 4321, 84, 7, 1, 6, NULL};
    cuda_test_attention(e, 1, 150, 2, 64, drop);
    cuda_test_attention(e, 4, 200, 4, 16, drop);
    cuda_test_attention(e, 1, 129, 3, 128, (tg_dropout){0});
    if (e->quick) return;
    cuda_test_attention(e, 2, 200, 1, 128, drop);
    cuda_test_attention(e, 1, 192, 3, 32, (tg_dropout){0});
    cuda_test_attention(e, 1, 150, 2, 64, (tg_dropout){0});
}

/* Every run's order of the tensor-core attention's blocks. */
#define ORDER_DEFAULT ((cuda_flash_order){CUDA_FLASH_PAIRS_FIRST, 0})

/* One head size's block shapes, each against the CPU and, where it has the
 * tuned shape's keys per tile, bit for bit against attention_forward. */
static void forward_shapes_of(env *e, int HS) {
    enum { MAX_SHAPES = 8 };
    cuda_flash_shape shapes[MAX_SHAPES];
    const int n = cuda_attention_forward_shapes(HS, shapes, MAX_SHAPES), B = 1, T = 200, NH = 2;
    char name[192];
    snprintf(name, sizeof name, "attention_forward_shapes HS=%d: %d shapes", HS, n);
    check_true(e, n >= 2 && n <= MAX_SHAPES, name, "(the tuned shape and at least one other)");
    if (n < 1 || n > MAX_SHAPES) return;
    const size_t n_qkv = (size_t)B * T * 3 * NH * HS, n_out = (size_t)B * T * NH * HS;
    twin qkv = tw_rand(e, ACT, n_qkv, -2.0f, 2.0f), out = tw_out(e, ACT, n_out), lse = tw_out(e, F32, (size_t)B * NH * T);
    e->cpu->attention_forward(e->cpu, out.c, lse.c, qkv.c, B, T, NH, HS, (tg_dropout){0});
    e->gpu->attention_forward(e->gpu, out.g, lse.g, qkv.g, B, T, NH, HS, (tg_dropout){0});
    void *tuned_out = gpu_bytes(e, out), *tuned_lse = gpu_bytes(e, lse);
    for (int k = 0; k < n; k++) {
        const cuda_flash_shape *s = &shapes[k];
        char shape[112];
        snprintf(shape, sizeof shape, "HS=%d shape %d (row tiles %d, keys %d, q_shared %d, blocks/SM %d, s_ahead %d)", HS, k,
                 s->row_tiles, s->keys, s->q_shared, s->blocks_per_sm, s->s_ahead);
        poison(e->gpu, out.g, n_out * gpu_elem(e, ACT));
        poison(e->gpu, lse.g, (size_t)B * NH * T * sizeof(float));
        const int ran = cuda_attention_forward_shaped(e->gpu, out.g, lse.g, qkv.g, B, T, NH, HS, k, ORDER_DEFAULT);
        sync_gpu(e);
        snprintf(name, sizeof name, "attention_forward_shaped runs %s", shape);
        check_true(e, ran == 1, name, "");
        check(e, out, e->tol, "attention_forward_shaped out %s", shape);
        check(e, lse, e->tol, "attention_forward_shaped lse %s", shape);
        if (s->keys != shapes[0].keys) continue;
        void *got_out = gpu_bytes(e, out), *got_lse = gpu_bytes(e, lse);
        snprintf(name, sizeof name, "attention_forward_shaped, the tuned shape's bits: %s", shape);
        check_true(e, memcmp(got_out, tuned_out, n_out * gpu_elem(e, ACT)) == 0 &&
                          memcmp(got_lse, tuned_lse, (size_t)B * NH * T * sizeof(float)) == 0,
                   name, "");
        free(got_out);
        free(got_lse);
    }
    snprintf(name, sizeof name, "attention_forward_shaped HS=%d: no shape %d", HS, n);
    check_true(e, cuda_attention_forward_shaped(e->gpu, out.g, lse.g, qkv.g, B, T, NH, HS, n, ORDER_DEFAULT) == 0, name, "");
    free(tuned_out);
    free(tuned_lse);
    tw_free(e, qkv);
    tw_free(e, out);
    tw_free(e, lse);
}

attn_bwd attn_bwd_inputs(env *e, int B, int T, int NH, int HS, float amp) {
    const size_t n_qkv = (size_t)B * T * 3 * NH * HS, n_out = (size_t)B * T * NH * HS, n_lse = (size_t)B * NH * T;
    attn_bwd a = {.B = B, .T = T, .NH = NH, .HS = HS};
    a.qkv = tw_rand(e, ACT, n_qkv, -amp, amp), a.out = tw_out(e, ACT, n_out), a.lse = tw_out(e, F32, n_lse);
    e->cpu->attention_forward(e->cpu, a.out.c, a.lse.c, a.qkv.c, B, T, NH, HS, (tg_dropout){0});
    a.out_r = tw_ref(e, a.out), a.lse_r = tw_ref(e, a.lse), a.dout = tw_rand(e, ACT, n_out, -1, 1), a.dqkv = tw_out(e, ACT, n_qkv);
    e->cpu->attention_backward(e->cpu, a.dqkv.c, a.dout.c, a.out_r.c, a.qkv.c, a.lse_r.c, B, T, NH, HS, (tg_dropout){0});
    return a;
}

void attn_bwd_free(env *e, attn_bwd *a) {
    twin all[] = {a->qkv, a->out, a->lse, a->out_r, a->lse_r, a->dout, a->dqkv};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) tw_free(e, all[i]);
}

int attn_bwd_same_kv(const attn_bwd *a, const void *x, const void *y) {
    const size_t row = 3 * (size_t)a->NH * a->HS * 2, q_bytes = (size_t)a->NH * a->HS * 2;
    int same = 1;
    for (size_t r = 0; r < (size_t)a->B * a->T; r++)
        same = same && memcmp((const char *)x + r * row + q_bytes, (const char *)y + r * row + q_bytes, row - q_bytes) == 0;
    return same;
}

/* One head size's backward shapes (the dq kernel's row tiles and the dk,
 * dv kernel's key tiles a warp), each against the CPU and bit for bit
 * against attention_backward: every shape gives its bits. T = 200 ends in
 * a partial block of either kernel at every shape. */
static void backward_shapes_of(env *e, int HS, int want_at_least) {
    enum { MAX_SHAPES = 8 };
    cuda_flash_bwd_shape shapes[MAX_SHAPES];
    const int n = cuda_attention_backward_shapes(HS, shapes, MAX_SHAPES), B = 1, T = 200, NH = 2;
    char name[160];
    snprintf(name, sizeof name, "attention_backward_shapes HS=%d: %d shapes", HS, n);
    check_true(e, n >= want_at_least && n <= MAX_SHAPES, name, "");
    if (n < 1 || n > MAX_SHAPES) return;
    attn_bwd a = attn_bwd_inputs(e, B, T, NH, HS, 2.0f);
    const size_t bytes = a.dqkv.n * gpu_elem(e, ACT);
    e->gpu->attention_backward(e->gpu, a.dqkv.g, a.dout.g, a.out_r.g, a.qkv.g, a.lse_r.g, B, T, NH, HS, (tg_dropout){0});
    void *tuned = gpu_bytes(e, a.dqkv);
    for (int k = 0; k < n; k++) {
        char shape[64];
        snprintf(shape, sizeof shape, "HS=%d shape %d (dq row tiles %d, dk dv key tiles %d)", HS, k, shapes[k].dq_row_tiles,
                 shapes[k].dkv_key_tiles);
        poison(e->gpu, a.dqkv.g, bytes);
        const int ran =
            cuda_attention_backward_shaped(e->gpu, a.dqkv.g, a.dout.g, a.out_r.g, a.qkv.g, a.lse_r.g, B, T, NH, HS, k);
        sync_gpu(e);
        snprintf(name, sizeof name, "attention_backward_shaped runs %s", shape);
        check_true(e, ran == 1, name, "");
        check(e, a.dqkv, e->tol, "attention_backward_shaped dqkv %s", shape);
        snprintf(name, sizeof name, "attention_backward_shaped, attention_backward's bits: %s", shape);
        check_true(e, gpu_holds(e, a.dqkv, tuned), name, "");
    }
    snprintf(name, sizeof name, "attention_backward_shaped HS=%d: no shape %d", HS, n);
    check_true(e, cuda_attention_backward_shaped(e->gpu, a.dqkv.g, a.dout.g, a.out_r.g, a.qkv.g, a.lse_r.g, B, T, NH, HS, n) == 0,
               name, "");
    free(tuned);
    attn_bwd_free(e, &a);
}

/* The block orders other than every run's (kernels.h's cuda_flash_order):
 * the tiles along x, and L2 groups of the computed size (here all 6 pairs
 * in one) and of 4 pairs (a last group of 2). */
static const cuda_flash_order other_orders[] = {{CUDA_FLASH_TILES_FIRST, 0}, {CUDA_FLASH_L2_GROUPS, 0}, {CUDA_FLASH_L2_GROUPS, 4}};
enum { N_OTHER_ORDERS = sizeof other_orders / sizeof other_orders[0] };

/* One head size's forward shapes (the first only when quick), each in
 * every other order, bit for bit against the shape in every run's order:
 * each block does the same work wherever the grid puts it, so a block
 * mapped to the wrong pair or tile leaves rows poisoned or wrong. 6 pairs
 * of T = 200 (a partial last tile at every shape). */
static void forward_orders_of(env *e, int HS) {
    const int B = 2, T = 200, NH = 3, n = e->quick ? 1 : cuda_attention_forward_shapes(HS, NULL, 0);
    const size_t n_qkv = (size_t)B * T * 3 * NH * HS, n_out = (size_t)B * T * NH * HS, n_lse = (size_t)B * NH * T;
    twin qkv = tw_rand(e, ACT, n_qkv, -2.0f, 2.0f), out = tw_out(e, ACT, n_out), lse = tw_out(e, F32, n_lse);
    for (int k = 0; k < n; k++) {
        cuda_attention_forward_shaped(e->gpu, out.g, lse.g, qkv.g, B, T, NH, HS, k, ORDER_DEFAULT);
        sync_gpu(e);
        void *want_out = gpu_bytes(e, out), *want_lse = gpu_bytes(e, lse);
        for (int i = 0; i < N_OTHER_ORDERS; i++) {
            const cuda_flash_order o = other_orders[i];
            poison(e->gpu, out.g, n_out * gpu_elem(e, ACT));
            poison(e->gpu, lse.g, n_lse * sizeof(float));
            const int ran = cuda_attention_forward_shaped(e->gpu, out.g, lse.g, qkv.g, B, T, NH, HS, k, o);
            sync_gpu(e);
            char name[160];
            snprintf(name, sizeof name, "attention_forward_shaped in order %s (group %d), every run's order's bits: HS=%d shape %d",
                     cuda_flash_order_name(o.order), o.group, HS, k);
            check_true(e, ran == 1 && gpu_holds(e, out, want_out) && gpu_holds(e, lse, want_lse), name, "");
        }
        free(want_out);
        free(want_lse);
    }
    twin all[] = {qkv, out, lse};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) tw_free(e, all[i]);
}

/* The orders' names, the L2 group sizes the kernels' comments give, and an
 * order the kernels do not know, refused. */
static void order_table(env *e) {
    check_true(e, cuda_flash_order_name(CUDA_FLASH_TILES_FIRST) && !strcmp(cuda_flash_order_name(CUDA_FLASH_TILES_FIRST), "tiles first") &&
                      cuda_flash_order_name(CUDA_FLASH_ORDERS) == NULL,
               "cuda_flash_order_name", "");
    char name[96];
    snprintf(name, sizeof name, "cuda_flash_l2_group: %d pairs at T 1024 HS 64, %d at HS 96, 1 at T 2^20 HS 128",
             cuda_flash_l2_group(1024, 64), cuda_flash_l2_group(1024, 96));
    check_true(e, cuda_flash_l2_group(1024, 64) == 100 && cuda_flash_l2_group(1024, 96) == 66 && cuda_flash_l2_group(1 << 20, 128) == 1,
               name, "");
    const cuda_flash_order bad[] = {{CUDA_FLASH_ORDERS, 0}, {-1, 0}, {CUDA_FLASH_L2_GROUPS, -1}};
    int refused = 0;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        refused += cuda_attention_forward_shaped(e->gpu, NULL, NULL, NULL, 1, 1, 1, 64, 0, bad[i]) == 0;
    check_true(e, refused == 3, "attention_forward_shaped refuses an unknown order", "");
}

/* The tensor-core forward's other block shapes (kernels/cuda/flash_fwd.cu's
 * fm_variants, for tuning: tests/gpu/bench_attention.c times them): T = 200
 * spans 64- and 128-key tiles with a partial last one. Shape 0 must be the
 * one every run takes (the same bits), and a shape with the same keys per
 * tile must give those bits too. The same for the backward's shapes
 * (flash_bwd.cu's mma_bwd_variants; one at 96 and 128, three at 64), all
 * of which give the backward's bits. Then every forward shape (the tuned
 * one only when quick) at head sizes 64 and 96 in each order of the
 * blocks, with the default order's bits. Float32 activations: refused. */
void cuda_test_attention_forward_shapes(env *e) {
    NEED(e, attention_forward);
    if (e->act != TG_BF16) {
        check_true(e, cuda_attention_forward_shaped(e->gpu, NULL, NULL, NULL, 1, 1, 1, 64, 0, ORDER_DEFAULT) == 0,
                   "attention_forward_shaped refuses float32 activations", "");
        check_true(e, cuda_attention_backward_shaped(e->gpu, NULL, NULL, NULL, NULL, NULL, 1, 1, 1, 64, 0) == 0,
                   "attention_backward_shaped refuses float32 activations", "");
        return;
    }
    static const int head_sizes[] = {64, 96, 128};
    for (size_t i = 0; i < sizeof head_sizes / sizeof head_sizes[0]; i++) {
        forward_shapes_of(e, head_sizes[i]);
        backward_shapes_of(e, head_sizes[i], head_sizes[i] == 64 ? 3 : 1);
    }
    order_table(e);
    /* 64: two row tiles a warp in the tuned forward; 96: one */
    forward_orders_of(e, 64);
    forward_orders_of(e, 96);
    check_true(e, cuda_attention_forward_shapes(80, NULL, 0) == 0, "attention_forward_shapes: none at HS=80", "");
    check_true(e, cuda_attention_backward_shapes(80, NULL, 0) == 0, "attention_backward_shapes: none at HS=80", "");
}
/* A Hopper forward under test: its entry point, its kernels.attention
 * name and its keys a tile (where qkv is 16-byte aligned: the TMA forward
 * hands the rest to the cp.async one, 64 keys a tile). */
typedef struct {
    const char *name; /* "attention_forward_wgmma" or "attention_forward_wgmma_ws" */
    const char *kernel; /* NULL: no kernels.attention value runs it */
    int (*run)(tg_o, void *, float *, const void *, int, int, int, int, tg_dropout);
    int keys;
    int poly; /* one exponential in poly by exp2_poly: not the mma.sync forward's bits */
} hopper_forward;
static const hopper_forward reference_wgmma = {"attention_forward_wgmma", "wgmma", cuda_attention_forward_wgmma, 64, 0};
static const hopper_forward pipelined_wgmma = {"attention_forward_wgmma_ws", "wgmma_ws", cuda_attention_forward_wgmma_ws, 128, 0};
/* The persistent TMA forward (bench_attention's A/B; no kernels.attention
 * value): one block over every item, three (rounds dealt forwards and in
 * reverse, the last one partial) and one an SM. */
static int persistent_in_1(tg_o o, void *out, float *lse, const void *qkv, int B, int T, int NH, int HS, tg_dropout drop) {
    return cuda_attention_forward_wgmma_ws_persistent(o, out, lse, qkv, B, T, NH, HS, drop, 1);
}
static int persistent_in_3(tg_o o, void *out, float *lse, const void *qkv, int B, int T, int NH, int HS, tg_dropout drop) {
    return cuda_attention_forward_wgmma_ws_persistent(o, out, lse, qkv, B, T, NH, HS, drop, 3);
}
static int persistent_per_sm(tg_o o, void *out, float *lse, const void *qkv, int B, int T, int NH, int HS, tg_dropout drop) {
    return cuda_attention_forward_wgmma_ws_persistent(o, out, lse, qkv, B, T, NH, HS, drop, 0);
}
static const hopper_forward persistent_1 = {"attention_forward_wgmma_ws_persistent (1 block)", NULL, persistent_in_1, 128, 0};
static const hopper_forward persistent_3 = {"attention_forward_wgmma_ws_persistent (3 blocks)", NULL, persistent_in_3, 128, 0};
static const hopper_forward persistent_sm = {"attention_forward_wgmma_ws_persistent (a block an SM)", NULL, persistent_per_sm, 128, 0};
/* The TMA forward with one exponential in 4 (8) on the FMA units
 * (bench_attention's A/B; head size 64, aligned qkv). */
static int poly_in_4(tg_o o, void *out, float *lse, const void *qkv, int B, int T, int NH, int HS, tg_dropout drop) {
    return drop.p > 0.0f ? 0 : cuda_attention_forward_wgmma_ws_poly(o, out, lse, qkv, B, T, NH, HS, 4);
}
static int poly_in_8(tg_o o, void *out, float *lse, const void *qkv, int B, int T, int NH, int HS, tg_dropout drop) {
    return drop.p > 0.0f ? 0 : cuda_attention_forward_wgmma_ws_poly(o, out, lse, qkv, B, T, NH, HS, 8);
}
static const hopper_forward poly_4 = {"attention_forward_wgmma_ws_poly (one exponential in 4)", NULL, poly_in_4, 128, 4};
static const hopper_forward poly_8 = {"attention_forward_wgmma_ws_poly (one exponential in 8)", NULL, poly_in_8, 128, 8};

/* The mma.sync forward with `keys` keys a tile at head size HS: the tuned
 * shape (64), or the first built shape with 128 (-1 where none is). */
static int mma_shape_of(int HS, int keys) {
    cuda_flash_shape shapes[16];
    const int n = cuda_attention_forward_shapes(HS, shapes, 16);
    for (int k = 0; k < n && k < 16; k++)
        if (shapes[k].keys == keys) return k;
    return -1;
}

/* One case of a wgmma forward (flash_fwd_wgmma.cu, or flash_fwd_wgmma_ws.cu):
 * against the CPU (the bf16 tolerance, as the mma.sync forward), and
 * against the mma.sync forward with as many keys a tile (mma_shape_of): bit
 * for bit under the emulation (the same key tiles per row, the same
 * softmax code, P rounded the same way, and the emulated wgmma and
 * mma.sync both summing each k16 product in order into float32), within
 * the tolerance on a GPU (the tensor cores' internal orders may differ).
 * Then the same through attention_forward with kernels.attention = wgmma
 * (or wgmma_ws). */
static void wgmma_case(env *e, const hopper_forward *k, int B, int T, int NH, int HS, float amp, size_t offset) {
    const size_t n_qkv = (size_t)B * T * 3 * NH * HS, n_out = (size_t)B * T * NH * HS, n_lse = (size_t)B * NH * T;
    char shape[128], name[256];
    snprintf(shape, sizeof shape, "B=%d T=%d NH=%d HS=%d amp=%g qkv+%zu", B, T, NH, HS, (double)amp, offset);
    twin qkv_buf = tw_rand(e, ACT, n_qkv + offset, -amp, amp), qkv = qkv_buf;
    qkv.c = (float *)qkv_buf.c + offset;
    qkv.g = (char *)qkv_buf.g + offset * gpu_elem(e, ACT);
    qkv.n = n_qkv;
    twin out = tw_out(e, ACT, n_out), lse = tw_out(e, F32, n_lse);
    e->cpu->attention_forward(e->cpu, out.c, lse.c, qkv.c, B, T, NH, HS, (tg_dropout){0});
    const int keys = (offset * gpu_elem(e, ACT)) % 16 == 0 ? k->keys : 64, mma_shape = mma_shape_of(HS, keys);
    snprintf(name, sizeof name, "%s: an mma.sync shape of %d keys a tile at HS=%d", k->name, keys, HS);
    check_true(e, mma_shape >= 0, name, "");
    cuda_attention_forward_shaped(e->gpu, out.g, lse.g, qkv.g, B, T, NH, HS, mma_shape < 0 ? 0 : mma_shape, ORDER_DEFAULT);
    void *mma_out = gpu_bytes(e, out), *mma_lse = gpu_bytes(e, lse);
    poison(e->gpu, out.g, n_out * gpu_elem(e, ACT));
    poison(e->gpu, lse.g, n_lse * sizeof(float));
    const int ran = k->run(e->gpu, out.g, lse.g, qkv.g, B, T, NH, HS, (tg_dropout){0});
    sync_gpu(e);
    snprintf(name, sizeof name, "%s runs %s", k->name, shape);
    check_true(e, ran == 1, name, "");
    check(e, out, e->tol, "%s out %s", k->name, shape);
    check(e, lse, e->tol, "%s lse %s", k->name, shape);
    void *got_out = gpu_bytes(e, out), *got_lse = gpu_bytes(e, lse);
    const int same = memcmp(got_out, mma_out, n_out * gpu_elem(e, ACT)) == 0 && memcmp(got_lse, mma_lse, n_lse * sizeof(float)) == 0;
#ifdef TG_CUDA_EMU
    if (k->poly) { /* exp2_poly's roundings differ from exp2's: some P rounds to another bf16 */
        snprintf(name, sizeof name, "%s, not the mma.sync forward's bits (the polynomial ran; emulation): %s", k->name, shape);
        check_true(e, !same, name, "");
    } else {
        snprintf(name, sizeof name, "%s, the mma.sync forward's bits (emulation): %s", k->name, shape);
        check_true(e, same, name, "");
    }
#else
    (void)same;
#endif
    /* the differential check that holds on a GPU too: out within the tolerance of the mma.sync forward's */
    double diff = 0.0, scale = 0.0;
    for (size_t i = 0; i < n_out; i++) {
        const double g = tg_bf16_to_f32(((const uint16_t *)got_out)[i]), w = tg_bf16_to_f32(((const uint16_t *)mma_out)[i]);
        diff = isfinite(g) ? fmax(diff, fabs(g - w)) : INFINITY;
        scale = fmax(scale, fabs(w));
    }
    char detail[64];
    snprintf(detail, sizeof detail, "err=%.3g tol=%.3g", diff / fmax(scale, 1e-30), (double)e->tol);
    snprintf(name, sizeof name, "%s out within the tolerance of the mma.sync forward's: %s", k->name, shape);
    check_true(e, diff <= e->tol * fmax(scale, 1e-30), name, detail);
    /* kernels.attention = wgmma (wgmma_ws): attention_forward runs it (the same bits) */
    tg_err err;
    snprintf(name, sizeof name, "kernels.attention=%s selects %s %s", k->kernel ? k->kernel : "", k->name, shape);
    if (!k->kernel) {
        /* no kernels.attention value runs it */
    } else if (ops_cuda_attention(e->gpu, k->kernel, HS, 0.0, &err) != 0) {
        check_true(e, 0, name, err.msg);
    } else {
        poison(e->gpu, out.g, n_out * gpu_elem(e, ACT));
        e->gpu->attention_forward(e->gpu, out.g, lse.g, qkv.g, B, T, NH, HS, (tg_dropout){0});
        void *sel_out = gpu_bytes(e, out);
        check_true(e, memcmp(sel_out, got_out, n_out * gpu_elem(e, ACT)) == 0, name, "");
        free(sel_out);
        ops_cuda_attention(e->gpu, "mma", HS, 0.0, &err);
    }
    free(mma_out), free(mma_lse), free(got_out), free(got_lse);
    twin all[] = {qkv_buf, out, lse};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) tw_free(e, all[i]);
}

/* A form of the wgmma backward that no run takes (bench_attention's
 * comparisons) into a poisoned dqkv: what it returned; *slots_room:
 * whether the kernel scratch holds one pair's dq slots (the forms run
 * with dq by slots only). */
typedef int (*wgmma_backward_form)(tg_o o, void *dqkv, const void *dout, const void *out, const void *qkv, const float *lse,
                                   int B, int T, int NH, int HS);
static int run_wgmma_backward_form(env *e, attn_bwd *a, wgmma_backward_form form, int *slots_room) {
    poison(e->gpu, a->dqkv.g, a->dqkv.n * gpu_elem(e, ACT));
    const int ran = form(e->gpu, a->dqkv.g, a->dout.g, a->out_r.g, a->qkv.g, a->lse_r.g, a->B, a->T, a->NH, a->HS);
    sync_gpu(e);
    cuda_wgmma_dq route; /* asked with no sequences: the route with this scratch */
    cuda_attention_backward_wgmma_dq(e->gpu, NULL, NULL, NULL, NULL, NULL, 0, a->T, a->NH, a->HS, (tg_dropout){0},
                                     CUDA_WGMMA_DQ_SLOTS, &route);
    *slots_room = route == CUDA_WGMMA_DQ_SLOTS;
    return ran;
}

/* At head size 64, the wgmma backward with K and V read from shared
 * memory (cuda_attention_backward_wgmma_kv_shared, bench_attention's
 * comparison) against the default's dqkv `got`, where they are held in
 * registers: within the tolerance (the same bits under the emulation,
 * which computes both products alike). */
static void wgmma_backward_kv_shared(env *e, attn_bwd *a, const void *got, const char *shape) {
    char name[256], detail[64];
    int slots_room;
    const int ran = run_wgmma_backward_form(e, a, cuda_attention_backward_wgmma_kv_shared, &slots_room);
    if (!slots_room) { /* a small kernel scratch (EMU_SCRATCH_BYTES): it runs with dq by slots only */
        snprintf(name, sizeof name, "attention_backward_wgmma, K and V from shared memory: none without room for the slots %s", shape);
        check_true(e, ran == 0, name, "");
        return;
    }
    void *shared = gpu_bytes(e, a->dqkv);
    const double diff = bf16_rel_diff(shared, got, a->dqkv.n);
    snprintf(detail, sizeof detail, "err=%.3g tol=%.3g", diff, (double)e->tol);
    snprintf(name, sizeof name, "attention_backward_wgmma, K and V from shared memory: the held form's dqkv within the tolerance %s",
             shape);
    check_true(e, ran == 1 && diff <= e->tol, name, detail);
#ifdef TG_CUDA_EMU
    snprintf(name, sizeof name, "attention_backward_wgmma, K and V from shared memory: the held form's bits (emulation) %s", shape);
    check_true(e, ran == 1 && gpu_holds(e, a->dqkv, got), name, "");
#endif
    free(shared);
}

/* The wgmma backward with two stages of Q and dout
 * (cuda_attention_backward_wgmma_two_stages, bench_attention's comparison)
 * against the default's dqkv `got`, with three at head sizes 64 and 96:
 * the same bits, on a GPU too (only when each tile is copied differs);
 * refused at 128, where every run has two, and without room for the dq
 * slots. The runs' rings wrap (three stages: from T = 193 a key block
 * takes tile 3 into tile 0's stage, on the barrier's second phase). */
static void wgmma_backward_two_stages(env *e, attn_bwd *a, const void *got, const char *shape) {
    char name[256];
    int slots_room;
    const int ran = run_wgmma_backward_form(e, a, cuda_attention_backward_wgmma_two_stages, &slots_room);
    if (a->HS == 128 || !slots_room) {
        snprintf(name, sizeof name, "attention_backward_wgmma, two stages of Q and dout: none %s %s",
                 a->HS == 128 ? "at head size 128" : "without room for the slots", shape);
        check_true(e, ran == 0, name, "");
        return;
    }
    snprintf(name, sizeof name, "attention_backward_wgmma, two stages of Q and dout: the three stages' bits %s", shape);
    check_true(e, ran == 1 && gpu_holds(e, a->dqkv, got), name, "");
}

/* The wgmma backward in rounds of at most so many bytes of dq slots
 * (cuda_attention_backward_wgmma_rounds, bench_attention's comparison)
 * against the default's dqkv `got`, whose rounds hold as many pairs as the
 * scratch does: the same bits, on a GPU too, with a pair a round (bytes 1:
 * every pair's D, slots and reduction in a round of its own) and with
 * bench_attention's 24 MB; and with the slots summed in the kernel in
 * rounds of a pair (the scratch poisoned first, as wgmma_backward_summed
 * says why: each round's counts must be zeroed anew; in 24 MB these
 * cases are one round, which wgmma_backward_summed checks); refused
 * without room for the slots. */
static int rounds_of_a_pair(tg_o o, void *dqkv, const void *dout, const void *out, const void *qkv, const float *lse, int B,
                            int T, int NH, int HS) {
    return cuda_attention_backward_wgmma_rounds(o, dqkv, dout, out, qkv, lse, B, T, NH, HS, 1, 0);
}
static int rounds_of_24mb(tg_o o, void *dqkv, const void *dout, const void *out, const void *qkv, const float *lse, int B, int T,
                          int NH, int HS) {
    return cuda_attention_backward_wgmma_rounds(o, dqkv, dout, out, qkv, lse, B, T, NH, HS, (size_t)24 << 20, 0);
}
static int summed_rounds_of_a_pair(tg_o o, void *dqkv, const void *dout, const void *out, const void *qkv, const float *lse,
                                   int B, int T, int NH, int HS) {
    return cuda_attention_backward_wgmma_rounds(o, dqkv, dout, out, qkv, lse, B, T, NH, HS, 1, 1);
}
static void wgmma_backward_rounds(env *e, attn_bwd *a, const void *got, const char *shape) {
    static const wgmma_backward_form forms[] = {rounds_of_a_pair, rounds_of_24mb, summed_rounds_of_a_pair};
    static const size_t bytes[] = {1, (size_t)24 << 20, 1};
    static const bool summed[] = {false, false, true};
    char name[256];
    for (int i = 0; i < 3; i++) {
        const char *sum = summed[i] ? ", summed in the kernel" : "";
        int slots_room;
        if (summed[i]) {
            const cuda_ctx *ctx = cuda_ctx_of(e->gpu);
            poison(e->gpu, ctx->scratch, ctx->scratch_bytes);
        }
        const int ran = run_wgmma_backward_form(e, a, forms[i], &slots_room);
        if (!slots_room) {
            snprintf(name, sizeof name, "attention_backward_wgmma, rounds of %zu bytes of slots%s: none without room for them %s",
                     bytes[i], sum, shape);
            check_true(e, ran == 0, name, "");
            continue;
        }
        snprintf(name, sizeof name, "attention_backward_wgmma, rounds of %zu bytes of slots%s: every run's bits %s", bytes[i], sum,
                 shape);
        check_true(e, ran == 1 && gpu_holds(e, a->dqkv, got), name, "");
    }
}

/* The persistent wgmma backward (cuda_attention_backward_wgmma_persistent,
 * bench_attention's comparison) at head size 64 against the default's
 * dqkv `got`: the same bits, on a GPU too (the same tiles, run by fewer
 * blocks), in 1 block (every item in turn: the stages, the statistics
 * and the two sets of K and V carried across items), 3 (the dealing's
 * reversed rounds) and one an SM; refused at other head sizes and
 * without room for the dq slots. */
static int persistent_backward_in_1(tg_o o, void *dqkv, const void *dout, const void *out, const void *qkv, const float *lse,
                                    int B, int T, int NH, int HS) {
    return cuda_attention_backward_wgmma_persistent(o, dqkv, dout, out, qkv, lse, B, T, NH, HS, 1);
}
static int persistent_backward_in_3(tg_o o, void *dqkv, const void *dout, const void *out, const void *qkv, const float *lse,
                                    int B, int T, int NH, int HS) {
    return cuda_attention_backward_wgmma_persistent(o, dqkv, dout, out, qkv, lse, B, T, NH, HS, 3);
}
static int persistent_backward_per_sm(tg_o o, void *dqkv, const void *dout, const void *out, const void *qkv, const float *lse,
                                      int B, int T, int NH, int HS) {
    return cuda_attention_backward_wgmma_persistent(o, dqkv, dout, out, qkv, lse, B, T, NH, HS, 0);
}
static void wgmma_backward_persistent(env *e, attn_bwd *a, const void *got, const char *shape) {
    const wgmma_backward_form runs[3] = {persistent_backward_in_1, persistent_backward_in_3, persistent_backward_per_sm};
    const char *blocks[3] = {"1 block", "3 blocks", "a block an SM"};
    for (int i = 0; i < 3; i++) {
        char name[256];
        int slots_room;
        const int ran = run_wgmma_backward_form(e, a, runs[i], &slots_room);
        if (a->HS != 64 || !slots_room) {
            snprintf(name, sizeof name, "attention_backward_wgmma, persistent (%s): none %s %s", blocks[i],
                     a->HS != 64 ? "at head sizes other than 64" : "without room for the slots", shape);
            check_true(e, ran == 0, name, "");
            continue;
        }
        snprintf(name, sizeof name, "attention_backward_wgmma, persistent (%s): every run's bits %s", blocks[i], shape);
        check_true(e, ran == 1 && gpu_holds(e, a->dqkv, got), name, "");
    }
}

/* The wgmma backward with dq's slots summed in the kernel, each query
 * tile's by the last of its key blocks to finish (CUDA_WGMMA_DQ_SUMMED),
 * against the default's dqkv `got` (dq by the same slots, summed by a
 * second kernel): the same bits, on a GPU too, as the sum is the same
 * one in the same order; where the scratch has no room for the slots
 * both take the mma.sync dq kernel (the same bits again). The kernel
 * scratch is poisoned first: the runs before left the very slot values
 * this one writes there, so that a tile summed before its last share
 * landed would have read right values. A tile never summed keeps dqkv's
 * poison, one summed early a slot's, one summed in another order its
 * bits. */
static void wgmma_backward_summed(env *e, attn_bwd *a, const void *got, const char *shape) {
    char name[256];
    cuda_wgmma_dq slots_route, taken = CUDA_WGMMA_DQ_MMA; /* asked with no sequences: the routes with this scratch */
    cuda_attention_backward_wgmma_dq(e->gpu, NULL, NULL, NULL, NULL, NULL, 0, a->T, a->NH, a->HS, (tg_dropout){0},
                                     CUDA_WGMMA_DQ_SLOTS, &slots_route);
    const cuda_ctx *ctx = cuda_ctx_of(e->gpu);
    poison(e->gpu, ctx->scratch, ctx->scratch_bytes);
    poison(e->gpu, a->dqkv.g, a->dqkv.n * gpu_elem(e, ACT));
    const int ran = cuda_attention_backward_wgmma_dq(e->gpu, a->dqkv.g, a->dout.g, a->out_r.g, a->qkv.g, a->lse_r.g, a->B, a->T,
                                                     a->NH, a->HS, (tg_dropout){0}, CUDA_WGMMA_DQ_SUMMED, &taken);
    sync_gpu(e);
    const cuda_wgmma_dq expect = slots_route == CUDA_WGMMA_DQ_SLOTS ? CUDA_WGMMA_DQ_SUMMED : CUDA_WGMMA_DQ_MMA;
    snprintf(name, sizeof name, "attention_backward_wgmma, dq %s: the bits of dq by %s %s",
             expect == CUDA_WGMMA_DQ_SUMMED ? "summed in the kernel" : "without room for the slots",
             expect == CUDA_WGMMA_DQ_SUMMED ? "the slots' reduction" : "the mma.sync kernel", shape);
    check_true(e, ran == 1 && taken == expect && gpu_holds(e, a->dqkv, got), name, "");
}

/* One case of the wgmma backward (flash_bwd_wgmma.cu), from the CPU
 * forward's out and lse: against the CPU twin (the bf16 tolerance),
 * against the mma.sync backward (within the tolerance; dk and dv bit for
 * bit under the emulation, where both sum each k16 product in order into
 * float32 from the same bf16 roundings),
 * bitwise equal to itself when run again, and the same bits through
 * attention_backward with kernels.attention = wgmma. */
static void wgmma_backward_case(env *e, int B, int T, int NH, int HS, float amp) {
    attn_bwd a = attn_bwd_inputs(e, B, T, NH, HS, amp);
    const size_t bytes = a.dqkv.n * gpu_elem(e, ACT);
    char shape[96], name[256], detail[64];
    snprintf(shape, sizeof shape, "B=%d T=%d NH=%d HS=%d amp=%g", B, T, NH, HS, (double)amp);
    /* mma.sync */
    e->gpu->attention_backward(e->gpu, a.dqkv.g, a.dout.g, a.out_r.g, a.qkv.g, a.lse_r.g, B, T, NH, HS, (tg_dropout){0});
    void *mma = gpu_bytes(e, a.dqkv);
    poison(e->gpu, a.dqkv.g, bytes);
    const int ran =
        cuda_attention_backward_wgmma(e->gpu, a.dqkv.g, a.dout.g, a.out_r.g, a.qkv.g, a.lse_r.g, B, T, NH, HS, (tg_dropout){0});
    sync_gpu(e);
    snprintf(name, sizeof name, "attention_backward_wgmma runs %s", shape);
    check_true(e, ran == 1, name, "");
    check(e, a.dqkv, e->tol, "attention_backward_wgmma dqkv %s", shape);
    void *got = gpu_bytes(e, a.dqkv);
#ifdef TG_CUDA_EMU
    /* dk and dv: each k16 product summed in order in both; dq's float32 sum runs in another order (per key tile, then over tiles) */
    snprintf(name, sizeof name, "attention_backward_wgmma dk, dv: the mma.sync backward's bits (emulation): %s", shape);
    check_true(e, attn_bwd_same_kv(&a, got, mma), name, "");
#endif
    /* the differential check that holds on a GPU too, over dq, dk and dv */
    const double diff = bf16_rel_diff(got, mma, a.dqkv.n);
    snprintf(detail, sizeof detail, "err=%.3g tol=%.3g", diff, (double)e->tol);
    snprintf(name, sizeof name, "attention_backward_wgmma dqkv within the tolerance of the mma.sync backward's: %s", shape);
    check_true(e, diff <= e->tol, name, detail);
    /* deterministic: no atomics, every sum in a fixed order (and run: two poisoned buffers match too) */
    poison(e->gpu, a.dqkv.g, bytes);
    const int again =
        cuda_attention_backward_wgmma(e->gpu, a.dqkv.g, a.dout.g, a.out_r.g, a.qkv.g, a.lse_r.g, B, T, NH, HS, (tg_dropout){0});
    snprintf(name, sizeof name, "attention_backward_wgmma run twice, the same bits: %s", shape);
    check_true(e, again == 1 && gpu_holds(e, a.dqkv, got), name, "");
    if (HS == 64) wgmma_backward_kv_shared(e, &a, got, shape);
    wgmma_backward_two_stages(e, &a, got, shape);
    wgmma_backward_persistent(e, &a, got, shape);
    wgmma_backward_summed(e, &a, got, shape);
    wgmma_backward_rounds(e, &a, got, shape);
    /* kernels.attention = wgmma: attention_backward runs it */
    tg_err err;
    snprintf(name, sizeof name, "kernels.attention=wgmma selects the wgmma backward %s", shape);
    if (ops_cuda_attention(e->gpu, "wgmma", HS, 0.0, &err) != 0) {
        check_true(e, 0, name, err.msg);
    } else {
        poison(e->gpu, a.dqkv.g, bytes);
        e->gpu->attention_backward(e->gpu, a.dqkv.g, a.dout.g, a.out_r.g, a.qkv.g, a.lse_r.g, B, T, NH, HS, (tg_dropout){0});
        check_true(e, gpu_holds(e, a.dqkv, got), name, "");
        ops_cuda_attention(e->gpu, "mma", HS, 0.0, &err);
    }
    free(mma), free(got);
    attn_bwd_free(e, &a);
}

/* kernels.attention = kernel at head size hs and dropout p: accepted, and the kernels it chose
 * ("forward F, backward B") are want. */
static void choice_case(env *e, const char *kernel, int hs, double p, const char *want) {
    tg_err err = {0};
    char chosen[64] = "", name[128], detail[1200];
    const int rc = ops_cuda_attention(e->gpu, kernel, hs, p, &err);
    ops_cuda_attention_describe(e->gpu, chosen, sizeof chosen);
    snprintf(name, sizeof name, "kernels.attention=%s at head size %d, dropout %g, %s: %s", kernel, hs, p, tg_dtype_name(e->act),
             want);
    snprintf(detail, sizeof detail, "rc %d, chose %s %s", rc, chosen, err.msg);
    check_true(e, rc == 0 && strcmp(chosen, want) == 0, name, detail);
}

/* kernels.attention = auto (the default): on compute capability 9.0 in bf16
 * without dropout, the table of ops_cuda.c's choose_measured_fastest; mma
 * wherever wgmma cannot run (float32, dropout, head size 80, another
 * device), never an error. An unknown name is refused, naming the choices. */
void cuda_test_attention_auto(env *e) {
    NEED(e, attention_forward);
    tg_err err = {0};
    const int hopper = e->act == TG_BF16 && ops_cuda_attention(e->gpu, "wgmma", 64, 0.0, &err) == 0;
    choice_case(e, "auto", 64, 0.0, hopper ? "forward wgmma_ws, backward wgmma" : "forward mma, backward mma");
    choice_case(e, "auto", 96, 0.0, hopper ? "forward mma, backward wgmma" : "forward mma, backward mma");
    choice_case(e, "auto", 128, 0.0, "forward mma, backward mma");
    choice_case(e, "auto", 80, 0.0, "forward mma, backward mma");
    choice_case(e, "auto", 64, 0.1, "forward mma, backward mma");
    if (hopper) choice_case(e, "wgmma", 64, 0.0, "forward wgmma, backward wgmma");
    check_true(e, ops_cuda_attention(e->gpu, "flash", 64, 0.0, &err) != 0 && strstr(err.msg, "expected auto, mma, wgmma or wgmma_ws"),
               "kernels.attention=flash refused, naming the choices", err.msg);
    ops_cuda_attention(e->gpu, "mma", 64, 0.0, &err);
}

/* The wgmma forward (kernels.attention = wgmma, compute capability 9.0;
 * the emulation reports 9.0): T shorter than a tile, partial last tiles,
 * several query blocks (T = 200: four, the last partial), peaked rows, a
 * misaligned qkv (plain stores instead of cp.async); what it has no
 * instance for is refused (0, nothing run), and ops_cuda_attention refuses
 * wgmma with another head size, dropout or float32, naming what. The same
 * for the warp-specialized forward (kernels.attention = wgmma_ws) at the
 * shapes its pipeline turns on. On a device that is not 9.0 the refusal is
 * the check. */
void cuda_test_attention_wgmma(env *e) {
    NEED(e, attention_forward);
    tg_err err;
    const int accepted = ops_cuda_attention(e->gpu, "wgmma", 64, 0.0, &err) == 0;
    ops_cuda_attention(e->gpu, "mma", 64, 0.0, &err);
    if (e->act != TG_BF16) {
        check_true(e, cuda_attention_forward_wgmma(e->gpu, NULL, NULL, NULL, 1, 1, 1, 64, (tg_dropout){0}) == 0,
                   "attention_forward_wgmma refuses float32 activations", "");
        check_true(e, cuda_attention_backward_wgmma(e->gpu, NULL, NULL, NULL, NULL, NULL, 1, 1, 1, 64, (tg_dropout){0}) == 0,
                   "attention_backward_wgmma refuses float32 activations", "");
        check_true(e, !accepted && strstr(err.msg, "bf16"), "kernels.attention=wgmma refused with float32", err.msg);
        check_true(e, cuda_attention_forward_wgmma_ws(e->gpu, NULL, NULL, NULL, 1, 1, 1, 64, (tg_dropout){0}) == 0,
                   "attention_forward_wgmma_ws refuses float32 activations", "");
        check_true(e, cuda_attention_forward_wgmma_ws_persistent(e->gpu, NULL, NULL, NULL, 1, 1, 1, 64, (tg_dropout){0}, 0) == 0,
                   "attention_forward_wgmma_ws_persistent refuses float32 activations", "");
        return;
    }
    if (!accepted) {
        check_true(e, strstr(err.msg, "compute capability 9.0") != NULL || strstr(err.msg, "sm_90a machine code") != NULL,
                   "kernels.attention=wgmma refused off Hopper or without sm_90a code", err.msg);
        return;
    }
    wgmma_case(e, &reference_wgmma, 1, 5, 1, 64, 1.0f, 0);
    wgmma_case(e, &reference_wgmma, 2, 77, 2, 64, 1.0f, 0);
    wgmma_case(e, &reference_wgmma, 1, 200, 2, 64, 2.0f, 0);
    wgmma_case(e, &reference_wgmma, 1, 150, 1, 64, 4.0f, 1);
    wgmma_case(e, &reference_wgmma, 1, 128, 3, 64, 1.0f, 0);
    /* head sizes 96 (a last chunk of 32 columns under the 64B swizzle) and 128 (two chunks of 64) */
    wgmma_case(e, &reference_wgmma, 1, 77, 2, 96, 2.0f, 0);
    wgmma_case(e, &reference_wgmma, 1, 150, 1, 96, 1.0f, 1);
    wgmma_case(e, &reference_wgmma, 1, 77, 1, 128, 2.0f, 0);
    /* the pipeline: blocks of 128 rows whose second warpgroup has some, none
     * (T = 150, second block) or all of its rows; T = 520: 5 key tiles of 128
     * at the last block, so stages 0 and 1 of the 3 are refilled (both
     * parities of their barriers); at head sizes 96 and 128 (2 stages), T =
     * 260 and 300: 3 key tiles at the last block, stage 0 refilled */
    wgmma_case(e, &pipelined_wgmma, 1, 5, 1, 64, 1.0f, 0);
    wgmma_case(e, &pipelined_wgmma, 2, 77, 2, 64, 1.0f, 0);
    wgmma_case(e, &pipelined_wgmma, 2, 200, 2, 64, 2.0f, 0);
    wgmma_case(e, &pipelined_wgmma, 1, 150, 1, 64, 4.0f, 0);
    wgmma_case(e, &pipelined_wgmma, 1, 128, 3, 64, 1.0f, 0);
    wgmma_case(e, &pipelined_wgmma, 1, 520, 1, 64, 2.0f, 0);
    wgmma_case(e, &pipelined_wgmma, 1, 150, 1, 64, 1.0f, 1); /* misaligned: the cp.async forward */
    /* at 96 one box per chunk (64 columns, 128B swizzle; 32, 64B) and the
     * last head's boxes ending at the row; T = 260: both parities again */
    wgmma_case(e, &pipelined_wgmma, 1, 260, 2, 96, 2.0f, 0);
    wgmma_case(e, &pipelined_wgmma, 2, 70, 1, 128, 1.0f, 0);
    wgmma_case(e, &pipelined_wgmma, 1, 300, 1, 128, 1.0f, 0);
    /* persistent: one block over 8 items (4 pairs of 2 query tiles: both Q
     * buffers twice, the ring's 12 tiles across items, the turns across
     * items); 3 blocks over 10 items (T = 520: 5 tiles of 1 to 5 key tiles;
     * rounds dealt forwards, in reverse, forwards, then one item); one an
     * SM (a block an item); head size 96 in 2 blocks; misaligned: the
     * cp.async forward */
    wgmma_case(e, &persistent_1, 2, 200, 2, 64, 2.0f, 0);
    wgmma_case(e, &persistent_3, 1, 520, 2, 64, 2.0f, 0);
    wgmma_case(e, &persistent_sm, 2, 77, 2, 64, 1.0f, 0);
    wgmma_case(e, &persistent_3, 1, 260, 2, 96, 2.0f, 0);
    wgmma_case(e, &persistent_1, 1, 150, 1, 64, 1.0f, 1);
    /* a share of the exponentials by exp2_poly: peaked rows (amp 4: the running max jumps), 3 stages refilled */
    wgmma_case(e, &poly_4, 2, 200, 2, 64, 4.0f, 0);
    wgmma_case(e, &poly_8, 1, 520, 1, 64, 2.0f, 0);
    check_true(e, cuda_attention_forward_wgmma_ws_poly(e->gpu, NULL, NULL, NULL, 1, 1, 1, 96, 4) == 0 &&
                      cuda_attention_forward_wgmma_ws_poly(e->gpu, NULL, NULL, NULL, 1, 1, 1, 64, 3) == 0,
               "attention_forward_wgmma_ws_poly: head size 64 and one in 4 or 8 only", "");
    wgmma_backward_case(e, 1, 5, 1, 64, 1.0f);
    wgmma_backward_case(e, 2, 77, 2, 64, 1.0f);
    wgmma_backward_case(e, 1, 200, 2, 64, 2.0f);
    wgmma_backward_case(e, 1, 128, 3, 64, 1.0f);
    /* three 128-key blocks, the last with a partial second warpgroup; five query tiles, so each warpgroup takes
     * dq's share of both tile parities; two pairs, so that the persistent form's single block takes six key
     * blocks, each set of K and V through three phases (back to parity 0) */
    wgmma_backward_case(e, 1, 300, 2, 64, 1.0f);
    /* head size 96 (chunks of 64 and 32 columns; the 1.2B model's) and 128 (two chunks of 64):
     * partial tiles, two pairs, three query tiles */
    wgmma_backward_case(e, 1, 77, 1, 96, 1.0f);
    wgmma_backward_case(e, 1, 130, 2, 96, 2.0f);
    wgmma_backward_case(e, 1, 77, 1, 128, 1.0f);
    wgmma_backward_case(e, 1, 150, 1, 128, 2.0f); /* two blocks, three query tiles, dq through the slots at 128 too */
    const tg_dropout drop = {0.2f, 1234, 81, 3, 1, 4, NULL};
    /* no instance: nothing run, the tensors (NULL) never read */
    check_true(e, cuda_attention_backward_wgmma(e->gpu, NULL, NULL, NULL, NULL, NULL, 1, 1, 1, 80, (tg_dropout){0}) == 0,
               "attention_backward_wgmma: no instance at HS=80", "");
    check_true(e, cuda_attention_backward_wgmma_kv_shared(e->gpu, NULL, NULL, NULL, NULL, NULL, 1, 1, 1, 96) == 0,
               "attention_backward_wgmma_kv_shared: head size 64 only (none at 96)", "");
    check_true(e, cuda_attention_backward_wgmma(e->gpu, NULL, NULL, NULL, NULL, NULL, 1, 1, 1, 64, drop) == 0,
               "attention_backward_wgmma: no instance with dropout", "");
    check_true(e, cuda_attention_backward_wgmma(e->gpu, (void *)2, NULL, NULL, NULL, NULL, 1, 1, 1, 64, (tg_dropout){0}) == 0,
               "attention_backward_wgmma: no instance for tensors not 16-byte aligned", "");
    check_true(e, cuda_attention_forward_wgmma(e->gpu, NULL, NULL, NULL, 1, 1, 1, 80, (tg_dropout){0}) == 0,
               "attention_forward_wgmma: no instance at HS=80", "");
    check_true(e, cuda_attention_forward_wgmma(e->gpu, NULL, NULL, NULL, 1, 1, 1, 64, drop) == 0,
               "attention_forward_wgmma: no instance with dropout", "");
    check_true(e, ops_cuda_attention(e->gpu, "wgmma", 80, 0.0, &err) != 0 && strstr(err.msg, "head size"),
               "kernels.attention=wgmma refused at head size 80", err.msg);
    check_true(e, ops_cuda_attention(e->gpu, "wgmma", 64, 0.1, &err) != 0 && strstr(err.msg, "dropout"),
               "kernels.attention=wgmma refused with dropout", err.msg);
    check_true(e, cuda_attention_forward_wgmma_ws(e->gpu, NULL, NULL, NULL, 1, 1, 1, 80, (tg_dropout){0}) == 0,
               "attention_forward_wgmma_ws: no instance at HS=80", "");
    check_true(e, cuda_attention_forward_wgmma_ws(e->gpu, NULL, NULL, NULL, 1, 1, 1, 64, drop) == 0,
               "attention_forward_wgmma_ws: no instance with dropout", "");
    check_true(e, cuda_attention_forward_wgmma_ws_persistent(e->gpu, NULL, NULL, NULL, 1, 1, 1, 128, (tg_dropout){0}, 0) == 0,
               "attention_forward_wgmma_ws_persistent: no instance at HS=128 (its second Q buffer does not fit)", "");
    check_true(e, cuda_attention_forward_wgmma_ws_persistent(e->gpu, NULL, NULL, NULL, 1, 1, 1, 64, drop, 0) == 0,
               "attention_forward_wgmma_ws_persistent: no instance with dropout", "");
    check_true(e, ops_cuda_attention(e->gpu, "wgmma_ws", 80, 0.0, &err) != 0 && strstr(err.msg, "wgmma_ws has head sizes"),
               "kernels.attention=wgmma_ws refused at head size 80", err.msg);
    check_true(e, ops_cuda_attention(e->gpu, "wgmma", 96, 0.0, &err) == 0 && ops_cuda_attention(e->gpu, "wgmma_ws", 128, 0.0, &err) == 0,
               "kernels.attention=wgmma at head size 96 and wgmma_ws at 128 accepted", err.msg);
    ops_cuda_attention(e->gpu, "mma", 64, 0.0, &err);
}
#endif

