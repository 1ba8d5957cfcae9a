/* Token + position embeddings on the GPU (vocab-parallel lookup).
 * Forward: one thread per 16-byte pack of output elements where the rows
 * and pointers allow (else per element; grid-stride), the token row plus
 * the position row added in float32 and stored once.
 * Backward, dwte: the scatter-add over repeated tokens runs without atomics.
 * The rows are radix-sorted by local token id (cub, stable, so equal ids keep
 * row order); one block per run of equal ids (and per tile of columns) then
 * adds its rows in row order to dwte, starting from the value already there:
 * the same order of additions as kernels/cpu/encoder.c. Rows are sorted in
 * chunks when the scratch cannot hold them all; chunks go in row order.
 * Backward, dwpe and position_backward: one thread per (position, column),
 * adding that position's rows in row order. */
#include <cub/device/device_radix_sort.cuh>

#include "kernels/cuda/cuda_ctx.h"
#include "kernels/cuda/kernels.h"
#include "kernels/cuda/vec.cuh"

#define THREADS 256
#define MAX_BLOCKS (1u << 20) /* grid-stride loops cover the rest */
#define RUN_THREADS 128       /* columns per block of the per-run kernel */
#define SCRATCH_ALIGN ((size_t)256)

namespace {

unsigned grid_for(size_t n) {
    unsigned b = tg_blocks(n, THREADS);
    return b < MAX_BLOCKS ? b : MAX_BLOCKS;
}

size_t align_up(size_t bytes) { return (bytes + SCRATCH_ALIGN - 1) / SCRATCH_ALIGN * SCRATCH_ALIGN; }

template <typename T>
__global__ void encoder_forward_kernel(T *out, const int32_t *tokens, const T *wte, const T *wpe, int T_len, int C,
                                       int vocab_start, int vocab_local, size_t total) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        size_t n = i / (size_t)C, c = i % (size_t)C;
        int local = tokens[n] - vocab_start;
        float v = (local >= 0 && local < vocab_local) ? tg_load(wte, (size_t)local * C + c) : 0.0f;
        if (wpe) v += tg_load(wpe, (n % (size_t)T_len) * C + c);
        tg_store(out, i, v);
    }
}

/* The same in 16-byte packs (rows of whole packs, every pointer aligned),
 * indexed by I (uint32_t where the sizes allow): a 64-bit division and
 * remainder per element made the element kernel slower than its memory
 * (615 GB/s at 124M on the H200). The same adds: the same bits. */
template <typename T, typename I>
__global__ void encoder_forward_packed_kernel(T *out, const int32_t *tokens, const T *wte, const T *wpe, int T_len, int C,
                                              int vocab_start, int vocab_local, I packs) {
    constexpr int P = vec_pack<T>::N;
    const I row_packs = (I)(C / P);
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < packs; i += (I)gridDim.x * blockDim.x) {
        const I n = i / row_packs, c = (i - n * row_packs) * P;
        const int local = tokens[n] - vocab_start;
        const bool real = local >= 0 && local < vocab_local;
        vec_pack<T> e = {}, q = {}, y;
        if (real) e = vec_load(wte + (size_t)local * C + c);
        if (wpe) q = vec_load(wpe + (size_t)(n % (I)T_len) * C + c);
#pragma unroll
        for (int j = 0; j < P; j++) {
            float v = real ? tg_load(e.e, j) : 0.0f;
            if (wpe) v += tg_load(q.e, j);
            tg_store(y.e, j, v);
        }
        vec_store(out + (size_t)n * C + c, y);
    }
}

/* out[n] += wpe[(row_start + n) % T] */
template <typename T>
__global__ void position_forward_kernel(T *out, const T *wpe, long long row_start, int T_len, int C, size_t total) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        size_t n = i / (size_t)C, c = i % (size_t)C;
        size_t t = (size_t)((row_start + (long long)n) % T_len);
        tg_store(out, i, tg_load(out, i) + tg_load(wpe, t * C + c));
    }
}

/* The same in 16-byte packs, as encoder_forward_packed_kernel (row_start
 * >= 0: a rank's first row). */
