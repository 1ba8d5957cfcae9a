/* build/test_kernels: the CPU kernel checks of every family
 * (tests/kernels/check.h). */
#include <stdio.h>

#include "tests/kernels/check.h"

int main(void) {
    tally t = {0, 0};
    kcheck_gemm(&t);
    kcheck_layernorm(&t);
    kcheck_matmul(&t);
    kcheck_matmul_dgelu(&t);
    kcheck_lmhead(&t);
    kcheck_attention(&t);
    kcheck_gelu(&t);
    kcheck_encoder(&t);
    kcheck_xent(&t);
    kcheck_xent_split(&t);
    kcheck_step_stats(&t);
    kcheck_row_ops(&t);
    kcheck_position(&t);
    kcheck_dropout(&t);
    kcheck_residual_layernorm(&t);
    kcheck_adamw(&t);
    kcheck_timed(&t);
    kcheck_grad_writes(&t);
    fprintf(stderr, "test_kernels: %d passed, %d failed\n", t.passed, t.failed);
    return t.failed ? 1 : 0;
}
