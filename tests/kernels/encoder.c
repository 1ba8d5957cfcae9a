/* Kernel family: token and position embeddings (encoder_*, position_*).
 * CPU: each kernel against a double-precision reference and its backward
 * against finite differences (tests/kernels/check.h); with CUDA (or the
 * emulation, tests/emu) also the CUDA backend against the CPU one
 * (tests/kernels/twin.h). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/rng.h"
#include "tests/kernels/check.h"

/* ---- encoder ---- */
void kcheck_encoder(tally *t) {
    const int B = 2, T = 9, C = 7, V = 23, start = 5, Vl = 10; /* this rank owns rows [5, 15) */
    int32_t tokens[B * T];
    for (int i = 0; i < B * T; i++) tokens[i] = (int32_t)(rng_bits(3, 60, i) % V);
    tokens[3] = tokens[4] = 7; /* a repeated token accumulates twice */
    float *wte = randf(Vl * C, 61, 1), *wpe = randf(T * C, 62, 1), *out = poisoned(B * T * C);
    double *want = malloc(sizeof(double) * B * T * C);
    for (int n = 0; n < B * T; n++)
        for (int c = 0; c < C; c++) {
            int l = tokens[n] - start;
            want[n * C + c] = (l >= 0 && l < Vl ? wte[l * C + c] : 0.0) + wpe[(n % T) * C + c];
        }
    cpu_encoder_forward(NULL, out, tokens, wte, wpe, B, T, C, start, Vl);
    expect_close(t, "encoder_forward_vocab_parallel", out, want, B * T * C, 1e-6, 1e-7);
    float *dout = randf(B * T * C, 63, 1), *dwte = randf(Vl * C, 64, 1), *dwpe = randf(T * C, 65, 1);
    double *wte_want = to_d(dwte, Vl * C), *wpe_want = to_d(dwpe, T * C);
    for (int n = 0; n < B * T; n++)
        for (int c = 0; c < C; c++) {
            int l = tokens[n] - start;
            if (l >= 0 && l < Vl) wte_want[l * C + c] += dout[n * C + c];
            wpe_want[(n % T) * C + c] += dout[n * C + c];
        }
    cpu_encoder_backward(NULL, dwte, dwpe, dout, tokens, B, T, C, start, Vl);
    expect_close(t, "encoder_backward_dwte", dwte, wte_want, Vl * C, 1e-5, 1e-6);
    expect_close(t, "encoder_backward_dwpe", dwpe, wpe_want, T * C, 1e-5, 1e-6);
    free(wte); free(wpe); free(out); free(want); free(dout); free(dwte); free(dwpe); free(wte_want); free(wpe_want);
}

/* Positions of a row shard (rows from row_start, wrapping at T). */
void kcheck_position(tally *t) {
    const int N = 23, C = 13, T = 7, row_start = 5;
    float *x = randf(N * C, 100, 1); /* the gradient: the same values as kcheck_row_ops' x */
    float *wpe = randf(T * C, 104, 1), *acc = randf(N * C, 105, 1), *dwpe = randf(T * C, 106, 1);
    double *pw = to_d(acc, N * C), *dw = to_d(dwpe, T * C);
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) {
            int p = (row_start + n) % T;
            pw[n * C + c] += wpe[p * C + c];
            dw[p * C + c] += x[n * C + c];
        }
    cpu_position_forward(NULL, acc, wpe, row_start, N, T, C);
    expect_close(t, "position_forward_row_shard", acc, pw, N * C, 1e-6, 1e-7);
    cpu_position_backward(NULL, dwpe, x, row_start, N, T, C, true);
    expect_close(t, "position_backward_row_shard", dwpe, dw, T * C, 1e-5, 1e-6);
    free(x); free(wpe); free(acc); free(dwpe); free(pw); free(dw);
}

#ifdef TG_CUDA
/* ---- CUDA against the CPU ---- */
#include "util/rng_core.h"
#include "tests/kernels/twin.h"
#include "util/err.h"

