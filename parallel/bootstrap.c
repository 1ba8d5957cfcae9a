#include "parallel/bootstrap.h"
#include "parallel/bootstrap_io.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define NODE_KEY 128 /* host name + boot id */
#define ERR_MAX 700  /* longest error text sent from rank 0 to its peers */
/* Peers wait this much longer than rank 0, so that when rank 0 gives up it
 * can still tell them why. */
#define PEER_GRACE_S 1.5

struct bootstrap {
    int rank, world;
    double timeout_s;
    int *fd;       /* rank 0: fd[r] for peer r (fd[0] unused); others: fd[0] is the link to rank 0 */
    uint64_t seq;  /* collectives done so far */
    int broken;    /* an earlier failure: every later call fails */
    char session[17];
    char (*node)[NODE_KEY];
};

/* ---- failure ---------------------------------------------------------- */

/* Rank 0 gave up: tell every peer still connected why (best effort, short
 * wait), then mark the bootstrap broken. Returns -1. */
static int fail_world(bootstrap *bs, tg_err *e) {
    bs->broken = 1;
    if (bs->rank != 0) return -1;
    size_t len = strnlen(e->msg, ERR_MAX);
    double deadline = bsio_now() + 0.5;
    for (int r = 1; r < bs->world; r++)
        if (bs->fd[r] >= 0) bsio_send_frame(bs->fd[r], MSG_ERROR, bs->seq, e->msg, len, deadline);
    return -1;
}

/* A peer read a frame of type MSG_ERROR from rank 0: its text becomes ours. */
static int peer_got_error(bootstrap *bs, const frame_hdr *h, const char *what, tg_err *e) {
    char msg[ERR_MAX + 1] = "";
    size_t n = h->bytes < ERR_MAX ? (size_t)h->bytes : ERR_MAX;
    if (bsio_recv_all(bs->fd[0], msg, n, bsio_now() + 1.0) == IO_OK)
        msg[n] = '\0';
    else
        snprintf(msg, sizeof msg, "(reason lost)");
    bs->broken = 1;
    return tg_fail(e, "%s: rank 0 gave up: %s", what, msg);
}

/* ---- rendezvous ------------------------------------------------------- */

static int hello_payload_ok(const unsigned char *p, int world, int *rank_out, int *world_out) {
    uint32_t r, w;
    memcpy(&r, p, 4);
    memcpy(&w, p + 4, 4);
    *rank_out = (int)be32toh(r);
    *world_out = (int)be32toh(w);
    return *world_out == world;
}

static void list_ranks(char *out, size_t cap, const int *missing, int world) {
    size_t len = 0;
    int shown = 0;
    out[0] = '\0';
    for (int r = 0; r < world && len < cap; r++) {
        if (!missing[r]) continue;
        if (shown == 16) {
            snprintf(out + len, cap - len, ", ...");
            return;
        }
        len += (size_t)snprintf(out + len, cap - len, "%s%d", shown ? ", " : "", r);
        shown++;
    }
}

/* A listening socket on address a, or -1 with *err set. An IPv6 socket
 * takes IPv4 peers too (as v4-mapped addresses). */
static int listen_on(const struct addrinfo *a, int backlog, int *err) {
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol), one = 1, zero = 0;
    if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one); /* only speeds up a restart */
    if (fd >= 0 && (a->ai_family != AF_INET6 || setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero) == 0) &&
        bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, backlog) == 0)
        return fd;
    *err = errno;
    if (fd >= 0) close(fd);
    return -1;
}

static int server_listen(const topology *t, tg_err *e) {
    char port[16];
    snprintf(port, sizeof port, "%d", t->master_port);
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    /* One node: exactly MASTER_ADDR (127.0.0.1 stays private). Several: every
     * interface, as MASTER_ADDR may resolve to a loopback alias on rank 0's
     * own host (Debian's 127.0.1.1 for the host name). */
    int multi_node = t->local_world < t->world;
    if (multi_node) hints.ai_flags = AI_PASSIVE;
    int g = getaddrinfo(multi_node ? NULL : t->master_addr, port, &hints, &res);
    if (g) return tg_fail(e, "bootstrap: cannot resolve MASTER_ADDR \"%s\": %s", t->master_addr, gai_strerror(g));
    /* Several nodes: IPv6's wildcard first (glibc lists 0.0.0.0 first, deaf to
     * peers told an IPv6 MASTER_ADDR), 0.0.0.0 where IPv6 is off. */
    int fd = -1, err = 0;
    for (int pass = 0; pass < 2 && fd < 0; pass++)
        for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next)
            if (!multi_node ? pass == 0 : (a->ai_family == AF_INET6) == (pass == 0)) fd = listen_on(a, t->world, &err);
    freeaddrinfo(res);
    if (fd < 0)
        return tg_fail(e, "bootstrap: rank 0 cannot listen on %s: %s%s", t->master_at, strerror(err),
                       err == EADDRINUSE    ? " (another job uses this MASTER_PORT? pick another one)"
                       : err == EADDRNOTAVAIL ? " (rank 0 must run on the host MASTER_ADDR names)"
                                              : "");
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    return fd;
}

