#include "train/zero_shards.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/dp_buckets.h"

static void add_region(zero_shards *z, size_t begin, size_t len, int stage) {
    z->region_stage[z->n_regions] = stage;
    z->regions[z->n_regions++] = (zero_region){begin, len};
}

int zero_shards_stage_of(const zero_shards *z, int layer) {
    if (layer < 0) return 0;
    return layer < z->lowest ? 1 : 2 + (layer - z->lowest) / z->layers_per_bucket;
}

void zero_shards_init(zero_shards *z, const gpt *g, int dp, int rank, int layers_per_bucket) {
    const int L = g->d.L;
    *z = (zero_shards){.dp = dp, .rank = rank, .layers = L, .layers_per_bucket = layers_per_bucket,
                       .lowest = dp_bucket_lowest(L, layers_per_bucket)};
    const int per_kind = 1 + (L - z->lowest + layers_per_bucket - 1) / layers_per_bucket;
    z->n_stages = 1 + per_kind;
    z->regions = tg_calloc((size_t)P_KINDS * (size_t)per_kind, sizeof *z->regions, "ZeRO regions");
    z->region_stage = tg_calloc((size_t)P_KINDS * (size_t)per_kind, sizeof *z->region_stage, "ZeRO regions");
    for (int k = 0; k < P_KINDS; k++) { /* kinds lie in this order in the buffer */
        const size_t base = g->kind_offset[k], stride = g->kind_size[k];
        if (!gpt_kind_per_layer((param_kind)k)) {
            add_region(z, base, stride, 0);
            continue;
        }
        add_region(z, base, (size_t)z->lowest * stride, 1);
        for (int lo = z->lowest; lo < L; lo += layers_per_bucket)
            add_region(z, base + (size_t)lo * stride, (size_t)layers_per_bucket * stride, zero_shards_stage_of(z, lo));
    }
    for (int i = 0; i < z->n_regions; i++) {
        if (z->regions[i].len % (size_t)dp) { /* the caller skipped gpt_dims.param_align */
            fprintf(stderr, "internal error: ZeRO region %d (%zu floats) does not divide among %d ranks\n", i,
                    z->regions[i].len, dp);
            abort();
        }
        z->shard_len += z->regions[i].len / (size_t)dp;
    }
    z->gather_reqs = tg_calloc((size_t)z->n_regions, sizeof *z->gather_reqs, "ZeRO all-gather requests");
    z->stage_modeled_s = tg_calloc((size_t)z->n_stages, sizeof *z->stage_modeled_s, "ZeRO gather stages");
}

void zero_shards_free(zero_shards *z) {
    free(z->regions);
    free(z->gather_reqs);
    free(z->region_stage);
    free(z->stage_modeled_s);
    z->regions = NULL;
    z->gather_reqs = NULL;
    z->region_stage = NULL;
    z->stage_modeled_s = NULL;
    z->n_regions = 0;
}

/* The moment index of this rank's chunk of the region that starts at
 * `begin` (its chunks are packed in the regions' order). */
static size_t moment_of(const zero_shards *z, size_t begin) {
    size_t m = 0;
    for (int i = 0; i < z->n_regions && z->regions[i].begin < begin; i++) m += z->regions[i].len / (size_t)z->dp;
    return m;
}

/* Tensors [first, first + count) of t's kind as one span whose window is
 * this rank's chunk of regions of `layers` tensors each. */
static tg_span chunk_span(const zero_shards *z, const gpt *g, const gpt_tensor *t, int first, int count, int layers) {
    const size_t stride = g->kind_size[t->kind], begin = t->offset + (size_t)first * stride;
    const size_t chunk = (size_t)layers * stride / (size_t)z->dp;
    const tg_window w = {begin, (size_t)layers * stride, (size_t)z->rank * chunk, (size_t)(z->rank + 1) * chunk,
                         moment_of(z, begin)};
    return (tg_span){begin, stride, t->numel, count, t->decay, w};
}

int zero_shards_kind_spans(const zero_shards *z, const gpt *g, const gpt_tensor *t, tg_span *out) {
    if (t->layer < 0) {
        out[0] = chunk_span(z, g, t, 0, 1, 1);
        return 1;
    }
    const int L = g->d.L;
    int n = 0;
    out[n++] = chunk_span(z, g, t, 0, z->lowest, z->lowest);
    if (L > z->lowest) out[n++] = chunk_span(z, g, t, z->lowest, L - z->lowest, z->layers_per_bucket);
    return n;
}