void cuda_test_encoder(env *e, int B, int T, int C, int vocab_start, int vocab_local, int vocab_all) {
    NEED(e, encoder_forward);
    NEED(e, encoder_backward);
    const size_t N = (size_t)B * T;
    int32_t *tok = tg_malloc(N * sizeof(int32_t), "tokens");
    for (size_t i = 0; i < N; i++) tok[i] = (int32_t)(rng_bits_core(SEED, e->stream, i) % (uint64_t)vocab_all);
    e->stream++;
    /* just outside the rank's range on both sides, its first and last rows,
     * and one token repeated (its gradient rows add up) */
    tok[0] = vocab_start - 1;
    tok[1] = vocab_start;
    tok[2] = vocab_start + vocab_local - 1;
    tok[3] = vocab_start + vocab_local;
    tok[4] = tok[5] = tok[N - 1] = vocab_start + vocab_local / 2;
    twin tokens = tw_ints(e, tok, N);
    twin wte = tw_rand(e, ACT, (size_t)vocab_local * C, -1, 1), wpe = tw_rand(e, ACT, (size_t)T * C, -1, 1);
    for (int with_wpe = 1; with_wpe >= 0; with_wpe--) {
        twin out = tw_out(e, ACT, N * C);
        e->cpu->encoder_forward(e->cpu, out.c, tokens.c, wte.c, with_wpe ? wpe.c : NULL, B, T, C, vocab_start, vocab_local);
        e->gpu->encoder_forward(e->gpu, out.g, tokens.g, wte.g, with_wpe ? wpe.g : NULL, B, T, C, vocab_start, vocab_local);
        check(e, out, e->tol, "encoder_forward%s B=%d T=%d C=%d rows [%d,+%d)", with_wpe ? "" : "_no_wpe", B, T, C,
              vocab_start, vocab_local);
        tw_free(e, out);
    }
    twin dout = tw_rand(e, ACT, N * C, -1, 1);
    for (int which = 0; which < 3; which++) { /* both gradients, dwte only, dwpe only */
        const int use_wte = which != 2, use_wpe = which != 1;
        twin dwte = tw_rand(e, F32, (size_t)vocab_local * C, -1, 1), dwpe = tw_rand(e, F32, (size_t)T * C, -1, 1);
        e->cpu->encoder_backward(e->cpu, use_wte ? dwte.c : NULL, use_wpe ? dwpe.c : NULL, dout.c, tokens.c, B, T, C, vocab_start,
                                 vocab_local);
        e->gpu->encoder_backward(e->gpu, use_wte ? dwte.g : NULL, use_wpe ? dwpe.g : NULL, dout.g, tokens.g, B, T, C, vocab_start,
                                 vocab_local);
        const char *tag = which == 0 ? "" : which == 1 ? "_dwpe_null" : "_dwte_null";
        if (use_wte) check(e, dwte, e->tol, "encoder_backward%s dwte B=%d T=%d C=%d rows [%d,+%d)", tag, B, T, C, vocab_start, vocab_local);
        if (use_wpe) check(e, dwpe, e->tol, "encoder_backward%s dwpe B=%d T=%d C=%d", tag, B, T, C);
        tw_free(e, dwte);
        tw_free(e, dwpe);
    }
    tw_free(e, dout);
    tw_free(e, wte);
    tw_free(e, wpe);
    tw_free(e, tokens);
    free(tok);
}

void cuda_test_position(env *e, int row_start, int N, int T, int C) {
    NEED(e, position_forward);
    NEED(e, position_backward);
    twin wpe = tw_rand(e, ACT, (size_t)T * C, -1, 1), out = tw_rand(e, ACT, (size_t)N * C, -1, 1); /* out accumulates */
    e->cpu->position_forward(e->cpu, out.c, wpe.c, row_start, N, T, C);
    e->gpu->position_forward(e->gpu, out.g, wpe.g, row_start, N, T, C);
    check(e, out, e->tol, "position_forward rows [%d,+%d) T=%d C=%d", row_start, N, T, C);
    twin dout = tw_rand(e, ACT, (size_t)N * C, -1, 1), dwpe = tw_rand(e, F32, (size_t)T * C, -1, 1);
    e->cpu->position_backward(e->cpu, dwpe.c, dout.c, row_start, N, T, C, true);
    e->gpu->position_backward(e->gpu, dwpe.g, dout.g, row_start, N, T, C, true);
    check(e, dwpe, e->tol, "position_backward rows [%d,+%d) T=%d C=%d", row_start, N, T, C);
    tw_free(e, wpe);
    tw_free(e, out);
    tw_free(e, dout);
    tw_free(e, dwpe);
}
#endif
