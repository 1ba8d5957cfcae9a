/* The bootstrap's wire: framed messages over non-blocking TCP sockets
 * (parallel/bootstrap.c), every wait bounded by a deadline on the
 * monotonic clock (bsio_now, seconds). */
#ifndef PARALLEL_BOOTSTRAP_IO_H
#define PARALLEL_BOOTSTRAP_IO_H

#include <stddef.h>
#include <stdint.h>

/* Every message is a frame: a fixed header in network byte order, then
 * `bytes` of payload. */
#define BS_MAGIC 0x54474253u /* "TGBS" */
enum { MSG_HELLO = 1, MSG_WELCOME, MSG_DATA, MSG_ERROR };
#define HDR_BYTES 24
typedef struct {
    uint32_t magic, type;
    uint64_t seq, bytes;
} frame_hdr;

/* What an I/O call ended with. */
enum { IO_OK, IO_TIMEOUT, IO_CLOSED, IO_ERROR };

double bsio_now(void);
void bsio_sleep(double s);
/* poll()'s timeout for a deadline: 0 once it has passed. */
int bsio_poll_ms(double deadline);
/* Waits until fd is ready for `events` or the deadline passes. */
int bsio_wait_fd(int fd, short events, double deadline);
/* One non-blocking read into buf[*got..n); IO_OK with *got advanced (maybe
 * not to n), IO_CLOSED at end of stream. */
int bsio_recv_some(int fd, void *buf, size_t n, size_t *got);
int bsio_recv_all(int fd, void *buf, size_t n, double deadline);
frame_hdr bsio_get_hdr(const unsigned char *b);
int bsio_send_frame(int fd, uint32_t type, uint64_t seq, const void *payload, size_t bytes, double deadline);
/* A failed call's cause, for a message. */
const char *bsio_what(int r);
/* TCP_NODELAY and O_NONBLOCK. */
void bsio_socket_options(int fd);

#endif
