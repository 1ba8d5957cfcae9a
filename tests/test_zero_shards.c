/* ZeRO's shards (train/zero_shards.h) on small models at several DP sizes,
 * bucket sizes and TP ranks, against the definition: the regions tile the
 * flat buffer in order, a kind's tensors over one bucket each, every length
 * a multiple of dp; every tensor element belongs to exactly one rank, the
 * one whose chunk of its region holds it, and no gap element to any; a
 * rank's moment of an element is its place among the rank's chunks, packed
 * in the regions' order; the buckets' reduce-scatters cover the same
 * regions, a group of collectives per bucket, and the all-gather of the
 * updated weights every region in one group, and staged, each stage's
 * modeled seconds; pack and unpack are each other's inverse. Prints "ok NAME" /
 * "not ok NAME - why". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ops.h"
#include "tests/tap.h"
#include "train/dp_buckets.h"
#include "train/optim.h"
#include "train/zero_shards.h"

typedef struct layout_case {
    int L, dp, layers_per_bucket, tp, tp_rank;
} layout_case;

/* The model of a case, laid out as ZeRO shapes it (nothing runs on it). */
static gpt *model_of(const layout_case *lc, const tg_ops *ops, comm *tp) {
    const gpt_shape s = {lc->L, 4, 20, 7, 37, 8, false, RECOMPUTE_NONE, 0.0f, false};
    gpt_dims d;
    tg_err e;
    if (gpt_dims_of(&d, &s, lc->tp, lc->tp_rank, &e)) {
        printf("not ok dims - %s\n", e.msg);
        exit(1);
    }
    optim_shape_dims(&d, lc->dp, true);
    return gpt_create(ops, tp, &d, 1, 7, gpt_param_count(&d));
}

/* The tensor holding offset i, or NULL in a gap. */
static const gpt_tensor *tensor_at(const gpt *g, size_t i) {
    for (int t = 0; t < g->n_tensors; t++)
        if (i >= g->tensors[t].offset && i < g->tensors[t].offset + g->tensors[t].numel) return &g->tensors[t];
    return NULL;
}

/* By the definition: the rank owning offset i and its moment index there. */
static void owner_of(const zero_shards *z, size_t i, int *rank, size_t *moment) {
    size_t before = 0; /* one rank's chunk floats of the earlier regions */
    for (int r = 0; r < z->n_regions; r++) {
        const zero_region *reg = &z->regions[r];
        const size_t chunk = reg->len / (size_t)z->dp;
        if (i >= reg->begin && i < reg->begin + reg->len) {
            *rank = (int)((i - reg->begin) / chunk);
            *moment = before + (i - reg->begin) % chunk;
            return;
        }
        before += chunk;
    }
    *rank = -1;
}

/* Regions in order, back to back from 0 to n_params, a kind's tensors of
 * one bucket each (the lowest bucket first, as the buffer holds them). */
static void check_regions(const char *tag, const gpt *g, const zero_shards *z, int *failed) {
    char name[160], why[200] = "";
    size_t at = 0;
    int bad = 0;
    for (int r = 0; r < z->n_regions && !bad; r++) {
        const zero_region *reg = &z->regions[r];
        if (reg->begin != at || reg->len == 0 || reg->len % (size_t)z->dp) {
            snprintf(why, sizeof why, "region %d: [%zu, +%zu) after %zu, dp %d", r, reg->begin, reg->len, at, z->dp);
            bad = 1;
        }
        at = reg->begin + reg->len;
    }
    if (!bad && at != g->n_params) snprintf(why, sizeof why, "the regions end at %zu of %zu", at, g->n_params), bad = 1;
    int want = 0;
    const int buckets = 1 + (g->d.L - z->lowest + z->layers_per_bucket - 1) / z->layers_per_bucket;
    for (int k = 0; k < P_KINDS; k++) want += gpt_kind_per_layer((param_kind)k) ? buckets : 1;
    if (!bad && z->n_regions != want) snprintf(why, sizeof why, "%d regions, want %d", z->n_regions, want), bad = 1;
    if (!bad && z->shard_len * (size_t)z->dp != g->n_params)
        snprintf(why, sizeof why, "shard %zu x %d != %zu", z->shard_len, z->dp, g->n_params), bad = 1;
    snprintf(name, sizeof name, "zero_regions_tile_the_buffer_%s", tag);
    tap_check(failed, name, !bad, why);
}

