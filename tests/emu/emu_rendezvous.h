/* Where the ranks of an emulated NCCL communicator meet (emu_rendezvous.cpp).
 * Each rank is its own process with its own emulated device, so they meet
 * in a folder named by the communicator's unique id: a collective's
 * contribution of each rank is a file, written whole (renamed into place),
 * and every rank reads every other's. A rank that never comes is an error
 * after EMU_NCCL_TIMEOUT_S seconds (default 120). Test infrastructure, not
 * for the code under test. */
#ifndef EMU_RENDEZVOUS_H
#define EMU_RENDEZVOUS_H

#include <stddef.h>
#include <stdint.h>

#include <string>
#include <vector>

struct emu_rendezvous {
    std::string dir;
    int nranks = 0, rank = 0;
    uint64_t exchanged = 0; /* contributions posted: the next one's number */
};

/* A fresh folder name under $TMPDIR (or /tmp), for a unique id; "" when it
 * cannot be made, why says so. */
std::string emu_rendezvous_name(std::string *why);

/* Joins the ranks meeting in dir (made here if no rank has yet), telling
 * them this rank's device; fails (why) when a rank does not come in time
 * or two ranks name the same device, as NCCL refuses two ranks on one GPU. */
bool emu_rendezvous_join(emu_rendezvous *r, const std::string &dir, int nranks, int rank, int device, std::string *why);

/* Posts this rank's bytes as contribution number r->exchanged and returns
 * every rank's, in rank order (all[rank] is mine), waiting for them up to
 * EMU_NCCL_TIMEOUT_S. Contributions are numbered in the order each rank
 * posts them, so the ranks must exchange in the same order, as NCCL's
 * collectives must be called. */
bool emu_rendezvous_exchange(emu_rendezvous *r, const void *mine, size_t bytes, std::vector<std::vector<char>> *all,
                             std::string *why);
/* The same in two steps that never wait: post returns the contribution's
 * number (UINT64_MAX on failure); collect gives every rank's contribution
 * number n once all are there (1), or 0 while one is missing, -1 on failure. */
uint64_t emu_rendezvous_post(emu_rendezvous *r, const void *mine, size_t bytes, std::string *why);
int emu_rendezvous_collect(emu_rendezvous *r, uint64_t n, std::vector<std::vector<char>> *all, std::string *why);

/* Leaves: after every rank has said it leaves (or a timeout), the last
 * files go and rank 0 removes the folder. `orderly` false (an abort) leaves
 * at once and removes nothing that peers may still read. */
void emu_rendezvous_leave(emu_rendezvous *r, bool orderly);

#endif
