/* File digests for checkpoints: XXH3 128-bit (Debian's libxxhash), written
 * as 32 lowercase hex digits. Fast enough to hash a model as it is written
 * and again when it is loaded; it detects damage (bit rot, a torn copy, a
 * hand edit), it is not a defence against a forger. */
#ifndef UTIL_DIGEST_H
#define UTIL_DIGEST_H

#include <stddef.h>

#include "util/err.h"

#define DIGEST_HEX_LEN 33 /* 32 digits and the NUL */

/* A running digest of a byte stream, in the order the bytes are given. */
typedef struct digest_stream digest_stream;
digest_stream *digest_begin(void);
void digest_update(digest_stream *d, const void *data, size_t len);
/* The stream's digest and byte count so far (the stream stays usable). */
void digest_hex(const digest_stream *d, char hex[DIGEST_HEX_LEN], long long *bytes);
void digest_end(digest_stream *d);

/* The digest of bytes held in memory. */
void digest_bytes(const void *data, size_t len, char hex[DIGEST_HEX_LEN]);

/* The digest and size of a regular file, read in blocks; errors name the path. */
int digest_file(const char *path, char hex[DIGEST_HEX_LEN], long long *bytes, tg_err *e);

#endif
