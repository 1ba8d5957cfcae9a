/* comm_shm: the segment and the processes of its members.
 *
 * Segments. The member with index 0 creates /train_gpt_<session>_<name>_<rank>
 * (session: random, agreed through the bootstrap), the others attach after a
 * bootstrap exchange, and once all have attached it is unlinked: from then on
 * it lives only as long as the mappings, whatever way the processes end.
 * Every member unlinks the name (the creator dying in between changes
 * nothing), also when creation fails half-way; only if every member of the
 * group dies within the few milliseconds between creation and the end of
 * the attach exchange can a name outlive the job. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "parallel/comm_shm_impl.h"

#define SHM_MAGIC 0x54475348u /* "TGSH" */
#define SHM_VERSION 1
#define PAGE 4096

static size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* State and start time of a process from /proc/<pid>/stat; -1 if unreadable. */
static int proc_stat(pid_t pid, char *state, uint64_t *start) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return -1;
    buf[n] = '\0';
    char *p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
    if (!p || p[1] != ' ') return -1;
    p += 2;
    *state = *p;
    /* fields after the name: state is field 3, start time field 22 */
    for (int field = 3; field < 22; field++) {
        p = strchr(p, ' ');
        if (!p) return -1;
        p++;
    }
    *start = strtoull(p, NULL, 10);
    return 0;
}

int shm_member_dead(const member_line *m) {
    pid_t pid = atomic_load_explicit(&m->pid, memory_order_acquire);
    if (pid <= 0) return 0;
    if (kill(pid, 0) == -1 && errno == ESRCH) return 1;
    char state;
    uint64_t start;
    if (proc_stat(pid, &state, &start) == 0) {
        if (state == 'Z' || state == 'X') return 1;        /* exited, not yet reaped */
        if (m->start_time && start != m->start_time) return 1; /* the pid now belongs to another process */
    }
    return 0;
}

static void segment_layout(int p, size_t slot_floats, size_t *members_off, size_t *slots_off, size_t *stride, size_t *result_off,
                           size_t *total) {
    *members_off = align_up(sizeof(shm_header), 64);
    *slots_off = align_up(*members_off + (size_t)p * sizeof(member_line), PAGE);
    *stride = align_up(slot_floats * sizeof(float), PAGE) / sizeof(float);
    *result_off = *slots_off + (size_t)p * *stride * sizeof(float);
    *total = *result_off + align_up(slot_floats * sizeof(float), PAGE);
}

static int map_segment(shm_impl *s, int fd, size_t bytes, const char *shm_name, tg_err *e) {
    void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) return tg_fail(e, "mmap of shared memory %s (%zu bytes): %s", shm_name, bytes, strerror(errno));
    s->base = m;
    s->map_bytes = bytes;
    return 0;
}

int shm_create_segment(shm_impl *s, int p, const char *shm_name, tg_err *e) {
    size_t moff, soff, stride, roff, total;
    segment_layout(p, s->slot_floats, &moff, &soff, &stride, &roff, &total);
    int fd = shm_open(shm_name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) return tg_fail(e, "shm_open(%s) to create the segment: %s", shm_name, strerror(errno));
    int rc = 0;
    if (ftruncate(fd, (off_t)total) != 0)
        rc = tg_fail(e, "ftruncate of shared memory %s to %zu bytes: %s", shm_name, total, strerror(errno));
    int fa = rc ? 0 : posix_fallocate(fd, 0, (off_t)total); /* reserve now: no SIGBUS later if /dev/shm fills up */
    if (fa)
        rc = tg_fail(e, "reserving %zu MiB of shared memory for %s: %s (see df -h /dev/shm)", total >> 20, shm_name, strerror(fa));
    if (!rc) rc = map_segment(s, fd, total, shm_name, e);
    close(fd);
    if (rc) {
        shm_unlink(shm_name); /* the name is ours: no member will unlink a segment that failed */
        return -1;
    }
    shm_header *h = (shm_header *)s->base;
    h->magic = SHM_MAGIC;
    h->version = SHM_VERSION;
    h->size = (uint32_t)p;
    h->slot_floats = s->slot_floats;
    h->map_bytes = total;
    return 0;
}

int shm_attach_segment(shm_impl *s, int p, const char *shm_name, tg_err *e) {
    size_t moff, soff, stride, roff, total;
    segment_layout(p, s->slot_floats, &moff, &soff, &stride, &roff, &total);
    int fd = shm_open(shm_name, O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) return tg_fail(e, "shm_open(%s) to attach: %s", shm_name, strerror(errno));
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) != 0 || (size_t)st.st_size != total)
        rc = tg_fail(e, "shared memory %s has %lld bytes, expected %zu", shm_name, (long long)st.st_size, total);
    if (!rc) rc = map_segment(s, fd, total, shm_name, e);
    close(fd);
    if (rc) return -1;
    const shm_header *h = (const shm_header *)s->base;
    if (h->magic != SHM_MAGIC || h->version != SHM_VERSION || h->size != (uint32_t)p || h->slot_floats != s->slot_floats)
        return tg_fail(e, "shared memory %s is not this group's segment (size %u, slot %llu floats)", shm_name, h->size,
                       (unsigned long long)h->slot_floats);
    return 0;
}

void shm_wire_up(shm_impl *s, int p, int my_index, int my_rank) {
    size_t moff, soff, stride, roff, total;
    segment_layout(p, s->slot_floats, &moff, &soff, &stride, &roff, &total);
    s->hdr = (shm_header *)s->base;
    s->mem = (member_line *)(s->base + moff);
    s->slots = (float *)(s->base + soff);
    s->slot_stride = stride;
    s->result = (float *)(s->base + roff);
    member_line *m = &s->mem[my_index];
    char state;
    uint64_t start = 0;
    if (proc_stat(getpid(), &state, &start) != 0) start = 0;
    m->global_rank = my_rank;
    m->start_time = start;
    atomic_store_explicit(&m->pid, (int32_t)getpid(), memory_order_release);
}