template <typename T, typename I>
__global__ void position_forward_packed_kernel(T *out, const T *wpe, long long row_start, int T_len, int C, I packs) {
    constexpr int P = vec_pack<T>::N;
    const I row_packs = (I)(C / P), t0 = (I)(row_start % T_len); /* (row_start + n) % T = (t0 + n % T) % T */
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < packs; i += (I)gridDim.x * blockDim.x) {
        const I n = i / row_packs, c = (i - n * row_packs) * P;
        I t = t0 + n % (I)T_len;
        if (t >= (I)T_len) t -= (I)T_len;
        T *o = out + (size_t)n * C + c;
        const vec_pack<T> x = vec_load(o), q = vec_load(wpe + (size_t)t * C + c);
        vec_pack<T> y;
#pragma unroll
        for (int j = 0; j < P; j++) tg_store(y.e, j, tg_load(x.e, j) + tg_load(q.e, j));
        vec_store(o, y);
    }
}

/* dwpe[t, c] (+)= dout[n, c] over the local rows n at position t, in row
 * order, onto dwpe's value (acc) or onto 0 (every position written, also
 * one no local row is at); local row n is at position (row_start + n) % T.
 * One thread per (t, c). The encoder's dwpe is the case row_start = 0,
 * N = B * T. */
template <typename T>
__global__ void position_backward_kernel(float *dwpe, const T *dout, long long row_start, int N, int T_len, int C, bool acc) {
    size_t total = (size_t)T_len * C;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        long long t = (long long)(i / (size_t)C);
        size_t c = i % (size_t)C;
        long long first = ((t - row_start) % T_len + T_len) % T_len; /* first local row at position t */
        float sum = acc ? dwpe[i] : 0.0f;
        for (long long n = first; n < N; n += T_len) sum += tg_load(dout, (size_t)n * C + c);
        dwpe[i] = sum;
    }
}

/* Sort input for rows [row0, row0 + rows): key = local token id, or
 * vocab_local (sorts last, skipped) for tokens outside this rank's slice;
 * value = the global row index. */
__global__ void token_keys_kernel(unsigned *keys, int *row_ids, const int32_t *tokens, int row0, int rows, int vocab_start,
                                  int vocab_local) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < rows; i += gridDim.x * blockDim.x) {
        int local = tokens[row0 + i] - vocab_start;
        keys[i] = (local >= 0 && local < vocab_local) ? (unsigned)local : (unsigned)vocab_local;
        row_ids[i] = row0 + i;
    }
}

/* End of the run of `key` that starts at sorted position start: the first
 * position after it whose key differs (or rows). Galloping then binary
 * search, so a run of length L costs O(log L) loads. */
__device__ int run_end(const unsigned *keys, int start, int rows, unsigned key) {
    long long lo = start + 1; /* keys[lo - 1] == key */
    long long hi;             /* keys[hi] != key, or hi == rows */
    for (long long step = 1;; step *= 2) {
        long long probe = start + step;
        if (probe >= rows) {
            hi = rows;
            break;
        }
        if (keys[probe] != key) {
            hi = probe;
            break;
        }
        lo = probe + 1;
    }
    while (lo < hi) {
        long long mid = lo + (hi - lo) / 2;
        if (keys[mid] == key) lo = mid + 1;
        else hi = mid;
    }
    return (int)lo;
}

/* Grid (rows, column tiles). Block x owns the run of equal keys that starts
 * at sorted position x (other blocks exit); each thread adds the run's rows
 * of its column, in row order, to dwte. */
template <typename T>
__global__ void dwte_runs_kernel(float *dwte, const T *dout, const unsigned *keys, const int *row_ids, int rows, int C,
                                 unsigned vocab_local) {
    int start = blockIdx.x;
    unsigned key = keys[start];
    if (key >= vocab_local) return;                  /* not this rank's token */
    if (start > 0 && keys[start - 1] == key) return; /* not the head of a run */
    int c = blockIdx.y * blockDim.x + threadIdx.x;
    if (c >= C) return;
    int end = run_end(keys, start, rows, key);
    float *d = dwte + (size_t)key * C + c;
    float acc = *d;
#pragma unroll 8
    for (int j = start; j < end; j++) acc += tg_load(dout, (size_t)row_ids[j] * C + c);
    *d = acc;
}

/* Bits that hold every key 0..vocab_local. */
int key_bits(int vocab_local) {
    int bits = 1;
    while (bits < 32 && ((unsigned long long)1 << bits) <= (unsigned long long)vocab_local) bits++;
    return bits;
}

