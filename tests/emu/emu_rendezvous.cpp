/* The ranks of an emulated NCCL communicator meet in a folder (the rules
 * are in emu_rendezvous.h). Files in it:
 *   join.R    rank R came; it holds R's device number
 *   c.N.R     rank R's contribution number N; R removes it at its
 *             contribution N+1, once every rank has posted N+1 (each has
 *             then read N), or when it leaves
 *   bye.R     rank R has made its last exchange
 *   gone.R    rank R (not 0) removed its files; rank 0 then removes the rest
 * Every file is written under a ".part" name and renamed, so a reader never
 * sees half of one. */
#include "emu_rendezvous.h"

#include <functional>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "emu_internal.h"

namespace {

double timeout_s() {
    const char *v = getenv("EMU_NCCL_TIMEOUT_S");
    const double t = v ? atof(v) : 0.0;
    return t > 0 ? t : 120.0;
}

std::string file_of(const emu_rendezvous *r, const char *kind, int rank) {
    return r->dir + "/" + kind + "." + std::to_string(rank);
}

std::string contribution_of(const emu_rendezvous *r, uint64_t n, int rank) {
    return r->dir + "/c." + std::to_string(n) + "." + std::to_string(rank);
}

bool write_whole(const std::string &path, const void *p, size_t bytes, std::string *why) {
    const std::string part = path + ".part";
    FILE *f = fopen(part.c_str(), "wb");
    bool ok = f && (bytes == 0 || fwrite(p, 1, bytes, f) == bytes);
    if (f && fclose(f) != 0) ok = false;
    if (ok && rename(part.c_str(), path.c_str()) != 0) ok = false;
    if (!ok) *why = "cannot write " + path + ": " + strerror(errno);
    return ok;
}

bool read_whole(const std::string &path, std::vector<char> *out, std::string *why) {
    FILE *f = fopen(path.c_str(), "rb");
    struct stat st;
    bool ok = f && fstat(fileno(f), &st) == 0;
    if (ok) {
        out->resize((size_t)st.st_size);
        ok = out->empty() || fread(out->data(), 1, out->size(), f) == out->size();
    }
    if (f) fclose(f);
    if (!ok) *why = "cannot read " + path + ": " + strerror(errno);
    return ok;
}

/* Waits until path exists; false once `deadline` has passed. Polls every
 * 100 us at first, then every 2 ms. */
bool await(const std::string &path, double deadline) {
    const double t0 = emu_now_s();
    for (;;) {
        if (access(path.c_str(), F_OK) == 0) return true;
        const double t = emu_now_s();
        if (t >= deadline) return false;
        struct timespec nap = {0, t - t0 < 0.01 ? 100000L : 2000000L};
        nanosleep(&nap, nullptr);
    }
}

/* Waits for every rank's file (path_of(rank)); why names the first missing. */
bool await_all(const emu_rendezvous *r, const std::function<std::string(int)> &path_of, const std::string &waiting_for,
               double deadline, std::string *why) {
    for (int k = 0; k < r->nranks; k++)
        if (!await(path_of(k), deadline)) {
            *why = "rank " + std::to_string(k) + " of " + std::to_string(r->nranks) + " did not come " + waiting_for +
                   " within " + std::to_string((int)timeout_s()) + " s (EMU_NCCL_TIMEOUT_S) in " + r->dir;
            return false;
        }
    return true;
}

/* The same for `kind`.R. */
bool await_all(const emu_rendezvous *r, const char *kind, const char *waiting_for, double deadline, std::string *why) {
    return await_all(r, [r, kind](int k) { return file_of(r, kind, k); }, waiting_for, deadline, why);
}

} // namespace

std::string emu_rendezvous_name(std::string *why) {
    const char *tmp = getenv("TMPDIR");
    std::string base = tmp && *tmp ? tmp : "/tmp";
    char token[64];
    unsigned seed = 0;
    FILE *f = fopen("/dev/urandom", "rb");
    if (!f || fread(&seed, sizeof seed, 1, f) != 1) seed = (unsigned)getpid() ^ (unsigned)(emu_now_s() * 1e6);
    if (f) fclose(f);
    snprintf(token, sizeof token, "/emu_nccl.%d.%08x", (int)getpid(), seed);
    std::string name = base + token;
    if (name.size() >= 128) { /* NCCL_UNIQUE_ID_BYTES, with its terminating zero */
        *why = "the rendezvous folder's name " + name + " is longer than a unique id holds (set TMPDIR shorter)";
        return "";
    }
    return name;
}