static int server_accept_all(bootstrap *bs, const topology *t, int lfd, double deadline, tg_err *e) {
    int *missing = tg_calloc((size_t)bs->world, sizeof(int), "bootstrap rank table");
    for (int r = 1; r < bs->world; r++) missing[r] = 1;
    int left = bs->world - 1, rc = 0;
    while (left > 0) {
        int w = bsio_wait_fd(lfd, POLLIN, deadline);
        if (w == IO_TIMEOUT) {
            char list[256];
            list_ranks(list, sizeof list, missing, bs->world);
            rc = tg_fail(e, "bootstrap: timed out after %g s (parallel.timeout_s) waiting for rank%s %s to connect to %s",
                         bs->timeout_s, left > 1 ? "s" : "", list, t->master_at);
            break;
        }
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNABORTED) continue;
            rc = tg_fail(e, "bootstrap: accept on %s failed: %s", t->master_at, strerror(errno));
            break;
        }
        bsio_socket_options(fd);
        /* A connection that says nothing (not one of ours) may delay us a little, not forever. */
        double hello_deadline = bsio_now() + 5.0 < deadline ? bsio_now() + 5.0 : deadline;
        unsigned char buf[HDR_BYTES + 8];
        if (bsio_recv_all(fd, buf, sizeof buf, hello_deadline) != IO_OK) {
            close(fd);
            continue;
        }
        frame_hdr h = bsio_get_hdr(buf);
        int rank, world;
        if (h.magic != BS_MAGIC || h.type != MSG_HELLO || h.bytes != 8) {
            close(fd);
            continue;
        }
        if (!hello_payload_ok(buf + HDR_BYTES, bs->world, &rank, &world)) {
            close(fd);
            rc = tg_fail(e, "bootstrap: rank %d says the world size is %d but rank 0 has %d (same launcher settings on every "
                         "rank?)", rank, world, bs->world);
            break;
        }
        if (rank < 1 || rank >= bs->world || !missing[rank]) {
            close(fd);
            rc = tg_fail(e, "bootstrap: a second process announced itself as rank %d (two ranks with the same RANK?)", rank);
            break;
        }
        missing[rank] = 0;
        bs->fd[rank] = fd;
        left--;
    }
    free(missing);
    return rc;
}

static uint64_t random_session(void) {
    uint64_t v = 0;
    if (getrandom(&v, sizeof v, 0) != (ssize_t)sizeof v) v = 0;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    v ^= ((uint64_t)getpid() << 32) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20);
    return v;
}

static int server_create(bootstrap *bs, const topology *t, double deadline, tg_err *e) {
    int lfd = server_listen(t, e);
    if (lfd < 0) return -1;
    int rc = server_accept_all(bs, t, lfd, deadline, e);
    close(lfd);
    if (rc) return fail_world(bs, e);
    uint64_t session = random_session();
    snprintf(bs->session, sizeof bs->session, "%016llx", (unsigned long long)session);
    uint64_t wire = htobe64(session);
    for (int r = 1; r < bs->world; r++) {
        int s = bsio_send_frame(bs->fd[r], MSG_WELCOME, 0, &wire, sizeof wire, deadline);
        if (s != IO_OK) {
            tg_fail(e, "bootstrap: sending the session id to rank %d: %s", r, bsio_what(s));
            return fail_world(bs, e);
        }
    }
    return 0;
}

