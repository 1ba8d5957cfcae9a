/* Collectives of an emulated NCCL communicator whose ranks are processes
 * (the rules are in emu_nccl.cpp): each rank's input goes through the
 * rendezvous folder (emu_rendezvous.h), and each rank computes its own
 * result from all of them, reductions in rank order. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <memory>
#include <string>
#include <vector>

#include "emu_internal.h"
#include "emu_nccl_internal.h"

size_t emu_nccl_type_bytes(ncclDataType_t t) {
    switch (t) {
    case ncclInt8:
    case ncclUint8: return 1;
    case ncclBfloat16: return 2;
    case ncclInt32:
    case ncclFloat: return 4;
    }
    return 0;
}

size_t emu_nccl_send_bytes(const collective &c) {
    const size_t b = c.count * emu_nccl_type_bytes(c.type);
    if (c.kind == REDUCE_SCATTER) return b * (size_t)c.comm->nranks;
    if (c.kind == BROADCAST && c.comm->rank != c.root) return 0;
    return b;
}
size_t emu_nccl_recv_bytes(const collective &c) {
    const size_t b = c.count * emu_nccl_type_bytes(c.type);
    return c.kind == ALL_GATHER ? b * (size_t)c.comm->nranks : b;
}

namespace {

float bf16_to_f32(uint16_t h) {
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

uint16_t f32_to_bf16(float f) { /* round to nearest even; a NaN stays a (quiet) NaN */
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

float element(const std::vector<char> &v, size_t i, ncclDataType_t t) {
    if (t == ncclBfloat16) {
        uint16_t h;
        memcpy(&h, v.data() + 2 * i, 2);
        return bf16_to_f32(h);
    }
    float f;
    memcpy(&f, v.data() + 4 * i, 4);
    return f;
}

void set_element(void *dst, size_t i, ncclDataType_t t, float x) {
    if (t == ncclBfloat16) {
        const uint16_t h = f32_to_bf16(x);
        memcpy((char *)dst + 2 * i, &h, 2);
    } else {
        memcpy((char *)dst + 4 * i, &x, 4);
    }
}

/* dst[i] = in[0][first + i] op in[1][first + i] op ... in rank order,
 * accumulated in float32 and rounded once. */
void reduce_into(void *dst, const std::vector<std::vector<char>> &in, size_t first, size_t count, ncclDataType_t t,
                 ncclRedOp_t op) {
    for (size_t i = 0; i < count; i++) {
        float acc = element(in[0], first + i, t);
        for (size_t r = 1; r < in.size(); r++) {
            const float x = element(in[r], first + i, t);
            acc = op == ncclSum ? acc + x : fmaxf(acc, x);
        }
        set_element(dst, i, t, acc);
    }
}

/* EMU_NCCL_DELAY_MS: how long each collective of several ranks lasts at
 * least on its stream (tests of its timing: tests/test_nccl.c). */
void delay_if_asked() {
    static const double ms = getenv("EMU_NCCL_DELAY_MS") ? atof(getenv("EMU_NCCL_DELAY_MS")) : 0.0;
    if (ms <= 0) return;
    const struct timespec ts = {(time_t)(ms / 1e3), (long)(fmod(ms, 1e3) * 1e6)};
    nanosleep(&ts, NULL);
}

/* This rank's result of a collective from every rank's input. */
void write_result(const collective &c, const std::vector<std::vector<char>> &all) {
    delay_if_asked();
    const size_t bytes = c.count * emu_nccl_type_bytes(c.type);
    switch (c.kind) {
    case ALL_REDUCE: reduce_into(c.dst, all, 0, c.count, c.type, c.op); break;
    case REDUCE_SCATTER: reduce_into(c.dst, all, (size_t)c.comm->rank * c.count, c.count, c.type, c.op); break;
    case ALL_GATHER:
        for (size_t r = 0; r < all.size(); r++) memcpy((char *)c.dst + r * bytes, all[r].data(), bytes);
        break;
    case BROADCAST: memcpy(c.dst, all[(size_t)c.root].data(), bytes); break;
    }
}

