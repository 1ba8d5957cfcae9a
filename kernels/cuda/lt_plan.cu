/* cuBLASLt products (lt_plan.h) and the context's table of their plans.
 *
 * A plan is what cuBLASLt needs besides the pointers: the matmul descriptor
 * (transposes, epilogue, compute type), the layouts of A, B and D, and the
 * algorithm the heuristic chose. Building one (descriptor, three layouts, a
 * preference and the heuristic) costs far more host time than the launch,
 * and a GPT step has only a few dozen distinct products, each called for
 * every layer and micro-batch. So a plan is built on its key's first call
 * and kept in the context's table: the key holds everything the heuristic's
 * choice depends on, and a later call with the same key only sets its own
 * pointers on the kept descriptor and runs. A key the heuristic had no
 * algorithm for is kept too (the epilogue's fallback is then taken at once).
 *
 * The table grows by doubling up to CUDA_LT_PLANS_MAX plans. Past that, or
 * out of host memory, a product builds its plan, runs and destroys it, as
 * every product did before the table: slower, never different.
 *
 * Which algorithm: the heuristic's first (kernels.lt_tune off), or, chosen
 * once on the plan's first call (choose_algorithm), the one a record pins
 * or the fastest of its top candidates as timed then (lt_tune.h). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/lt_plan.h"
#include "kernels/cuda/lt_tune.h"
#include "util/err.h"

#define FIRST_CAPACITY 16

struct lt_plan {
    lt_key key;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, d;
    cublasLtMatmulHeuristicResult_t heuristic; /* the algorithm the plan runs */
    cublasStatus_t status; /* the heuristic's */
    int found;             /* algorithms it returned: 0 (none for this key) or more */
};

struct cuda_lt_plans {
    lt_plan *plans;
    int count, capacity;
    lt_tuner tuner; /* kernels.lt_tune: which of the heuristic's algorithms a plan runs */
};

/* A plan's candidates, the heuristic's order: only while its first call chooses. */
struct lt_candidates {
    cublasLtMatmulHeuristicResult_t r[LT_TUNE_CANDIDATES];
};

namespace {

const char *type_name(int32_t t) { return t == CUDA_R_16BF ? "bf16" : t == CUDA_R_32F ? "fp32" : "?"; }

bool uses_bias(cublasLtEpilogue_t e) {
    return e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || e == CUBLASLT_EPILOGUE_DGELU_BGRAD ||
           e == CUBLASLT_EPILOGUE_BGRADA;
}
bool uses_aux(cublasLtEpilogue_t e) {
    return e == CUBLASLT_EPILOGUE_DGELU || e == CUBLASLT_EPILOGUE_DGELU_BGRAD || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}

/* The largest power of two, at most 16, that divides the address: what the
 * heuristic may assume of the pointer. Capped at 16 (the most cuBLASLt's
 * vectorised loads need) so that every buffer aligned to 16 bytes or more
 * gets the same plan, hence bitwise the same result, wherever it lives
 * (recompute modes move activations between buffers). */
uint32_t ptr_alignment(const void *p) {
    uintptr_t a = (uintptr_t)p;
    uint32_t align = 16;
    while (align > 1 && a % align != 0) align /= 2;
    return align;
}

template <typename V>
void set_desc(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, V value) {
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof value));
}

template <typename V>
void set_pref(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, V value) {
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof value));
}

/* The epilogue's pointers, set on every call: they change from call to call,
 * while the heuristic only looked at their alignment, which the key holds. */
void set_epilogue_pointers(cublasLtMatmulDesc_t desc, const lt_epilogue &ep) {
    if (uses_bias(ep.kind)) set_desc(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, ep.bias);
    if (uses_aux(ep.kind)) set_desc(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, ep.aux);
}

/* An address near p with exactly `align` bytes of alignment (a power of
 * two below 256): what the heuristic is shown of an epilogue pointer. It
 * has no preference for their alignment and takes it from the value (up to
 * the 256 bytes its preferences assume), so a plan built on a 256-aligned
 * bias could pick an algorithm that a later call with the same key, whose
 * bias is only 16-aligned, cannot run. Shown exactly the key's alignment,
 * it picks one that every pointer of that key fits. Never dereferenced:
 * cuBLAS's guide says the heuristic only reads the value. */
