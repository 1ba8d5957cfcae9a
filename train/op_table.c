#include "train/op_table.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/op_rates.h"
#include "util/json.h"

/* The timer's columns; a table written since the rate columns came has
 * those after them (kernels/op_rates.h), which the calibration reads past. */
static const char HEADER[] = OP_RATES_TSV_HEADER_TIMES;
static const char *const FIELDS[] = {"op", "calls_per_step", "device_ms_per_step", "host_ms_per_step", "share"};

char *op_table_shape_line(const tg_config *c, const char *device_name) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "model.n_layer", c->model.n_layer);
    cJSON_AddNumberToObject(o, "model.n_head", c->model.n_head);
    cJSON_AddNumberToObject(o, "model.n_embd", c->model.n_embd);
    cJSON_AddNumberToObject(o, "model.vocab_size", c->model.vocab_size);
    cJSON_AddNumberToObject(o, "model.vocab_multiple", c->model.vocab_multiple);
    cJSON_AddNumberToObject(o, "model.seq_len", c->model.seq_len);
    cJSON_AddNumberToObject(o, "model.dropout", c->model.dropout);
    cJSON_AddNumberToObject(o, "train.micro_batch", c->train.micro_batch);
    cJSON_AddNumberToObject(o, "train.global_batch", c->train.global_batch);
    cJSON_AddStringToObject(o, "train.precision", c->train.precision);
    cJSON_AddStringToObject(o, "train.recompute", c->train.recompute);
    cJSON_AddNumberToObject(o, "parallel.tp", c->parallel.tp);
    cJSON_AddNumberToObject(o, "parallel.dp", c->parallel.dp);
    cJSON_AddBoolToObject(o, "parallel.sp", c->parallel.sp);
    cJSON_AddNumberToObject(o, "parallel.zero", c->parallel.zero);
    cJSON_AddStringToObject(o, "device", c->device);
    cJSON_AddStringToObject(o, "device_name", device_name);
    char *json = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!json) return NULL;
    const size_t n = strlen(OP_TABLE_SHAPE_PREFIX) + strlen(json) + 2;
    char *line = tg_malloc(n, "op table shape line");
    snprintf(line, n, "%s%s\n", OP_TABLE_SHAPE_PREFIX, json);
    cJSON_free(json);
    return line;
}

/* One member of the shape line onto t->shape, as --set would apply it. */
static int apply_shape_member(op_table *t, const cJSON *m, tg_err *e) {
    if (strcmp(m->string, "device_name") == 0) {
        if (!cJSON_IsString(m)) return tg_fail(e, "%s:%d: shape: device_name must be a string", t->path, t->shape_line);
        snprintf(t->device_name, sizeof t->device_name, "%s", m->valuestring);
        return 0;
    }
    char assignment[512];
    if (cJSON_IsNumber(m)) snprintf(assignment, sizeof assignment, "%s=%.17g", m->string, m->valuedouble);
    else if (cJSON_IsBool(m)) snprintf(assignment, sizeof assignment, "%s=%s", m->string, cJSON_IsTrue(m) ? "true" : "false");
    else if (cJSON_IsString(m)) snprintf(assignment, sizeof assignment, "%s=%s", m->string, m->valuestring);
    else return tg_fail(e, "%s:%d: shape: '%s' must be a number, true/false or a string", t->path, t->shape_line, m->string);
    tg_err inner;
    if (config_set(&t->shape, assignment, &inner))
        return tg_fail(e, "%s:%d: shape: key '%s': %s", t->path, t->shape_line, m->string, inner.msg);
    return 0;
}

static int read_shape(op_table *t, const char *json, int line, tg_err *e) {
    if (t->has_shape) return tg_fail(e, "%s:%d: a second shape line (the first is line %d)", t->path, line, t->shape_line);
    t->has_shape = true;
    t->shape_line = line;
    char where[CFG_PATH_MAX + 32];
    snprintf(where, sizeof where, "%s:%d: shape", t->path, line);
    cJSON *root = json_parse_exact(json, strlen(json), where, e);
    if (!root) return -1;
    int rc = cJSON_IsObject(root) ? 0 : tg_fail(e, "%s:%d: shape: not a JSON object", t->path, line);
    for (const cJSON *m = root->child; rc == 0 && m; m = m->next) rc = apply_shape_member(t, m, e);
    cJSON_Delete(root);
    return rc;
}