/* A collective that failed on the stream: the communicator reports it
 * (ncclCommGetAsyncError), the output is left as it was. */
void fail_among_ranks(const collective &c, const std::string &why) {
    snprintf(c.comm->last, sizeof c.comm->last, "%s (emulated): %s", c.call, why.c_str());
    fprintf(stderr, "emu: NCCL rank %d: %s\n", c.comm->rank, c.comm->last);
    c.comm->async_error = ncclRemoteError;
}

/* A collective of several ranks on the eager device, run at once: it waits
 * here for its peers (up to EMU_NCCL_TIMEOUT_S). */
void run_among_ranks(const collective &c) {
    if (c.comm->aborted || c.comm->async_error != ncclSuccess) return;
    std::vector<std::vector<char>> all; /* the input is in its file before the result is written */
    std::string why;
    if (emu_rendezvous_exchange(&c.comm->meet, c.src, emu_nccl_send_bytes(c), &all, &why)) write_result(c, all);
    else fail_among_ranks(c, why);
}

/* The same on the lazy device, one attempt at a time: the first posts the
 * input as the stream reaches it; each returns false (the stream stalls, as
 * a GPU's waits inside the collective) until every peer's is there. An
 * abort ends it. */
struct attempt_state {
    bool posted = false;
    uint64_t n = 0;
};
bool attempt_among_ranks(const collective &c, attempt_state *st) {
    if (c.comm->aborted || c.comm->async_error != ncclSuccess) return true;
    std::string why;
    if (!st->posted) {
        st->n = emu_rendezvous_post(&c.comm->meet, c.src, emu_nccl_send_bytes(c), &why);
        st->posted = true;
        if (st->n == UINT64_MAX) {
            fail_among_ranks(c, why);
            return true;
        }
    }
    std::vector<std::vector<char>> all;
    const int got = emu_rendezvous_collect(&c.comm->meet, st->n, &all, &why);
    if (got == 0) return false;
    if (got < 0) fail_among_ranks(c, why);
    else write_result(c, all);
    return true;
}

} // namespace

void emu_nccl_capture_among_ranks(const collective &c) {
    auto st = std::make_shared<attempt_state>();
    emu::capture_attempt_node([c, st](bool may_stall) {
        if (!may_stall) {
            run_among_ranks(c);
            return true;
        }
        if (!attempt_among_ranks(c, st.get())) return false;
        *st = attempt_state{}; /* the next launch posts anew */
        return true;
    });
}

void emu_nccl_among_ranks(const collective &c) {
    auto st = std::make_shared<attempt_state>();
    if (!emu_lazy_take_until(c.stream, [c, st] { return attempt_among_ranks(c, st.get()); })) run_among_ranks(c);
}

/* Joins the other ranks of a new communicator (nranks > 1). */
ncclResult_t emu_nccl_meet(ncclComm_t comm, const ncclUniqueId &id, char *last, size_t cap) {
    char dir[NCCL_UNIQUE_ID_BYTES + 1] = {0};
    memcpy(dir, id.internal, NCCL_UNIQUE_ID_BYTES);
    if (strncmp(dir, "emu-nccl:", 9) != 0) {
        snprintf(last, cap, "the unique id was not made by ncclGetUniqueId");
        return ncclInvalidArgument;
    }
    int device = 0;
    cudaGetDevice(&device);
    std::string why;
    if (!emu_rendezvous_join(&comm->meet, dir + 9, comm->nranks, comm->rank, device, &why)) {
        snprintf(last, cap, "%s", why.c_str());
        return why.rfind("Duplicate GPU", 0) == 0 ? ncclInvalidUsage : ncclRemoteError;
    }
    return ncclSuccess;
}