const void *alignment_stand_in(const void *p, uint32_t align) {
    if (!p) return NULL;
    return (const void *)(((uintptr_t)p & ~(uintptr_t)255) + align);
}

/* Descriptor, layouts and the heuristic's algorithm for one key. The
 * preference promises the operands' alignment (key.align_*); the
 * epilogue's pointers are stand-ins of exactly the key's alignment
 * (alignment_stand_in), set before the heuristic, which reads their
 * alignment from them. The bias (or bias gradient) and the GELU input have
 * D's type, as cublasLt.h documents for these epilogues. */
void build_plan(cuda_ctx *ctx, const lt_key &key, const lt_epilogue &ep, lt_plan *p, lt_candidates *c) {
    memset(p, 0, sizeof *p);
    p->key = key;
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    set_desc(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, (int32_t)(key.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N));
    set_desc(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, (int32_t)(key.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N));
    if (ep.kind != CUBLASLT_EPILOGUE_DEFAULT) {
        set_desc(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, (uint32_t)ep.kind);
        if (uses_bias(ep.kind)) set_desc(p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, (int32_t)key.d);
        if (uses_aux(ep.kind)) set_desc(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, (int64_t)key.ldd);
        set_epilogue_pointers(p->desc, lt_epilogue{ep.kind, alignment_stand_in(ep.bias, key.align_bias),
                                                   alignment_stand_in(ep.aux, key.align_aux)});
    }

    /* Layouts take the matrices as stored: rows, columns, leading dimension. */
    const cudaDataType ab = (cudaDataType)key.ab, d = (cudaDataType)key.d;
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->a, ab, key.trans_a ? key.k : key.m, key.trans_a ? key.m : key.k, key.lda));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->b, ab, key.trans_b ? key.n : key.k, key.trans_b ? key.k : key.n, key.ldb));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->d, d, key.m, key.n, key.ldd));

    cublasLtMatmulPreference_t pref;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    set_pref(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, (uint64_t)ctx->lt_workspace_bytes);
    set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_a);
    set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_b);
    set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_d);
    set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_d);
    /* off asks for the first algorithm only, as before kernels.lt_tune */
    const int wanted = ctx->lt_plans->tuner.mode == LT_TUNE_OFF ? 1 : LT_TUNE_CANDIDATES;
    p->status = cublasLtMatmulAlgoGetHeuristic(ctx->lt, p->desc, p->a, p->b, p->d, p->d, pref, wanted, c->r, &p->found);
    /* a result's other fields are valid only if its state is SUCCESS:
     * the first decides, as it did alone; later ones that failed are dropped */
    if (p->status == CUBLAS_STATUS_SUCCESS && p->found > 0 && c->r[0].state != CUBLAS_STATUS_SUCCESS) p->status = c->r[0].state;
    if (p->status != CUBLAS_STATUS_SUCCESS) p->found = 0;
    int kept = 0;
    for (int i = 0; i < p->found; i++)
        if (c->r[i].state == CUBLAS_STATUS_SUCCESS) c->r[kept++] = c->r[i];
    p->found = kept;
    if (kept > 0) p->heuristic = c->r[0];
    CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
}

void destroy_plan(lt_plan *p) {
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(p->d));
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(p->b));
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(p->a));
    CUBLAS_CHECK(cublasLtMatmulDescDestroy(p->desc));
}

lt_plan *find_plan(cuda_lt_plans *t, const lt_key &key) {
    for (int i = 0; i < t->count; i++)
        if (memcmp(&t->plans[i].key, &key, sizeof key) == 0) return &t->plans[i];
    return NULL;
}

/* The table's copy of p (grown as needed), or NULL when the table is full
 * or cannot grow: the caller then uses p once and destroys it. */
lt_plan *keep_plan(cuda_lt_plans *t, const lt_plan &p) {
    if (t->count == t->capacity) {
        if (t->capacity >= CUDA_LT_PLANS_MAX) return NULL;
        int capacity = t->capacity ? 2 * t->capacity : FIRST_CAPACITY;
        if (capacity > CUDA_LT_PLANS_MAX) capacity = CUDA_LT_PLANS_MAX;
        lt_plan *grown = (lt_plan *)realloc(t->plans, (size_t)capacity * sizeof *grown);
        if (!grown) return NULL;
        t->plans = grown;
        t->capacity = capacity;
    }
    t->plans[t->count] = p;
    return &t->plans[t->count++];
}