/* A per-step figure: the whole field a finite number >= 0. */
static int parse_figure(const op_table *t, int line, int field, const char *text, double *out, tg_err *e) {
    char *end;
    errno = 0;
    const double x = strtod(text, &end);
    if (end == text || *end || errno || !isfinite(x) || x < 0)
        return tg_fail(e, "%s:%d: %s: '%s' is not a number >= 0", t->path, line, FIELDS[field], text);
    *out = x;
    return 0;
}

static int read_row(op_table *t, char *text, int line, tg_err *e) {
    char *f[OP_RATES_TSV_COLUMNS];
    const int want = t->columns;
    int n = 0;
    for (char *p = text, *tab; n < want; p = tab + 1) {
        f[n++] = p;
        if (!(tab = strchr(p, '\t'))) break;
        *tab = '\0';
    }
    if (n != want || strchr(f[want - 1], '\t'))
        return tg_fail(e, "%s:%d: %d tab-separated fields, want %d (%s)", t->path, line, n == want ? want + 1 : n, want,
                       want == 5 ? HEADER : OP_RATES_TSV_HEADER);
    if (!f[0][0] || strlen(f[0]) >= sizeof t->rows[0].name)
        return tg_fail(e, "%s:%d: op: '%s' is not an op name", t->path, line, f[0]);
    for (int i = 0; i < t->n; i++)
        if (strcmp(t->rows[i].name, f[0]) == 0)
            return tg_fail(e, "%s:%d: op: '%s' again (first on line %d)", t->path, line, f[0], t->rows[i].line);
    if (t->n == OP_TABLE_ROWS) return tg_fail(e, "%s:%d: more than %d ops", t->path, line, OP_TABLE_ROWS);
    op_row *r = &t->rows[t->n];
    if (parse_figure(t, line, 1, f[1], &r->calls, e) || parse_figure(t, line, 2, f[2], &r->device_ms, e) ||
        parse_figure(t, line, 3, f[3], &r->host_ms, e) || parse_figure(t, line, 4, f[4], &r->share, e))
        return -1;
    snprintf(r->name, sizeof r->name, "%s", f[0]);
    r->line = line;
    t->n++;
    return 0;
}

/* One line, its newline removed: the shape, a comment, the header or a row. */
static int read_line(op_table *t, char *text, int line, bool *header_seen, tg_err *e) {
    if (strncmp(text, OP_TABLE_SHAPE_PREFIX, strlen(OP_TABLE_SHAPE_PREFIX)) == 0) {
        if (*header_seen) return tg_fail(e, "%s:%d: the shape line must come before the header", t->path, line);
        return read_shape(t, text + strlen(OP_TABLE_SHAPE_PREFIX), line, e);
    }
    if (text[0] == '#') return 0;
    if (!*header_seen) {
        if (strcmp(text, HEADER) != 0 && strcmp(text, OP_RATES_TSV_HEADER) != 0)
            return tg_fail(e, "%s:%d: want the header '%s' (tab-separated), found '%.80s'", t->path, line,
                           OP_RATES_TSV_HEADER, text);
        t->columns = strcmp(text, HEADER) == 0 ? 5 : OP_RATES_TSV_COLUMNS;
        *header_seen = true;
        return 0;
    }
    return read_row(t, text, line, e);
}

int op_table_read(const char *path, op_table *t, tg_err *e) {
    memset(t, 0, sizeof *t);
    snprintf(t->path, sizeof t->path, "%s", path);
    config_defaults(&t->shape);
    FILE *f = fopen(path, "r");
    if (!f) return tg_fail(e, "%s: cannot open the op table: %s", path, strerror(errno));
    char *buf = NULL;
    size_t cap = 0;
    ssize_t len;
    int line = 0, rc = 0;
    bool header_seen = false;
    while (rc == 0 && (len = getline(&buf, &cap, f)) >= 0) {
        line++;
        if (strlen(buf) != (size_t)len) rc = tg_fail(e, "%s:%d: a NUL byte inside the line", path, line);
        else {
            while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r')) buf[--len] = '\0';
            rc = read_line(t, buf, line, &header_seen, e);
        }
    }
    if (rc == 0 && ferror(f)) rc = tg_fail(e, "%s: cannot read the op table: %s", path, strerror(errno));
    free(buf);
    fclose(f);
    if (rc == 0 && !header_seen) rc = tg_fail(e, "%s: no header line '%s': not an op table", path, HEADER);
    if (rc == 0 && t->n == 0) rc = tg_fail(e, "%s: no op rows after the header", path);
    return rc;
}