/* Walks rank r's spans (the CPU kernels' walk, tg_span_next) and compares
 * every element it visits with the definition; counts visits per offset. */
static int walk_rank(const gpt *g, const zero_shards *z, int r, unsigned char *visits, char *why, size_t why_len) {
    tg_span spans[ZERO_SPANS_PER_KIND];
    for (int t = 0; t < g->n_tensors; t++) {
        const gpt_tensor *first = &g->tensors[t];
        if (first->layer > 0) continue;
        const int n = zero_shards_kind_spans(&z[r], g, first, spans);
        for (int s = 0; s < n; s++)
            for (int c = 0; c < spans[s].count; c++) {
                size_t at = 0, b, e, m;
                while (tg_span_next(&spans[s], c, &at, &b, &e, &m))
                    for (size_t i = b; i < e; i++, m++) {
                        int owner;
                        size_t want_m = 0;
                        owner_of(&z[r], i, &owner, &want_m);
                        if (owner != r || m != want_m || !tensor_at(g, i)) {
                            snprintf(why, why_len, "rank %d visits %zu (moment %zu): owner %d, moment %zu, %s", r, i,
                                     m, owner, want_m, tensor_at(g, i) ? "a tensor" : "a gap");
                            return -1;
                        }
                        visits[i]++;
                    }
            }
    }
    return 0;
}

/* Every tensor element visited exactly once over the ranks, gaps never. */
static void check_spans(const char *tag, const gpt *g, const zero_shards *z, int *failed) {
    unsigned char *visits = calloc(g->n_params, 1);
    char name[160], why[240] = "";
    int bad = 0;
    for (int r = 0; r < z->dp && !bad; r++) bad = walk_rank(g, z, r, visits, why, sizeof why) != 0;
    for (size_t i = 0; i < g->n_params && !bad; i++)
        if (visits[i] != (tensor_at(g, i) ? 1 : 0))
            snprintf(why, sizeof why, "offset %zu visited %d times", i, visits[i]), bad = 1;
    snprintf(name, sizeof name, "zero_spans_cover_each_element_once_%s", tag);
    tap_check(failed, name, !bad, why);
    free(visits);
}

/* Ring bytes of the reduce-scatters of the regions that start at layer l
 * (-1: the whole-model tensors'). */
static double region_bytes_at(const gpt *g, const zero_shards *z, int layer) {
    double bytes = 0;
    for (int r = 0; r < z->n_regions; r++)
        for (int k = 0; k < P_KINDS; k++) {
            const bool per_layer = gpt_kind_per_layer((param_kind)k);
            if (per_layer != (layer >= 0)) continue;
            if (z->regions[r].begin != g->kind_offset[k] + (per_layer ? (size_t)layer * g->kind_size[k] : 0)) continue;
            bytes += (double)(z->dp - 1) * (double)(z->regions[r].len / (size_t)z->dp) * sizeof(float);
        }
    return bytes;
}

/* The backward pass's hook (layers L-1 down to 0, then -1) reduce-scatters
 * at each layer exactly the regions that start there, as one group of
 * collectives (comm_group_begin) per layer that starts any, and in all one
 * per region; dp_buckets_start_all starts them all as one group. */
