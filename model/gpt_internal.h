/* Shared between the files of model/gpt*: not for other modules. */
#ifndef MODEL_GPT_INTERNAL_H
#define MODEL_GPT_INTERNAL_H

#include "model/gpt.h"

typedef enum { INIT_NORMAL, INIT_RESIDUAL, INIT_ZERO, INIT_ONE } init_kind;

typedef struct param_spec {
    const char *name_fmt; /* printf format taking the layer index */
    bool per_layer;
    split_kind split;
    bool decay;
    init_kind init;
} param_spec;

extern const param_spec GPT_PARAM_SPECS[P_KINDS];

typedef struct act_sizes {
    size_t layer_kept;             /* floats per token per layer, besides attention */
    size_t layer_att_per_token_T;  /* attention probabilities: this many * T per token per layer */
    size_t model_kept;             /* floats per token outside the layers */
    size_t logits;                 /* floats per token */
    size_t scratch;                /* floats per token of backward buffers */
} act_sizes;

act_sizes gpt_act_sizes(const gpt_dims *d);
size_t gpt_layout_params(gpt *g);

/* Activation buffers of one rank (backend memory), per-layer ones as [L, ...]. */
struct gpt_acts {
    void *arena;
    int32_t *tokens, *targets;          /* [B*T] */
    float *encoded;                     /* [B*T, C] */
    float *ln1, *ln1_mean, *ln1_rstd;   /* [L, B*T, C], [L, B*T] */
    float *qkv;                         /* [L, B*T, 3C/t] */
    float *atty;                        /* [L, B*T, C/t] */
    float *att;                         /* [L, B, NH/t, T, T] */
    float *res2;                        /* [L, B*T, C] residual after attention */
    float *ln2, *ln2_mean, *ln2_rstd;
    float *fch, *fch_gelu;              /* [L, B*T, 4C/t] */
    float *res3;                        /* [L, B*T, C] residual after the MLP */
    float *lnf, *lnf_mean, *lnf_rstd;
    float *logits;                      /* [B*T, V/t], then its gradient */
    float *losses, *rowmax, *xstats;    /* [B*T], [B*T], [2*B*T] */
    float *dres, *dln, *dqkv, *datty, *dfc; /* backward scratch */
    int B, T;                           /* shape of the last forward */
};

#endif