size_t sort_temp_bytes(int rows, int end_bit, cudaStream_t stream) {
    size_t bytes = 0;
    CUDA_CHECK(cub::DeviceRadixSort::SortPairs(NULL, bytes, (const unsigned *)NULL, (unsigned *)NULL, (const int *)NULL,
                                               (int *)NULL, rows, 0, end_bit, stream));
    return bytes;
}

/* Scratch for sorting `rows` rows: keys and row ids, in and out, plus cub's temp. */
size_t sort_scratch_bytes(int rows, int end_bit, cudaStream_t stream) {
    return 2 * align_up((size_t)rows * sizeof(unsigned)) + 2 * align_up((size_t)rows * sizeof(int)) +
           align_up(sort_temp_bytes(rows, end_bit, stream));
}

template <typename T>
void dwte_backward(cuda_ctx *ctx, float *dwte, const T *dout, const int32_t *tokens, int N, int C, int vocab_start,
                   int vocab_local) {
    cudaStream_t stream = ctx->stream;
    int end_bit = key_bits(vocab_local);
    int chunk = N;
    while (chunk > 1 && sort_scratch_bytes(chunk, end_bit, stream) > ctx->scratch_bytes) chunk = (chunk + 1) / 2;
    if (sort_scratch_bytes(chunk, end_bit, stream) > ctx->scratch_bytes)
        cuda_fail(cudaErrorMemoryAllocation, "encoder backward: sort scratch", __FILE__, __LINE__);

    char *s = (char *)ctx->scratch;
    unsigned *keys_in = (unsigned *)s;
    s += align_up((size_t)chunk * sizeof(unsigned));
    unsigned *keys_out = (unsigned *)s;
    s += align_up((size_t)chunk * sizeof(unsigned));
    int *rows_in = (int *)s;
    s += align_up((size_t)chunk * sizeof(int));
    int *rows_out = (int *)s;
    s += align_up((size_t)chunk * sizeof(int));
    void *temp = s;
    size_t temp_avail = ctx->scratch_bytes - (size_t)(s - (char *)ctx->scratch); /* >= cub's need for `chunk` rows */

    unsigned col_tiles = tg_blocks((size_t)C, RUN_THREADS);
    for (int row0 = 0; row0 < N; row0 += chunk) {
        int rows = N - row0 < chunk ? N - row0 : chunk;
        token_keys_kernel<<<grid_for((size_t)rows), THREADS, 0, stream>>>(keys_in, rows_in, tokens, row0, rows, vocab_start,
                                                                         vocab_local);
        CUDA_LAUNCHED("token_keys_kernel");
        size_t temp_bytes = temp_avail; /* cub checks it covers what this size needs */
        CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, keys_in, keys_out, rows_in, rows_out, rows, 0, end_bit,
                                                   stream));
        dim3 grid((unsigned)rows, col_tiles);
        dwte_runs_kernel<T><<<grid, RUN_THREADS, 0, stream>>>(dwte, dout, keys_out, rows_out, rows, C, (unsigned)vocab_local);
        CUDA_LAUNCHED("dwte_runs_kernel");
    }
}

template <typename T>
void encoder_forward(cudaStream_t stream, void *out, const int32_t *tokens, const void *wte, const void *wpe, int B, int T_len,
                     int C, int vocab_start, int vocab_local) {
    size_t total = (size_t)B * T_len * C;
    if (vec_rows<T>(C, out, wte, wpe)) {
        const size_t packs = total / vec_pack<T>::N;
        const unsigned grid = vec_grid(total, vec_pack<T>::N);
        if (vec_index32(packs, (size_t)grid * VEC_THREADS))
            encoder_forward_packed_kernel<T, uint32_t><<<grid, VEC_THREADS, 0, stream>>>(
                (T *)out, tokens, (const T *)wte, (const T *)wpe, T_len, C, vocab_start, vocab_local, (uint32_t)packs);
        else
            encoder_forward_packed_kernel<T, size_t><<<grid, VEC_THREADS, 0, stream>>>(
                (T *)out, tokens, (const T *)wte, (const T *)wpe, T_len, C, vocab_start, vocab_local, packs);
        CUDA_LAUNCHED("encoder_forward_packed_kernel");
        return;
    }
    encoder_forward_kernel<T><<<grid_for(total), THREADS, 0, stream>>>((T *)out, tokens, (const T *)wte, (const T *)wpe, T_len,
                                                                        C, vocab_start, vocab_local, total);
    CUDA_LAUNCHED("encoder_forward_kernel");
}