static void check_buckets(const char *tag, gpt *g, const zero_shards *z, int *failed) {
    comm *dp = comm_null_create("dp", 0, z->dp);
    comm_use_memory(dp, &g->ops->mem); /* the null backend holds no memory */
    dp_buckets b;
    dp_buckets_init(&b, dp, g, z->layers_per_bucket, true);
    const gpt_grad_hook hook = dp_buckets_hook(&b, g);
    tg_err e;
    char name[160], why[200] = "";
    int bad = 0;
    for (int l = g->d.L - 1; l >= -1 && !bad; l--) {
        const int before = b.n_reqs;
        const uint64_t groups = dp->groups;
        bad = hook.ready(hook.ctx, g, l, &e) != 0;
        double got = 0; /* the ring bytes of the collectives this layer started */
        for (int i = before; i < b.n_reqs; i++) got += b.reqs[i]->kind == COLL_REDUCE_SCATTER ? (double)b.reqs[i]->bytes : -1e18;
        const double want = region_bytes_at(g, z, l);
        const uint64_t want_groups = b.n_reqs > before ? 1 : 0;
        if (bad || got != want) snprintf(why, sizeof why, "after layer %d: %.0f bytes, want %.0f", l, got, want), bad = 1;
        else if (dp->groups - groups != want_groups || dp->in_group)
            snprintf(why, sizeof why, "after layer %d: %llu groups (%s), want %llu", l, (unsigned long long)(dp->groups - groups),
                     dp->in_group ? "one left open" : "closed", (unsigned long long)want_groups), bad = 1;
    }
    if (!bad && b.n_reqs != z->n_regions) snprintf(why, sizeof why, "%d collectives for %d regions", b.n_reqs, z->n_regions), bad = 1;
    bad |= dp_buckets_wait(&b, &e) != 0;
    const uint64_t groups = dp->groups;
    if (!bad && (dp_buckets_start_all(&b, g, &e) || b.n_reqs != z->n_regions || dp->groups != groups + 1))
        snprintf(why, sizeof why, "start_all: %d collectives in %llu groups for %d regions", b.n_reqs,
                 (unsigned long long)(dp->groups - groups), z->n_regions), bad = 1;
    bad |= dp_buckets_wait(&b, &e) != 0;
    snprintf(name, sizeof name, "zero_buckets_reduce_the_regions_%s", tag);
    tap_check(failed, name, !bad, why);
    dp_buckets_free(&b);
    comm_destroy(dp);
}

/* zero_shards_all_gather gathers every region, one all-gather each, all in
 * one group: the ring bytes of every region's, and one group ended. */
static void check_gather(const char *tag, gpt *g, zero_shards *z, int *failed) {
    comm *dp = comm_null_create("dp", 0, z->dp);
    comm_use_memory(dp, &g->ops->mem); /* the null backend holds no memory */
    tg_err e = {{0}};
    uint64_t want = 0;
    for (int r = 0; r < z->n_regions; r++) want += (uint64_t)(z->dp - 1) * (z->regions[r].len / (size_t)z->dp) * sizeof(float);
    const int rc = zero_shards_all_gather(z, dp, g->params, TG_F32, &e);
    char name[160], why[200];
    snprintf(why, sizeof why, "rc %d (%.80s), %llu bytes (want %llu), %llu groups (want 1)", rc, e.msg,
             (unsigned long long)dp->bytes_sent[COLL_ALL_GATHER], (unsigned long long)want, (unsigned long long)dp->groups);
    snprintf(name, sizeof name, "zero_gather_is_one_group_%s", tag);
    tap_check(failed, name, rc == 0 && dp->bytes_sent[COLL_ALL_GATHER] == want && dp->groups == 1 && !dp->in_group, why);
    comm_destroy(dp);
}

/* The staged gather over a modeled link (1 byte per second, no latency):
 * each stage's modeled seconds are its regions' ring bytes; the model of
 * the overlap hides nothing behind a forward pass of no length, and behind
 * a very long one all but stages 0 and 1 (the whole-model tensors and the
 * lowest bucket), which the pass needs at its start. */
