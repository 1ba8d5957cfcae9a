/* The bootstrap's wire (parallel/bootstrap_io.h): framed messages over
 * non-blocking TCP sockets, every wait bounded by a deadline. */
#include "parallel/bootstrap_io.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

double bsio_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void bsio_sleep(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {}
}

int bsio_poll_ms(double deadline) {
    double left = deadline - bsio_now();
    if (left <= 0) return 0;
    return left > 1000.0 ? 1000000 : (int)(left * 1000.0) + 1;
}

/* Waits until fd is ready for `events` or the deadline passes. */
int bsio_wait_fd(int fd, short events, double deadline) {
    for (;;) {
        struct pollfd p = {fd, events, 0};
        int ms = bsio_poll_ms(deadline);
        if (ms == 0) return IO_TIMEOUT;
        int r = poll(&p, 1, ms);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return IO_ERROR;
        if (r > 0) return IO_OK; /* readable, writable, or hung up: the next call says which */
    }
}

static int send_all(int fd, const void *buf, size_t n, double deadline) {
    const char *p = buf;
    while (n > 0) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k > 0) {
            p += k;
            n -= (size_t)k;
            continue;
        }
        if (k < 0 && errno == EINTR) continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            int w = bsio_wait_fd(fd, POLLOUT, deadline);
            if (w != IO_OK) return w;
            continue;
        }
        return (errno == EPIPE || errno == ECONNRESET) ? IO_CLOSED : IO_ERROR;
    }
    return IO_OK;
}

/* One non-blocking read into buf[*got..n); IO_OK with *got advanced (maybe
 * not to n), IO_CLOSED at end of stream. */
int bsio_recv_some(int fd, void *buf, size_t n, size_t *got) {
    for (;;) {
        ssize_t k = recv(fd, (char *)buf + *got, n - *got, 0);
        if (k > 0) {
            *got += (size_t)k;
            return IO_OK;
        }
        if (k == 0) return IO_CLOSED;
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return IO_OK;
        return errno == ECONNRESET ? IO_CLOSED : IO_ERROR;
    }
}

int bsio_recv_all(int fd, void *buf, size_t n, double deadline) {
    size_t got = 0;
    while (got < n) {
        int w = bsio_wait_fd(fd, POLLIN, deadline);
        if (w != IO_OK) return w;
        int r = bsio_recv_some(fd, buf, n, &got);
        if (r != IO_OK) return r;
    }
    return IO_OK;
}

static void put_hdr(unsigned char *b, uint32_t type, uint64_t seq, uint64_t bytes) {
    uint32_t m = htobe32(BS_MAGIC), t = htobe32(type);
    uint64_t s = htobe64(seq), n = htobe64(bytes);
    memcpy(b, &m, 4);
    memcpy(b + 4, &t, 4);
    memcpy(b + 8, &s, 8);
    memcpy(b + 16, &n, 8);
}

frame_hdr bsio_get_hdr(const unsigned char *b) {
    frame_hdr h;
    memcpy(&h.magic, b, 4);
    memcpy(&h.type, b + 4, 4);
    memcpy(&h.seq, b + 8, 8);
    memcpy(&h.bytes, b + 16, 8);
    h.magic = be32toh(h.magic);
    h.type = be32toh(h.type);
    h.seq = be64toh(h.seq);
    h.bytes = be64toh(h.bytes);
    return h;
}

int bsio_send_frame(int fd, uint32_t type, uint64_t seq, const void *payload, size_t bytes, double deadline) {
    unsigned char h[HDR_BYTES];
    put_hdr(h, type, seq, bytes);
    int r = send_all(fd, h, sizeof h, deadline);
    return r == IO_OK && bytes ? send_all(fd, payload, bytes, deadline) : r;
}

const char *bsio_what(int r) {
    return r == IO_TIMEOUT ? "timed out" : r == IO_CLOSED ? "connection closed" : strerror(errno);
}

void bsio_socket_options(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}