/* Connects to rank 0, retrying while it is not listening yet. */
static int client_connect(const topology *t, double timeout_s, double deadline, tg_err *e) {
    char port[16];
    snprintf(port, sizeof port, "%d", t->master_port);
    char last[TOPO_ADDR_MAX + 128] = "no attempt";
    for (;;) {
        struct addrinfo hints = {0}, *res = NULL;
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        int g = getaddrinfo(t->master_addr, port, &hints, &res);
        if (g) snprintf(last, sizeof last, "cannot resolve \"%s\": %s", t->master_addr, gai_strerror(g));
        for (struct addrinfo *a = g ? NULL : res; a; a = a->ai_next) {
            int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
            if (fd < 0) {
                snprintf(last, sizeof last, "socket: %s", strerror(errno));
                continue;
            }
            int c = connect(fd, a->ai_addr, a->ai_addrlen), err = c == 0 ? 0 : errno;
            if (c < 0 && errno == EINPROGRESS) {
                double d = bsio_now() + 2.0 < deadline ? bsio_now() + 2.0 : deadline;
                socklen_t len = sizeof err;
                if (bsio_wait_fd(fd, POLLOUT, d) != IO_OK) err = ETIMEDOUT;
                else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) err = errno;
            }
            if (err == 0) {
                freeaddrinfo(res);
                bsio_socket_options(fd);
                return fd;
            }
            snprintf(last, sizeof last, "%s", strerror(err));
            close(fd);
        }
        if (!g) freeaddrinfo(res);
        if (bsio_now() >= deadline) break;
        bsio_sleep(0.1);
        if (bsio_now() >= deadline) break;
    }
    return tg_fail(e, "bootstrap: rank %d could not connect to rank 0 at %s within %g s (parallel.timeout_s); last error: %s. "
                   "Is rank 0 running, with the same MASTER_ADDR and MASTER_PORT?", t->rank, t->master_at,
                   timeout_s, last);
}

static int client_create(bootstrap *bs, const topology *t, double deadline, tg_err *e) {
    int fd = client_connect(t, bs->timeout_s, deadline, e);
    if (fd < 0) return -1;
    bs->fd[0] = fd;
    unsigned char hello[8];
    uint32_t r = htobe32((uint32_t)t->rank), w = htobe32((uint32_t)t->world);
    memcpy(hello, &r, 4);
    memcpy(hello + 4, &w, 4);
    int s = bsio_send_frame(fd, MSG_HELLO, 0, hello, sizeof hello, deadline);
    if (s != IO_OK) return tg_fail(e, "bootstrap: rank %d announcing itself to rank 0: %s", t->rank, bsio_what(s));
    unsigned char h[HDR_BYTES];
    s = bsio_recv_all(fd, h, sizeof h, deadline + PEER_GRACE_S);
    if (s == IO_TIMEOUT)
        return tg_fail(e, "bootstrap: rank %d timed out after %g s (parallel.timeout_s) waiting for rank 0 to gather all %d ranks",
                       t->rank, bs->timeout_s, t->world);
    if (s != IO_OK) return tg_fail(e, "bootstrap: rank %d waiting for rank 0 to gather all ranks: %s (rank 0 exited?)", t->rank,
                                   bsio_what(s));
    frame_hdr hd = bsio_get_hdr(h);
    if (hd.magic == BS_MAGIC && hd.type == MSG_ERROR) return peer_got_error(bs, &hd, "bootstrap", e);
    uint64_t wire;
    if (hd.magic != BS_MAGIC || hd.type != MSG_WELCOME || hd.bytes != sizeof wire ||
        bsio_recv_all(fd, &wire, sizeof wire, deadline + PEER_GRACE_S) != IO_OK)
        return tg_fail(e, "bootstrap: rank %d got a malformed reply from %s (is that port another program's?)", t->rank,
                       t->master_at);
    snprintf(bs->session, sizeof bs->session, "%016llx", (unsigned long long)be64toh(wire));
    return 0;
}

static void node_key(char key[NODE_KEY]) {
    char host[64] = "", boot[40] = "";
    gethostname(host, sizeof host - 1);
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        if (!fgets(boot, sizeof boot, f)) boot[0] = '\0';
        fclose(f);
        boot[strcspn(boot, "\n")] = '\0';
    }
    memset(key, 0, NODE_KEY);
    snprintf(key, NODE_KEY, "%s/%s", host, boot);
}

bootstrap *bootstrap_create(const topology *t, double timeout_s, tg_err *e) {
    if (!(timeout_s > 0)) {
        tg_fail(e, "bootstrap: parallel.timeout_s must be positive (got %g)", timeout_s);
        return NULL;
    }
    bootstrap *bs = tg_calloc(1, sizeof *bs, "bootstrap");
    bs->rank = t->rank;
    bs->world = t->world;
    bs->timeout_s = timeout_s;
    bs->fd = tg_malloc((size_t)t->world * sizeof(int), "bootstrap sockets");
    for (int r = 0; r < t->world; r++) bs->fd[r] = -1;
    bs->node = tg_calloc((size_t)t->world, NODE_KEY, "bootstrap node table");
    double deadline = bsio_now() + timeout_s;
    int rc = 0;
    if (t->world == 1)
        snprintf(bs->session, sizeof bs->session, "%016llx", (unsigned long long)random_session());
    else
        rc = t->rank == 0 ? server_create(bs, t, deadline, e) : client_create(bs, t, deadline, e);
    char key[NODE_KEY];
    node_key(key);
    if (!rc) rc = bootstrap_allgather(bs, key, NODE_KEY, bs->node, e);
    if (rc) {
        bootstrap_destroy(bs);
        return NULL;
    }
    return bs;
}