/* Says once per plan why a product with an epilogue takes the unfused
 * kernels, where the reason is not the plain "no algorithm for this
 * shape" (CUBLAS_STATUS_NOT_SUPPORTED from the heuristic): a refusal by
 * cublasLtMatmul itself, or a heuristic error, which may be a setup bug
 * that would otherwise look like a slowdown only. */
void warn_fallback(const char *what, const lt_plan &p, const char *who, cublasStatus_t status) {
    const lt_key &k = p.key;
    tg_warn("train_gpt",
            "%s: %s answered cuBLAS status %d for its fused epilogue %d (m=%d n=%d k=%d, ldd=%d, bias/aux alignment "
            "%u/%u); the unfused kernels run instead",
            what, who, (int)status, (int)k.epilogue, k.m, k.n, k.k, k.ldd, k.align_bias, k.align_aux);
}

__attribute__((noreturn)) void die_no_algorithm(const char *what, const lt_plan &p) {
    const lt_key &k = p.key;
    tg_err e;
    tg_fail(&e,
            "cuBLASLt has no algorithm for %s: m=%d n=%d k=%d, op(A)=%c op(B)=%c, A/B %s, D %s, lda=%d ldb=%d ldd=%d, "
            "alignment A %u B %u D %u bytes (heuristic status %d, %d found)",
            what, k.m, k.n, k.k, k.trans_a ? 'T' : 'N', k.trans_b ? 'T' : 'N', type_name(k.ab), type_name(k.d), k.lda, k.ldb,
            k.ldd, k.align_a, k.align_b, k.align_d, (int)p.status, p.found);
    tg_die("train_gpt", &e);
}


/* The operands of one product, as lt_product was given them. */
struct lt_operands {
    const void *A, *B;
    void *D;
    float beta;
};

/* One call of the plan's product with algorithm `algo` into D (also C). */
cublasStatus_t run_with(cuda_ctx *ctx, const lt_lane &lane, const lt_plan &p, const cublasLtMatmulAlgo_t &algo,
                        const lt_operands &x, void *D) {
    const float alpha = 1.0f;
    return cublasLtMatmul(ctx->lt, p.desc, &alpha, x.A, p.a, x.B, p.b, &x.beta, D, p.d, D, p.d, &algo, lane.workspace,
                          ctx->lt_workspace_bytes, lane.stream);
}

/* Milliseconds a call of candidate `algo` takes (CUDA events on the
 * lane's stream around TIMED_REPS calls, after one untimed call), or -1
 * when cuBLASLt refuses it. Into D: what the caller then writes anyway. */
float time_candidate(cuda_ctx *ctx, const lt_lane &lane, const lt_plan &p, const cublasLtMatmulAlgo_t &algo,
                     const lt_operands &x, void *D) {
    const int TIMED_REPS = 3;
    if (run_with(ctx, lane, p, algo, x, D) != CUBLAS_STATUS_SUCCESS) return -1.0f;
    cudaEvent_t start, stop;
    lt_tuner_events(&ctx->lt_plans->tuner, &start, &stop);
    CUDA_CHECK(cudaEventRecord(start, lane.stream));
    for (int r = 0; r < TIMED_REPS; r++) CUBLAS_CHECK(run_with(ctx, lane, p, algo, x, D));
    CUDA_CHECK(cudaEventRecord(stop, lane.stream));
    CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0.0f;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    return ms / TIMED_REPS;
}

/* Bytes D spans: n columns of ldd, the last one m rows. */
size_t d_span_bytes(const lt_key &k) {
    return ((size_t)(k.n - 1) * (size_t)k.ldd + (size_t)k.m) * (k.d == CUDA_R_16BF ? 2 : 4);
}

/* Times every candidate and keeps the fastest (the earliest on a tie) in
 * c: the product writes D with beta = 0, so the candidates time into D
 * itself; one that accumulates (beta != 0) times into a copy-sized
 * temporary instead, so that D is added to once, by the real call. False
 * when nothing could be timed (no memory for the temporary, or cuBLASLt
 * refusing every candidate): the heuristic's first then runs. */
