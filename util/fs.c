#include "util/fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
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
    char tmp[4200];
    FILE *f = fs_create_temp(path, tmp, sizeof tmp, e);
    if (!f) return -1;
    const int ok = fwrite(text, 1, len, f) == len && fflush(f) == 0 && fsync(fileno(f)) == 0;
    const int err = errno;
    int rc = 0;
    if (fclose(f) != 0 || !ok) rc = tg_fail(e, "%s: write failed: %s", tmp, strerror(ok ? errno : err));
    if (rc == 0 && rename(tmp, path) != 0) rc = tg_fail(e, "%s: cannot rename into place: %s", path, strerror(errno));
    if (rc != 0) unlink(tmp);
    return rc;
}

FILE *fs_create_excl(const char *path) {
    const int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0) return NULL;
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        const int err = errno;
        close(fd);
        unlink(path); /* made just now by this call */
        errno = err;
    }
    return f;
}

/* TARGET.tmp.XXXXXX, the X from the pid, the clock and the attempt
 * (mixed as splitmix64 does); -1 when it does not fit in out. */
static int temp_name(const char *target, unsigned attempt, char *out, size_t n) {
    static const char digits[] = "0123456789abcdefghijklmnopqrstuvwxyz";
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = (uint64_t)getpid() << 32 ^ (uint64_t)ts.tv_nsec ^ (uint64_t)ts.tv_sec << 30 ^ attempt;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    x ^= x >> 31;
    char suffix[7];
    for (int i = 0; i < 6; i++, x /= 36) suffix[i] = digits[x % 36];
    suffix[6] = '\0';
    const int len = snprintf(out, n, "%s.tmp.%s", target, suffix);
    return len >= 0 && (size_t)len < n ? 0 : -1;
}

#define TEMP_ATTEMPTS 100

FILE *fs_create_temp(const char *target, char *tmp, size_t tmp_len, tg_err *e) {
    for (unsigned a = 0; a < TEMP_ATTEMPTS; a++) {
        if (temp_name(target, a, tmp, tmp_len)) {
            tg_fail(e, "%s: the path is too long for a temporary name beside it", target);
            return NULL;
        }
        FILE *f = fs_create_excl(tmp);
        if (f) return f;
        if (errno != EEXIST) {
            tg_fail(e, "%s: cannot create: %s", tmp, strerror(errno));
            return NULL;
        }
    }
    tg_fail(e, "%s: no free temporary name beside it after %d tries", target, TEMP_ATTEMPTS);
    return NULL;
}

int fs_mkdir_temp(const char *target, char *tmp, size_t tmp_len, tg_err *e) {
    for (unsigned a = 0; a < TEMP_ATTEMPTS; a++) {
        if (temp_name(target, a, tmp, tmp_len)) return tg_fail(e, "%s: the path is too long for a temporary name", target);
        if (mkdir(tmp, 0755) == 0) return 0; /* mkdir never follows a link: one there is EEXIST */
        if (errno != EEXIST) return tg_fail(e, "%s: cannot create directory: %s", tmp, strerror(errno));
    }
    return tg_fail(e, "%s: no free temporary name beside it after %d tries", target, TEMP_ATTEMPTS);
}

static bool listed(const char *name, const char *const *names, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(name, names[i]) == 0) return true;
    return false;
}

/* The first entry of d that is not a regular file named in names, into
 * odd with why; false when there is none. */
