/* The CPU kernel checks (tests/kernels/<family>.c): each CPU kernel against
 * a naive double-precision version on random inputs (outputs poisoned with
 * NaN first, sizes that are not multiples of any tile), and every backward
 * kernel against central finite differences of the double-precision
 * forward. Each check prints "ok NAME" or "not ok NAME - why", the lines
 * tests/run.sh counts. */
#ifndef TESTS_KERNELS_CHECK_H
#define TESTS_KERNELS_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/cpu/kernels.h"

typedef struct { int failed, passed; } tally;

void report(tally *t, int ok, const char *name, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* n uniform values in [-scale, scale) from random stream `stream`. */
float *randf(size_t n, uint64_t stream, float scale);
double *to_d(const float *x, size_t n);
/* n NaNs: an output the kernel must overwrite. */
float *poisoned(size_t n);
/* Largest |got - want| / (atol + rtol*|want|); <= 1 passes. NaN fails. */
double mismatch(const float *got, const double *want, size_t n, double rtol, double atol, size_t *where);
void expect_close(tally *t, const char *name, const float *got, const double *want, size_t n, double rtol, double atol);

/* d/dx of sum(f(x) * R) in double, by central differences of step h. */
typedef void (*fwd_d)(const double *x, double *y, void *ctx);
double *fd_grad(fwd_d f, void *ctx, const double *x0, size_t nx, const double *R, size_t ny, double h);

/* The families' CPU checks, in the order build/test_kernels runs them. */
void kcheck_gemm(tally *t);
void kcheck_layernorm(tally *t);
void kcheck_matmul(tally *t);
void kcheck_matmul_dgelu(tally *t);
void kcheck_lmhead(tally *t);
void kcheck_attention(tally *t);
void kcheck_gelu(tally *t);
void kcheck_encoder(tally *t);
void kcheck_xent(tally *t);
void kcheck_xent_split(tally *t);
void kcheck_step_stats(tally *t);
void kcheck_row_ops(tally *t);
void kcheck_position(tally *t);
void kcheck_dropout(tally *t);
void kcheck_residual_layernorm(tally *t);
void kcheck_adamw(tally *t);
void kcheck_timed(tally *t);
void kcheck_grad_writes(tally *t);

/* The optimizer checks' spans (tests/kernels/optimizer.c), scaled by k;
 * *len: the buffer length they need, *moments: the moments' length. */
tg_spans test_spans(size_t k, bool windowed, size_t *len, size_t *moments);
/* True where offset i belongs to a tensor of s inside its window; *moment
 * (when not NULL) is then its moment's index, from the window's formula. */
bool span_moment(const tg_spans *s, size_t i, size_t *moment);
static inline bool in_spans(const tg_spans *s, size_t i) { return span_moment(s, i, NULL); }

#endif