/* ---- collectives ------------------------------------------------------ */

/* How long a collective waits, the config key that says so (for the
 * message when it gives up), and how much longer the other ranks wait for
 * rank 0's reply, so that rank 0's report of a missing rank reaches them
 * before their own timeout. */
typedef struct bs_wait {
    double timeout_s;
    const char *key;
    double grace_s;
} bs_wait;

/* Rank 0: receives one DATA frame of `bytes` from every peer into all[r],
 * all at once, so that a peer that hangs up is noticed whatever the order. */
static int server_gather(bootstrap *bs, const char *what, size_t bytes, unsigned char *all, double deadline, const bs_wait *w,
                         tg_err *e) {
    int n = bs->world;
    size_t *got = tg_calloc((size_t)n, sizeof(size_t), "bootstrap progress");
    unsigned char(*hdr)[HDR_BYTES] = tg_calloc((size_t)n, HDR_BYTES, "bootstrap headers");
    int *missing = tg_calloc((size_t)n, sizeof(int), "bootstrap rank table");
    struct pollfd *pf = tg_calloc((size_t)n, sizeof *pf, "bootstrap poll set");
    int *who = tg_calloc((size_t)n, sizeof(int), "bootstrap poll ranks");
    int left = n - 1, rc = 0;
    for (int r = 1; r < n; r++) missing[r] = 1;
    while (left > 0 && !rc) {
        int np = 0;
        for (int r = 1; r < n; r++)
            if (missing[r]) {
                pf[np] = (struct pollfd){bs->fd[r], POLLIN, 0};
                who[np++] = r;
            }
        int ms = bsio_poll_ms(deadline);
        int k = ms ? poll(pf, (nfds_t)np, ms) : 0;
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) {
            rc = tg_fail(e, "%s: poll failed: %s", what, strerror(errno));
            break;
        }
        if (k == 0) {
            char list[256];
            list_ranks(list, sizeof list, missing, n);
            rc = tg_fail(e, "%s: timed out after %g s (%s) waiting for rank%s %s", what, w->timeout_s, w->key,
                         left > 1 ? "s" : "", list);
            break;
        }
        for (int i = 0; i < np && !rc; i++) {
            if (!pf[i].revents) continue;
            int r = who[i];
            int s;
            if (got[r] < HDR_BYTES) {
                s = bsio_recv_some(bs->fd[r], hdr[r], HDR_BYTES, &got[r]);
                if (s == IO_OK && got[r] == HDR_BYTES) {
                    frame_hdr h = bsio_get_hdr(hdr[r]);
                    if (h.magic != BS_MAGIC || h.type != MSG_DATA || h.seq != bs->seq)
                        rc = tg_fail(e, "%s: rank %d sent an unexpected message (collective #%llu, expected #%llu): the ranks "
                                     "called different bootstrap collectives", what, r, (unsigned long long)h.seq,
                                     (unsigned long long)bs->seq);
                    else if (h.bytes != bytes)
                        rc = tg_fail(e, "%s: rank %d contributed %llu bytes, rank 0 %zu", what, r, (unsigned long long)h.bytes,
                                     bytes);
                }
            } else {
                size_t off = got[r] - HDR_BYTES;
                s = bsio_recv_some(bs->fd[r], all + (size_t)r * bytes, bytes, &off);
                got[r] = off + HDR_BYTES;
            }
            if (!rc && s == IO_CLOSED)
                rc = tg_fail(e, "%s: rank %d closed its bootstrap connection (it exited or was killed)", what, r);
            else if (!rc && s != IO_OK)
                rc = tg_fail(e, "%s: reading from rank %d: %s", what, r, strerror(errno));
            if (!rc && got[r] == HDR_BYTES + bytes) {
                missing[r] = 0;
                left--;
            }
        }
    }
    free(got);
    free(hdr);
    free(missing);
    free(pf);
    free(who);
    return rc;
}