static bool find_foreign(DIR *d, const char *const *names, size_t n, char *odd, size_t odd_len, const char **why) {
    struct dirent *ent;
    struct stat sb;
    while ((ent = readdir(d)) != NULL) {
        if (strcmp(ent->d_name, ".") == 0 || strcmp(ent->d_name, "..") == 0) continue;
        *why = "which this program does not write there";
        if (listed(ent->d_name, names, n)) {
            if (fstatat(dirfd(d), ent->d_name, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(sb.st_mode)) continue;
            *why = "which is not a regular file";
        }
        snprintf(odd, odd_len, "%s", ent->d_name);
        return true;
    }
    return false;
}

int fs_remove_owned_dir(const char *dir, const char *const *names, size_t n_names, tg_err *e) {
    const int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) return 0;
    if (fd < 0 && (errno == ELOOP || errno == ENOTDIR))
        return tg_fail(e, "%s: not removed: it is a symbolic link or not a directory, which this program did not make", dir);
    if (fd < 0) return tg_fail(e, "%s: cannot open it to remove it: %s", dir, strerror(errno));
    DIR *d = fdopendir(fd);
    if (!d) {
        const int err = errno;
        close(fd);
        return tg_fail(e, "%s: cannot list it to remove it: %s", dir, strerror(err));
    }
    char odd[256];
    const char *why = "";
    int rc = 0;
    if (find_foreign(d, names, n_names, odd, sizeof odd, &why))
        rc = tg_fail(e, "%s: not removed: it holds '%s', %s", dir, odd, why);
    for (size_t i = 0; rc == 0 && i < n_names; i++)
        if (unlinkat(fd, names[i], 0) != 0 && errno != ENOENT)
            rc = tg_fail(e, "%s/%s: cannot remove: %s", dir, names[i], strerror(errno));
    closedir(d);
    if (rc == 0 && rmdir(dir) != 0) rc = tg_fail(e, "%s: cannot remove: %s", dir, strerror(errno));
    return rc;
}

/* The "PID HOST" a lock's holder wrote, into out; waits up to half a second
 * for a holder that has the lock but has not written it yet. */
static void lock_holder(int fd, char *out, size_t n) {
    for (int tries = 0; tries < 50; tries++) {
        const ssize_t got = pread(fd, out, n - 1, 0);
        out[got > 0 ? got : 0] = '\0';
        out[strcspn(out, "\n")] = '\0';
        if (out[0]) return;
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    }
    snprintf(out, n, "unknown (it wrote no pid)");
}

static int lock_refused(const char *path, int fd, tg_err *e) {
    char holder[256], pid[32] = "", host[200] = "";
    lock_holder(fd, holder, sizeof holder);
    if (sscanf(holder, "%31s %199s", pid, host) == 2)
        tg_fail(e, "%s: locked by pid %s on host %s, which is still running", path, pid, host);
    else tg_fail(e, "%s: locked by another process (holder: %s)", path, holder);
    return 1;
}

int fs_lock_take(const char *path, fs_lock *lock, tg_err *e) {
    *lock = (fs_lock){-1, false};
    const int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0 && errno == ENOENT) { /* O_CREAT: what is missing is a folder on the way */
        const char *slash = strrchr(path, '/');
        const int dir_len = slash == NULL ? 1 : slash == path ? 1 : (int)(slash - path);
        return tg_fail(e, "%s: cannot open the lock file: the folder %.*s does not exist", path, dir_len,
                       slash == NULL ? "." : path);
    }
    if (fd < 0) return tg_fail(e, "%s: cannot open the lock file: %s", path, strerror(errno));
    int rc = 0;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0)
        rc = errno == EWOULDBLOCK ? lock_refused(path, fd, e) : tg_fail(e, "%s: cannot lock: %s", path, strerror(errno));
    char host[256] = "", text[320];
    if (rc == 0 && gethostname(host, sizeof host - 1) != 0) snprintf(host, sizeof host, "unknown");
    const int len = snprintf(text, sizeof text, "%ld %s\n", (long)getpid(), host);
    if (rc == 0 && (ftruncate(fd, 0) != 0 || pwrite(fd, text, (size_t)len, 0) != len))
        rc = tg_fail(e, "%s: cannot record this process in the lock file: %s", path, strerror(errno));
    if (rc != 0) {
        close(fd);
        return rc;
    }
    *lock = (fs_lock){fd, true};
    return 0;
}

void fs_unlock(fs_lock *lock) {
    if (lock->held) close(lock->fd); /* closing the last descriptor releases the flock */
    *lock = (fs_lock){-1, false};
}
