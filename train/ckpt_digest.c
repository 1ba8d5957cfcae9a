#include "train/ckpt_digest.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "train/checkpoint.h"
#include "train/run.h"

#define DIGEST_KEY "xxh3_128"

void ckpt_files_add(ckpt_files *f, const char *name, long long bytes, const char digest[DIGEST_HEX_LEN]) {
    if (f->n == CKPT_FILES_MAX) { /* the save's own list of files: a programming error, not an input */
        fprintf(stderr, "fatal: a checkpoint holds more than %d files\n", CKPT_FILES_MAX);
        abort();
    }
    ckpt_file_record *r = &f->rec[f->n++];
    snprintf(r->name, sizeof r->name, "%s", name);
    r->bytes = bytes;
    memcpy(r->digest, digest, DIGEST_HEX_LEN);
}

void ckpt_files_add_bytes(ckpt_files *f, const char *name, const void *data, size_t len) {
    char hex[DIGEST_HEX_LEN];
    digest_bytes(data, len, hex);
    ckpt_files_add(f, name, (long long)len, hex);
}

cJSON *ckpt_files_json(const ckpt_files *f) {
    cJSON *j = cJSON_CreateObject();
    for (int i = 0; i < f->n; i++) {
        cJSON *o = cJSON_AddObjectToObject(j, f->rec[i].name);
        cJSON_AddNumberToObject(o, "bytes", (double)f->rec[i].bytes);
        cJSON_AddStringToObject(o, DIGEST_KEY, f->rec[i].digest);
    }
    return j;
}

/* A plain name inside the checkpoint: never a path leading out of it. */
static bool plain_name(const char *name) {
    return name[0] && strlen(name) < CKPT_FILE_NAME_MAX && !strchr(name, '/') && strcmp(name, ".") != 0 &&
           strcmp(name, "..") != 0 && strcmp(name, "state.json") != 0;
}

static int verify_one(const char *dir, const cJSON *entry, const char *state_path, tg_err *e) {
    const char *name = entry->string;
    if (!plain_name(name))
        return tg_fail(e, "%s: files: '%s' is not the name of a file in the checkpoint", state_path, name);
    const cJSON *bytes = cJSON_GetObjectItemCaseSensitive(entry, "bytes");
    const cJSON *want = cJSON_GetObjectItemCaseSensitive(entry, DIGEST_KEY);
    if (!cJSON_IsObject(entry) || !cJSON_IsNumber(bytes) || bytes->valuedouble < 0 ||
        bytes->valuedouble != floor(bytes->valuedouble) || !cJSON_IsString(want) ||
        strlen(want->valuestring) != DIGEST_HEX_LEN - 1)
        return tg_fail(e, "%s: files.%s must be {\"bytes\": a whole number, \"%s\": %d hex digits}", state_path, name,
                       DIGEST_KEY, DIGEST_HEX_LEN - 1);
    char path[1200], got[DIGEST_HEX_LEN];
    long long size = 0;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (digest_file(path, got, &size, e)) return -1;
    if ((double)size != bytes->valuedouble)
        return tg_fail(e, "%s: damaged: it holds %lld bytes, %s records %.0f", path, size, state_path, bytes->valuedouble);
    if (strcmp(got, want->valuestring) != 0)
        return tg_fail(e, "%s: damaged: its checksum (XXH3-128) is %s, %s records %s", path, got, state_path,
                       want->valuestring);
    return 0;
}

int ckpt_files_verify(const char *dir, const cJSON *files, const char *state_path, tg_err *e) {
    static const char *const needed[] = {"model.safetensors", "optimizer.safetensors", "config.json"};
    if (!cJSON_IsObject(files))
        return tg_fail(e, "%s: key 'files' (each file's size and checksum) is missing or not an object", state_path);
    for (size_t i = 0; i < sizeof needed / sizeof needed[0]; i++)
        if (!cJSON_GetObjectItemCaseSensitive(files, needed[i]))
            return tg_fail(e, "%s: files lacks '%s': its checksum is not recorded", state_path, needed[i]);
    for (const cJSON *it = files->child; it; it = it->next)
        if (verify_one(dir, it, state_path, e)) return -1;
    return 0;
}

int ckpt_state_version(const cJSON *j, const char *path, long long *version, tg_err *e) {
    if (!cJSON_IsObject(j)) return tg_fail(e, "%s: not a JSON object", path);
    if (ckpt_json_whole(cJSON_GetObjectItemCaseSensitive(j, "version"), "version", 0, INT_MAX, version, path, e))
        return -1;
    if (*version != CKPT_VERSION && *version != CKPT_VERSION_UNVERIFIED)
        return tg_fail(e, "%s: checkpoint version %lld is not %d (or %d)", path, *version, CKPT_VERSION,
                       CKPT_VERSION_UNVERIFIED);
    return 0;
}

int ckpt_files_verify_dir(const char *dir, tg_err *e) {
    char path[1100];
    snprintf(path, sizeof path, "%s/state.json", dir);
    struct stat sb;
    if (lstat(path, &sb) != 0 && errno == ENOENT) return 0;
    cJSON *j = ckpt_read_json(path, e);
    if (!j) return -1;
    long long version = 0;
    int rc = ckpt_state_version(j, path, &version, e);
    if (rc == 0 && version == CKPT_VERSION_UNVERIFIED)
        tg_warn(PROG, "%s: a version-%d checkpoint records no checksums: its files are loaded unverified", dir,
                CKPT_VERSION_UNVERIFIED);
    else if (rc == 0) rc = ckpt_files_verify(dir, cJSON_GetObjectItemCaseSensitive(j, "files"), path, e);
    cJSON_Delete(j);
    return rc;
}