static int allgather_within(bootstrap *bs, const void *mine, size_t bytes, void *all, const bs_wait *w, tg_err *e) {
    char what[96];
    snprintf(what, sizeof what, "bootstrap allgather #%llu (rank %d)", (unsigned long long)bs->seq, bs->rank);
    if (bs->broken) return tg_fail(e, "%s: the bootstrap is broken by an earlier failure", what);
    unsigned char *out = all;
    if (bytes) memmove(out + (size_t)bs->rank * bytes, mine, bytes);
    if (bs->world == 1) return 0;
    double deadline = bsio_now() + w->timeout_s;
    if (bs->rank == 0) {
        if (server_gather(bs, what, bytes, out, deadline, w, e)) return fail_world(bs, e);
        size_t total = (size_t)bs->world * bytes;
        for (int r = 1; r < bs->world; r++) {
            int s = bsio_send_frame(bs->fd[r], MSG_DATA, bs->seq, out, total, deadline);
            if (s != IO_OK) {
                tg_fail(e, "%s: sending to rank %d: %s", what, r, s == IO_CLOSED ? "rank closed its connection (it exited?)"
                                                                                 : bsio_what(s));
                return fail_world(bs, e);
            }
        }
        bs->seq++;
        return 0;
    }
    int fd = bs->fd[0];
    int s = bsio_send_frame(fd, MSG_DATA, bs->seq, mine, bytes, deadline);
    if (s == IO_CLOSED) { /* rank 0 may have said why before closing */
        unsigned char h[HDR_BYTES];
        if (bsio_recv_all(fd, h, sizeof h, bsio_now() + 0.2) == IO_OK) {
            frame_hdr hd = bsio_get_hdr(h);
            if (hd.magic == BS_MAGIC && hd.type == MSG_ERROR) return peer_got_error(bs, &hd, what, e);
        }
    }
    if (s == IO_OK) {
        unsigned char h[HDR_BYTES];
        s = bsio_recv_all(fd, h, sizeof h, deadline + w->grace_s);
        if (s == IO_OK) {
            frame_hdr hd = bsio_get_hdr(h);
            if (hd.magic == BS_MAGIC && hd.type == MSG_ERROR) return peer_got_error(bs, &hd, what, e);
            if (hd.magic != BS_MAGIC || hd.type != MSG_DATA || hd.seq != bs->seq || hd.bytes != (uint64_t)bs->world * bytes) {
                bs->broken = 1;
                return tg_fail(e, "%s: unexpected reply from rank 0 (the ranks called different bootstrap collectives)", what);
            }
            s = bsio_recv_all(fd, out, (size_t)bs->world * bytes, deadline + w->grace_s);
        }
    }
    if (s != IO_OK) {
        bs->broken = 1;
        if (s == IO_TIMEOUT) return tg_fail(e, "%s: timed out after %g s (%s) waiting for rank 0", what, w->timeout_s, w->key);
        if (s == IO_CLOSED) return tg_fail(e, "%s: rank 0 closed its bootstrap connection (it exited or was killed)", what);
        return tg_fail(e, "%s: talking to rank 0: %s", what, strerror(errno));
    }
    bs->seq++;
    return 0;
}

int bootstrap_allgather(bootstrap *bs, const void *mine, size_t bytes, void *all, tg_err *e) {
    const bs_wait w = {bs->timeout_s, "parallel.timeout_s", PEER_GRACE_S};
    return allgather_within(bs, mine, bytes, all, &w, e);
}

int bootstrap_barrier(bootstrap *bs, tg_err *e) {
    unsigned char none = 0;
    return bootstrap_allgather(bs, &none, 0, &none, e);
}

int bootstrap_barrier_within(bootstrap *bs, double timeout_s, const char *key, tg_err *e) {
    unsigned char none = 0;
    const bs_wait w = {timeout_s, key, 0.0};
    return allgather_within(bs, &none, 0, &none, &w, e);
}

int bootstrap_rank(const bootstrap *bs) { return bs->rank; }
int bootstrap_world(const bootstrap *bs) { return bs->world; }
double bootstrap_timeout(const bootstrap *bs) { return bs->timeout_s; }
const char *bootstrap_session(const bootstrap *bs) { return bs->session; }

int bootstrap_same_node(const bootstrap *bs, int a, int b) {
    if (a < 0 || b < 0 || a >= bs->world || b >= bs->world) return 0;
    return strncmp(bs->node[a], bs->node[b], NODE_KEY) == 0;
}

void bootstrap_destroy(bootstrap *bs) {
    if (!bs) return;
    for (int r = 0; r < bs->world; r++)
        if (bs->fd[r] >= 0) close(bs->fd[r]);
    free(bs->fd);
    free(bs->node);
    free(bs);
}