/* Starts, as one group, the all-gathers of the regions of `stage` (every
 * region when stage < 0); a region's request goes to gather_reqs[i], NULL
 * where none was made. After a failure the group is still closed. */
static int start_regions(zero_shards *z, comm *dp, void *buf, tg_dtype t, int stage, tg_err *e) {
    const size_t elem = tg_dtype_bytes(t);
    const bool grouped = comm_group_begin(dp, e) == 0;
    int rc = grouped ? 0 : -1;
    for (int i = 0; i < z->n_regions; i++) {
        if (stage >= 0 && z->region_stage[i] != stage) continue;
        z->gather_reqs[i] = NULL;
        if (rc) continue;
        char *region = (char *)buf + z->regions[i].begin * elem;
        const size_t chunk = z->regions[i].len / (size_t)z->dp;
        z->gather_reqs[i] = comm_all_gather_start(dp, region, region + (size_t)z->rank * chunk * elem, chunk, t, e);
        if (!z->gather_reqs[i]) rc = -1;
    }
    tg_err later; /* the first failure is told */
    if (grouped && comm_group_end(dp, rc ? &later : e)) rc = -1;
    return rc;
}

/* Waits for the requests start_regions made for `stage` (every one when
 * stage < 0), all of them even after a failure; the first failure is told. */
static int wait_regions(zero_shards *z, int stage, int rc, tg_err *e) {
    tg_err later;
    for (int i = 0; i < z->n_regions; i++) {
        if ((stage >= 0 && z->region_stage[i] != stage) || !z->gather_reqs[i]) continue;
        if (comm_wait(z->gather_reqs[i], rc ? &later : e)) rc = -1;
        z->gather_reqs[i] = NULL;
    }
    return rc;
}

int zero_shards_all_gather(zero_shards *z, comm *dp, void *buf, tg_dtype t, tg_err *e) {
    return wait_regions(z, -1, start_regions(z, dp, buf, t, -1, e), e);
}

int zero_shards_gather_begin(zero_shards *z, comm *dp, void *buf, tg_dtype t, tg_err *e) {
    z->stages_started = z->stages_done = 0;
    int rc = 0;
    for (int s = 0; s < z->n_stages; s++) { /* every stage's requests are made, so that every wait finds its own */
        tg_err later;
        const double modeled_before = dp->modeled_seconds;
        if (start_regions(z, dp, buf, t, s, rc ? &later : e)) rc = -1;
        z->stage_modeled_s[s] = dp->modeled_seconds - modeled_before;
    }
    z->stages_started = z->n_stages;
    return rc;
}

int zero_shards_gather_wait_stage(zero_shards *z, int stage, tg_err *e) {
    int rc = 0;
    for (; z->stages_done <= stage && z->stages_done < z->stages_started; z->stages_done++) {
        tg_err later;
        if (wait_regions(z, z->stages_done, 0, rc ? &later : e)) rc = -1;
    }
    return rc;
}

double zero_shards_gather_hidden_s(const zero_shards *z, double forward_s) {
    double need_s[z->n_stages];
    for (int s = 0; s < z->n_stages; s++) /* stage s > 1 starts at layer lowest + (s - 2) * layers_per_bucket */
        need_s[s] = s < 2 ? 0 : forward_s * (z->lowest + (s - 2) * z->layers_per_bucket) / z->layers;
    return comm_prefetch_hidden_s(need_s, z->stage_modeled_s, z->n_stages);
}

void zero_shards_unpack(const zero_shards *z, const float *gathered, float *full) {
    size_t m = 0;
    for (int i = 0; i < z->n_regions; i++) {
        const size_t chunk = z->regions[i].len / (size_t)z->dp;
        for (int r = 0; r < z->dp; r++)
            memcpy(full + z->regions[i].begin + (size_t)r * chunk, gathered + (size_t)r * z->shard_len + m,
                   chunk * sizeof(float));
        m += chunk;
    }
}

void zero_shards_pack(const zero_shards *z, const comm_memory *mem, const float *full, float *mine) {
    size_t m = 0;
    for (int i = 0; i < z->n_regions; i++) {
        const size_t chunk = z->regions[i].len / (size_t)z->dp;
        mem->copy(mem->ctx, mine + m, full + z->regions[i].begin + (size_t)z->rank * chunk, chunk * sizeof(float));
        m += chunk;
    }
}