bool emu_rendezvous_join(emu_rendezvous *r, const std::string &dir, int nranks, int rank, int device, std::string *why) {
    r->dir = dir;
    r->nranks = nranks;
    r->rank = rank;
    r->exchanged = 0;
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
        *why = "cannot make the rendezvous folder " + dir + ": " + strerror(errno);
        return false;
    }
    const std::string mine = std::to_string(device);
    if (!write_whole(file_of(r, "join", rank), mine.data(), mine.size(), why)) return false;
    if (!await_all(r, "join", "to the communicator's creation", emu_now_s() + timeout_s(), why)) return false;
    std::vector<char> seen;
    for (int k = 0; k < nranks; k++) {
        if (k == rank) continue;
        if (!read_whole(file_of(r, "join", k), &seen, why)) return false;
        if (std::string(seen.begin(), seen.end()) == mine) {
            *why = "Duplicate GPU detected: rank " + std::to_string(rank) + " and rank " + std::to_string(k) +
                   " both on CUDA device " + mine;
            return false;
        }
    }
    return true;
}

uint64_t emu_rendezvous_post(emu_rendezvous *r, const void *mine, size_t bytes, std::string *why) {
    const uint64_t n = r->exchanged++;
    return write_whole(contribution_of(r, n, r->rank), mine, bytes, why) ? n : UINT64_MAX;
}

int emu_rendezvous_collect(emu_rendezvous *r, uint64_t n, std::vector<std::vector<char>> *all, std::string *why) {
    for (int k = 0; k < r->nranks; k++)
        if (access(contribution_of(r, n, k).c_str(), F_OK) != 0) return 0;
    all->assign((size_t)r->nranks, std::vector<char>());
    for (int k = 0; k < r->nranks; k++)
        if (!read_whole(contribution_of(r, n, k), &(*all)[(size_t)k], why)) return -1;
    /* every rank has posted n, so each has read all of n - 1 */
    if (n > 0) unlink(contribution_of(r, n - 1, r->rank).c_str());
    return 1;
}

bool emu_rendezvous_exchange(emu_rendezvous *r, const void *mine, size_t bytes, std::vector<std::vector<char>> *all,
                             std::string *why) {
    const uint64_t n = emu_rendezvous_post(r, mine, bytes, why);
    if (n == UINT64_MAX) return false;
    const auto path_of = [r, n](int k) { return contribution_of(r, n, k); };
    if (!await_all(r, path_of, "to collective #" + std::to_string(n), emu_now_s() + timeout_s(), why)) return false;
    return emu_rendezvous_collect(r, n, all, why) == 1;
}

void emu_rendezvous_leave(emu_rendezvous *r, bool orderly) {
    if (!orderly || r->dir.empty()) return;
    std::string why;
    const double deadline = emu_now_s() + (timeout_s() < 30 ? timeout_s() : 30);
    if (!write_whole(file_of(r, "bye", r->rank), "", 0, &why) || !await_all(r, "bye", "to leave", deadline, &why)) {
        fprintf(stderr, "emu: NCCL rendezvous: %s; leaving its files\n", why.c_str());
        return;
    }
    if (r->exchanged > 0) unlink(contribution_of(r, r->exchanged - 1, r->rank).c_str());
    unlink(file_of(r, "join", r->rank).c_str());
    if (r->rank != 0) {
        write_whole(file_of(r, "gone", r->rank), "", 0, &why);
        return;
    }
    for (int k = 1; k < r->nranks; k++)
        if (!await(file_of(r, "gone", k), deadline)) return;
    for (int k = 0; k < r->nranks; k++) {
        unlink(file_of(r, "bye", k).c_str());
        unlink(file_of(r, "gone", k).c_str());
    }
    rmdir(r->dir.c_str());
}
