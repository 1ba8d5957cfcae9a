/* The per-call work model (kernels/op_work.h). */
#include "kernels/op_work.h"

#include <string.h>

double op_work_act_bytes(tg_o o, double n) { return n * (double)tg_dtype_bytes(o->act); }

double op_work_span_elements(const tg_spans *s) {
    double n = 0;
    for (int i = 0; i < s->n; i++)
        for (int c = 0; c < s->span[i].count; c++) {
            size_t at = 0, b, end, moment;
            while (tg_span_next(&s->span[i], c, &at, &b, &end, &moment)) n += (double)(end - b);
        }
    return n;
}

double op_work_backward_flops(const void *dinp, const void *dw, int N, int C, int OC) {
    return 2.0 * N * C * OC * ((dinp != NULL) + (dw != NULL));
}

double op_work_attention_flops(int B, int T, int NH, int HS, int products) {
    return products * 2.0 * B * NH * (double)T * T * HS / 2;
}

double op_work_adamw_bytes(tg_o o, const tg_spans *spans) {
    const double n = op_work_span_elements(spans);
    return 28.0 * n + op_work_act_bytes(o, n);
}

op_unit op_work_unit(const char *name, int *known) {
    static const struct {
        const char *name;
        op_unit unit;
    } units[] = {
#define OP_UNIT_ROW(op, params, args, unit, work) {#op, unit},
        TIMED_OPS(OP_UNIT_ROW)
#undef OP_UNIT_ROW
    };
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (strcmp(units[i].name, name) == 0) {
            if (known) *known = 1;
            return units[i].unit;
        }
    if (known) *known = 0;
    return OP_UNIT_CALL;
}
