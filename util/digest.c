#include "util/digest.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

struct digest_stream {
    XXH3_state_t *state;
    long long bytes;
};

static void to_hex(XXH128_hash_t h, char hex[DIGEST_HEX_LEN]) {
    /* XXH128's canonical form: the high half first, as xxhsum -H2 prints it. */
    snprintf(hex, DIGEST_HEX_LEN, "%016llx%016llx", (unsigned long long)h.high64, (unsigned long long)h.low64);
}

digest_stream *digest_begin(void) {
    digest_stream *d = tg_calloc(1, sizeof *d, "digest");
    d->state = XXH3_createState();
    if (!d->state || XXH3_128bits_reset(d->state) != XXH_OK) {
        fprintf(stderr, "fatal: cannot start an XXH3 digest (out of memory)\n");
        abort();
    }
    return d;
}

void digest_update(digest_stream *d, const void *data, size_t len) {
    XXH3_128bits_update(d->state, data, len); /* fails only on a NULL state, excluded by digest_begin */
    d->bytes += (long long)len;
}

void digest_hex(const digest_stream *d, char hex[DIGEST_HEX_LEN], long long *bytes) {
    to_hex(XXH3_128bits_digest(d->state), hex);
    if (bytes) *bytes = d->bytes;
}

void digest_end(digest_stream *d) {
    if (!d) return;
    XXH3_freeState(d->state);
    free(d);
}

void digest_bytes(const void *data, size_t len, char hex[DIGEST_HEX_LEN]) { to_hex(XXH3_128bits(data, len), hex); }

int digest_file(const char *path, char hex[DIGEST_HEX_LEN], long long *bytes, tg_err *e) {
    /* Without blocking: a FIFO in the file's place must not hang the check. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return tg_fail(e, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return tg_fail(e, "%s: is not a regular file", path);
    }
    enum { BLOCK = 1 << 20 };
    char *buf = tg_malloc(BLOCK, "digest buffer");
    digest_stream *d = digest_begin();
    ssize_t n;
    while ((n = read(fd, buf, BLOCK)) > 0 || (n < 0 && errno == EINTR))
        if (n > 0) digest_update(d, buf, (size_t)n);
    const int read_errno = n < 0 ? errno : 0;
    digest_hex(d, hex, bytes);
    digest_end(d);
    free(buf);
    close(fd);
    return read_errno ? tg_fail(e, "%s: cannot read: %s", path, strerror(read_errno)) : 0;
}