bool time_candidates(cuda_ctx *ctx, const lt_lane &lane, const char *what, lt_plan *p, const lt_candidates &cands,
                     const lt_operands &x, lt_choice *c) {
    void *D = x.D;
    if (x.beta != 0.0f) {
        if (cudaMalloc(&D, d_span_bytes(p->key)) != cudaSuccess) {
            cudaGetLastError();
            tg_warn("train_gpt", "%s: no device memory to time cuBLASLt's algorithms; the heuristic's first runs", what);
            return false;
        }
        CUDA_CHECK(cudaMemsetAsync(D, 0, d_span_bytes(p->key), lane.stream)); /* no NaNs or denormals to time on */
    }
    int best = -1;
    for (int i = 0; i < p->found; i++) {
        const float ms = time_candidate(ctx, lane, *p, cands.r[i].algo, x, D);
        if (i == 0) c->first_ms = ms;
        if (ms >= 0.0f && (best < 0 || ms < c->ms)) best = i, c->ms = ms;
    }
    if (D != x.D) CUDA_CHECK(cudaFree(D));
    if (best < 0) return false;
    c->chosen = best;
    c->algo = cands.r[best].algo;
    return true;
}

__attribute__((noreturn)) void die_not_offered(const char *what, const lt_tuner &t, const lt_choice &pin, int found) {
    tg_err e;
    tg_fail(&e,
            "%s:%d: field algo: the algorithm recorded for %s (m=%d n=%d k=%d) is not among the %d cuBLASLt offers for it here "
            "(another cuBLAS version or GPU?); kernels.lt_tune=time chooses afresh",
            t.source, pin.line, what, pin.key.m, pin.key.n, pin.key.k, found);
    tg_die("train_gpt", &e);
}

/* The algorithm a new plan runs (kernels.lt_tune, lt_tune.h): the one its
 * record pins, else the fastest of the candidates (time) or the
 * heuristic's first, kept in the tuner's record. Nothing is timed while
 * the stream captures a graph (the timing waits for the device): such a
 * plan runs the heuristic's first, unrecorded. */
void choose_algorithm(cuda_ctx *ctx, const lt_lane &lane, const char *what, lt_plan *p, const lt_candidates &cands,
                      const lt_operands &x) {
    lt_tuner *t = &ctx->lt_plans->tuner;
    if (t->mode == LT_TUNE_OFF || p->found == 0) return;
    const lt_choice *pin = lt_tuner_find(t, p->key);
    if (pin) {
        for (int i = 0; i < p->found; i++)
            if (memcmp(&cands.r[i].algo, &pin->algo, sizeof pin->algo) == 0) {
                p->heuristic = cands.r[i];
                if (t->record[0] && !pin->recorded) lt_tuner_keep(t, lt_choice(*pin)); /* this run's record names it too */
                return;
            }
        /* a record pinned on purpose must hold; one "time" found in
         * out.dir may come from another GPU or cuBLAS: timed afresh */
        if (t->mode == LT_TUNE_FILE) die_not_offered(what, *t, *pin, p->found);
        tg_warn("train_gpt", "%s:%d: the algorithm recorded for %s is not among the %d cuBLASLt offers here; timed afresh",
                t->source, pin->line, what, p->found);
    }
    cudaStreamCaptureStatus capture;
    CUDA_CHECK(cudaStreamIsCapturing(lane.stream, &capture));
    if (capture != cudaStreamCaptureStatusNone) return;
    lt_choice c;
    memset(&c, 0, sizeof c);
    c.key = p->key;
    c.of = p->found;
    c.ms = c.first_ms = -1.0f;
    c.algo = cands.r[0].algo;
    snprintf(c.what, sizeof c.what, "%s", what);
    if (t->mode == LT_TUNE_TIME && !time_candidates(ctx, lane, what, p, cands, x, &c)) return;
    p->heuristic = cands.r[c.chosen];
    if (t->record[0] && t->mode == LT_TUNE_TIME)
        printf("cuBLASLt %s (m=%d n=%d k=%d): algorithm %d of %d, %.4g ms a call (the heuristic's first: %.4g)\n", what,
               p->key.m, p->key.n, p->key.k, c.chosen, c.of, c.ms, c.first_ms);
    lt_tuner_keep(t, c);
}

} // namespace

