#include "util/fs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* One component: created, or already a directory. */
static int mkdir_one(const char *dir, tg_err *e) {
    if (mkdir(dir, 0755) == 0) return 0;
    const int err = errno;
    struct stat st;
    if (err == EEXIST && stat(dir, &st) == 0 && S_ISDIR(st.st_mode)) return 0;
    if (err == EEXIST) return tg_fail(e, "%s: exists and is not a directory", dir);
    return tg_fail(e, "%s: cannot create directory: %s", dir, strerror(err));
}

int fs_mkdir_p(const char *path, tg_err *e) {
    if (!path || !path[0]) return tg_fail(e, "cannot create a directory with an empty name");
    char *tmp = tg_malloc(strlen(path) + 1, "directory path");
    strcpy(tmp, path);
    int rc = 0;
    /* Each prefix ending before a '/' (skipping the root and repeated
     * slashes), then the whole path. */
    for (char *p = tmp + 1; rc == 0 && *p; p++) {
        if (*p != '/' || p[-1] == '/') continue;
        *p = '\0';
        rc = mkdir_one(tmp, e);
        *p = '/';
    }
    if (rc == 0) rc = mkdir_one(tmp, e);
    free(tmp);
    return rc;
}

int fs_write_atomic(const char *path, const char *text, size_t len, tg_err *e) {
    const size_t n = strlen(path) + 5;
    char *tmp = tg_malloc(n, "temporary path");
    snprintf(tmp, n, "%s.tmp", path);
    int rc = 0;
    FILE *f = fopen(tmp, "wb");
    if (!f) rc = tg_fail(e, "%s: cannot create: %s", tmp, strerror(errno));
    if (rc == 0) {
        const int ok = fwrite(text, 1, len, f) == len && fflush(f) == 0 && fsync(fileno(f)) == 0;
        const int err = errno;
        if (fclose(f) != 0 || !ok) rc = tg_fail(e, "%s: write failed: %s", tmp, strerror(ok ? errno : err));
    }
    if (rc == 0 && rename(tmp, path) != 0) rc = tg_fail(e, "%s: cannot rename into place: %s", path, strerror(errno));
    if (rc != 0) unlink(tmp);
    free(tmp);
    return rc;
}