static void check_staged_gather(const char *tag, gpt *g, zero_shards *z, int *failed) {
    comm *dp = comm_null_create_modeled("dp", 0, z->dp, comm_link_flat(1.0, 0.0));
    comm_use_memory(dp, &g->ops->mem);
    tg_err e = {{0}};
    double want[z->n_stages];
    memset(want, 0, sizeof want);
    for (int r = 0; r < z->n_regions; r++) /* whole numbers of bytes: the sums below are exact */
        want[z->region_stage[r]] += (double)(z->dp - 1) * (double)(z->regions[r].len / (size_t)z->dp) * sizeof(float);
    int rc = zero_shards_gather_begin(z, dp, g->params, TG_F32, &e);
    if (rc == 0) rc = zero_shards_gather_wait_stage(z, z->n_stages - 1, &e);
    int bad = -1;
    double total = 0;
    for (int s = 0; s < z->n_stages; s++) {
        if (z->stage_modeled_s[s] != want[s] && bad < 0) bad = s;
        total += want[s];
    }
    const double none = zero_shards_gather_hidden_s(z, 0.0), most = zero_shards_gather_hidden_s(z, 1e15);
    const double want_most = total - want[0] - want[1];
    char name[160], why[240];
    snprintf(why, sizeof why, "rc %d (%.60s), first stage off %d (%.9g s, want %.9g), hidden %.9g at no pass, %.9g (want %.9g) at a long one",
             rc, e.msg, bad, bad >= 0 ? z->stage_modeled_s[bad] : 0, bad >= 0 ? want[bad] : 0, none, most, want_most);
    snprintf(name, sizeof name, "zero_staged_gather_model_%s", tag);
    tap_check(failed, name, rc == 0 && bad < 0 && none == 0 && most == want_most && z->stages_done == z->n_stages, why);
    comm_destroy(dp);
}

/* unpack(every rank's pack(full)) == full on the regions. */
static void check_pack(const char *tag, const gpt *g, const zero_shards *z, int *failed) {
    float *full = malloc(g->n_params * sizeof(float)), *back = calloc(g->n_params, sizeof(float));
    float *gathered = malloc(g->n_params * sizeof(float));
    for (size_t i = 0; i < g->n_params; i++) full[i] = (float)i * 0.5f + 1.0f;
    for (int r = 0; r < z->dp; r++) zero_shards_pack(&z[r], &COMM_HOST_MEMORY, full, gathered + (size_t)r * z->shard_len);
    zero_shards_unpack(&z[0], gathered, back);
    char name[160];
    snprintf(name, sizeof name, "zero_pack_unpack_round_trip_%s", tag);
    tap_check(failed, name, memcmp(full, back, g->n_params * sizeof(float)) == 0, "the unpacked moments differ");
    free(full);
    free(back);
    free(gathered);
}

static void run_case(const layout_case *lc, int *failed) {
    char tag[96];
    snprintf(tag, sizeof tag, "L%d_dp%d_bucket%d_tp%d_rank%d", lc->L, lc->dp, lc->layers_per_bucket, lc->tp, lc->tp_rank);
    tg_ops *ops = ops_null_create(TG_F32);
    comm *tp = comm_null_create("tp", lc->tp_rank, lc->tp);
    comm_use_memory(tp, &ops->mem);
    gpt *g = model_of(lc, ops, tp);
    zero_shards *z = calloc((size_t)lc->dp, sizeof *z);
    for (int r = 0; r < lc->dp; r++) zero_shards_init(&z[r], g, lc->dp, r, lc->layers_per_bucket);
    check_regions(tag, g, z, failed);
    check_spans(tag, g, z, failed);
    check_buckets(tag, g, z, failed);
    check_gather(tag, g, z, failed);
    check_staged_gather(tag, g, z, failed);
    check_pack(tag, g, z, failed);
    for (int r = 0; r < lc->dp; r++) zero_shards_free(&z[r]);
    free(z);
    gpt_free(g);
    comm_destroy(tp);
    ops_destroy(ops);
}

int main(void) {
    const layout_case cases[] = {
        {3, 3, 2, 1, 0}, /* dp 3: strides a multiple of 24; lowest bucket 1 layer, then one of 2 */
        {2, 2, 1, 2, 1}, /* TP rank 1 of 2, a bucket per layer */
        {4, 4, 4, 1, 0}, /* one bucket of every layer */
        {5, 2, 3, 1, 0}, /* lowest bucket 2 layers, then 3 */
        {1, 5, 1, 1, 0}, /* dp 5, one layer */
        {6, 6, 4, 2, 0}, /* dp 6, lowest 2 then 4 */
    };
    int failed = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i], &failed);
    return failed;
}