bool lt_product(cuda_ctx *ctx, const lt_lane &lane, const char *what, bool trans_a, bool trans_b, int m, int n, int k,
                const void *A, int lda, const void *B, int ldb, cudaDataType ab, void *D, int ldd, cudaDataType d, float beta,
                lt_epilogue ep) {
    if (m == 0 || n == 0 || (k == 0 && beta == 1.0f)) return true; /* nothing changes */
    const lt_key key = {trans_a, trans_b, m, n, k, lda, ldb, ldd, (int32_t)ab, (int32_t)d, (int32_t)ep.kind,
                        ptr_alignment(A), ptr_alignment(B), ptr_alignment(D),
                        uses_bias(ep.kind) ? ptr_alignment(ep.bias) : 0u, uses_aux(ep.kind) ? ptr_alignment(ep.aux) : 0u};
    lt_plan once; /* a plan the full table cannot keep: built, used and destroyed here */
    lt_candidates cands;
    lt_plan *plan = find_plan(ctx->lt_plans, key);
    bool kept = plan != NULL;
    if (!kept) {
        build_plan(ctx, key, ep, &once, &cands);
        if (once.found > 0) {
            set_epilogue_pointers(once.desc, ep);
            choose_algorithm(ctx, lane, what, &once, cands, lt_operands{A, B, D, beta});
        }
        if (once.status != CUBLAS_STATUS_SUCCESS && once.status != CUBLAS_STATUS_NOT_SUPPORTED &&
            ep.kind != CUBLASLT_EPILOGUE_DEFAULT)
            warn_fallback(what, once, "cublasLtMatmulAlgoGetHeuristic", once.status);
        plan = keep_plan(ctx->lt_plans, once);
        kept = plan != NULL;
        if (!kept) plan = &once;
    }
    if (plan->found == 0 && ep.kind == CUBLASLT_EPILOGUE_DEFAULT) die_no_algorithm(what, *plan);
    if (plan->found > 0) {
        set_epilogue_pointers(plan->desc, ep);
        const float alpha = 1.0f;
        const cublasStatus_t ran = cublasLtMatmul(ctx->lt, plan->desc, &alpha, A, plan->a, B, plan->b, &beta, D, plan->d, D,
                                                  plan->d, &plan->heuristic.algo, lane.workspace, ctx->lt_workspace_bytes,
                                                  lane.stream);
        /* The device may still refuse an epilogue the heuristic offered
         * ("the current implementation on the selected device doesn't
         * support the configured operation"): nothing ran, and the plan
         * says so from now on, so that every call of this key takes the
         * fallback and the bits stay the same from call to call. */
        if (ran == CUBLAS_STATUS_NOT_SUPPORTED && ep.kind != CUBLASLT_EPILOGUE_DEFAULT) {
            plan->found = 0;
            plan->status = ran;
            warn_fallback(what, *plan, "cublasLtMatmul", ran);
        } else {
            CUBLAS_CHECK(ran);
        }
    }
    const bool found = plan->found > 0;
    if (!kept) destroy_plan(&once);
    return found;
}

void lt_gemm(cuda_ctx *ctx, const lt_lane &lane, const char *what, bool trans_a, bool trans_b, int m, int n, int k,
             const void *A, int lda, const void *B, int ldb, cudaDataType ab, void *D, int ldd, cudaDataType d, float beta) {
    lt_product(ctx, lane, what, trans_a, trans_b, m, n, k, A, lda, B, ldb, ab, D, ldd, d, beta,
               lt_epilogue{CUBLASLT_EPILOGUE_DEFAULT, NULL, NULL});
}

struct cuda_lt_plans *cuda_lt_plans_create(void) { return (cuda_lt_plans *)calloc(1, sizeof(cuda_lt_plans)); }

lt_tuner *lt_plans_tuner(struct cuda_lt_plans *plans) { return &plans->tuner; }

void cuda_lt_plans_destroy(struct cuda_lt_plans *t) {
    if (!t) return;
    lt_tuner_release(&t->tuner);
    for (int i = 0; i < t->count; i++) destroy_plan(&t->plans[i]);
    free(t->plans);
    free(t);
}