template <typename T>
void encoder_backward(cuda_ctx *ctx, float *dwte, float *dwpe, const void *dout, const int32_t *tokens, int B, int T_len, int C,
                      int vocab_start, int vocab_local) {
    if (dwte && vocab_local > 0) dwte_backward<T>(ctx, dwte, (const T *)dout, tokens, B * T_len, C, vocab_start, vocab_local);
    if (dwpe) {
        position_backward_kernel<T><<<grid_for((size_t)T_len * C), THREADS, 0, ctx->stream>>>(dwpe, (const T *)dout, 0, B * T_len,
                                                                                             T_len, C, true);
        CUDA_LAUNCHED("position_backward_kernel");
    }
}

template <typename T>
void position_forward(cudaStream_t stream, void *out, const void *wpe, int row_start, int N, int T_len, int C) {
    size_t total = (size_t)N * C;
    if (vec_rows<T>(C, out, wpe)) {
        const size_t packs = total / vec_pack<T>::N;
        const unsigned grid = vec_grid(total, vec_pack<T>::N);
        if (vec_index32(packs, (size_t)grid * VEC_THREADS))
            position_forward_packed_kernel<T, uint32_t><<<grid, VEC_THREADS, 0, stream>>>((T *)out, (const T *)wpe, row_start,
                                                                                         T_len, C, (uint32_t)packs);
        else
            position_forward_packed_kernel<T, size_t><<<grid, VEC_THREADS, 0, stream>>>((T *)out, (const T *)wpe, row_start,
                                                                                       T_len, C, packs);
        CUDA_LAUNCHED("position_forward_packed_kernel");
        return;
    }
    position_forward_kernel<T><<<grid_for(total), THREADS, 0, stream>>>((T *)out, (const T *)wpe, row_start, T_len, C, total);
    CUDA_LAUNCHED("position_forward_kernel");
}

template <typename T>
void position_backward(cudaStream_t stream, float *dwpe, const void *dout, int row_start, int N, int T_len, int C, bool acc) {
    position_backward_kernel<T><<<grid_for((size_t)T_len * C), THREADS, 0, stream>>>(dwpe, (const T *)dout, row_start, N, T_len,
                                                                                    C, acc);
    CUDA_LAUNCHED("position_backward_kernel");
}

} // namespace

void cuda_encoder_forward(tg_o o, void *out, const int32_t *tokens, const void *wte, const void *wpe, int B, int T, int C,
                          int vocab_start, int vocab_local) {
    if ((size_t)B * T * C == 0) return;
    cudaStream_t stream = cuda_ctx_of(o)->stream;
    if (o->act == TG_BF16) encoder_forward<__nv_bfloat16>(stream, out, tokens, wte, wpe, B, T, C, vocab_start, vocab_local);
    else encoder_forward<float>(stream, out, tokens, wte, wpe, B, T, C, vocab_start, vocab_local);
}

void cuda_encoder_backward(tg_o o, float *dwte, float *dwpe, const void *dout, const int32_t *tokens, int B, int T, int C,
                           int vocab_start, int vocab_local) {
    if ((size_t)B * T * C == 0) return;
    cuda_ctx *ctx = cuda_ctx_of(o);
    if (o->act == TG_BF16) encoder_backward<__nv_bfloat16>(ctx, dwte, dwpe, dout, tokens, B, T, C, vocab_start, vocab_local);
    else encoder_backward<float>(ctx, dwte, dwpe, dout, tokens, B, T, C, vocab_start, vocab_local);
}

void cuda_position_forward(tg_o o, void *out, const void *wpe, int row_start, int N, int T, int C) {
    if ((size_t)N * T * C == 0) return;
    cudaStream_t stream = cuda_ctx_of(o)->stream;
    if (o->act == TG_BF16) position_forward<__nv_bfloat16>(stream, out, wpe, row_start, N, T, C);
    else position_forward<float>(stream, out, wpe, row_start, N, T, C);
}

void cuda_position_backward(tg_o o, float *dwpe, const void *dout, int row_start, int N, int T, int C, bool acc) {
    if ((size_t)T * C == 0 || (N <= 0 && acc)) return; /* no rows to add (writing, still the zeros) */
    cudaStream_t stream = cuda_ctx_of(o)->stream;
    if (o->act == TG_BF16) position_backward<__nv_bfloat16>(stream, dwpe, dout, row_start, N, T, C, acc);
    else position_backward<float>(stream, dwpe, dout, row_start, N, T, C, acc);
}
