/* nn_spec.c - a model's architecture as one line of text, and back.
 *
 * The coordinator sends workers the model as a spec such as
 *   Sequential(Linear(64,128),ReLU,Dropout(0.5),Linear(128,10))
 * and the values of its variables separately, so a spec carries structure
 * only. Grammar (spaces between tokens are allowed when parsing; nn_spec
 * never writes any):
 *   layer  := ("Sequential" | "Concat" | "Sum") "(" [layer ("," layer)*] ")"
 *           | "Residual" "(" layer ")"
 *           | "Linear" "(" size "," size ")"
 *           | "Dropout" "(" prob ")"
 *           | "LeakyReLU" "(" num ")"
 *           | "Conv2d" "(" size "," size "," pair "," pair "," cpair "," pair "," bit ")"
 *               (in, out, kernel, stride, padding, dilation, bias)
 *           | ("MaxPool2d" | "AvgPool2d") "(" pair "," pair "," cpair ")"
 *               (kernel, stride, padding)
 *           | "Unflatten" "(" size ["," size ["," size]] ")"
 *           | "DotInteraction" "(" size "," bit ")"      (fields, keep_first)
 *           | "Embedding" "(" size "," size ")"
 *           | "EmbeddingBag" "(" rows "," size "," bit "," bags "," num "," seed ")"
 *               (rows, dim, mode: 0 sum 1 mean, bags: 0 auto 1 field 2 all, std, seed)
 *           | "SparseLinear" "(" rows "," size "," num "," seed ")"   (rows, out, std, seed)
 *           | "SparseEmbedding" "(" size "," size "," num "," seed ")" (nn.Embedding, sparse)
 *           | "LayerNorm" "(" size "," num ")"            (dim, eps)
 *           | ("BatchNorm1d" | "BatchNorm2d") "(" size "," num "," num ")"
 *               (channels, eps, momentum)
 *           | "ReLU" | "Tanh" | "Sigmoid" | "Softmax" | "GELU" | "Identity"
 *           | "Flatten"
 *   size   := decimal digits, 1 .. 2^31-1
 *   count  := decimal digits, 0 .. 2^31-1
 *   pair   := size [":" size]      ({height, width}; one number for both)
 *   cpair  := count [":" count]
 *   bit    := "0" | "1"
 *   bags   := "0" | "1" | "2"
 *   rows   := decimal digits, 1 .. 2^40 (a table's declared rows)
 *   seed   := decimal digits, 0 .. 2^64-1 (a table's: its rows are a function of it)
 *   prob   := a decimal float in [0, 1]
 *   num    := a finite decimal float
 * Specs may come off the network, so the parser is strict, bounds nesting
 * and names the 1-based character position of the first problem.
 */
#include "numeric/nn.h"
#include "numeric/nn_sparse.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"

/* Deeper nesting than this is refused rather than recursed into. */
#define SPEC_MAX_DEPTH 64
#define SPEC_MAX_SIZE INT32_MAX

/* ============================== writing ================================== */

/* snprintf-style accumulator: `len` counts what the whole text needs even
 * after buf is full, so nn_spec can report the size to allocate. */
typedef struct spec_out {
  char *buf;
  size_t n, len;
} spec_out;

static void out_printf(spec_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void out_printf(spec_out *o, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  size_t room = o->len < o->n ? o->n - o->len : 0;
  int k = vsnprintf(room ? o->buf + o->len : NULL, room, fmt, ap);
  va_end(ap);
  if (k > 0) o->len += (size_t)k;
}

/* n comma-separated pairs, each "v" when square (the form of every spec
 * before pairs) else "h:w". */
static void write_pairs(spec_out *o, const int64_t *const *pairs, int n) {
  for (int i = 0; i < n; i++) {
    const int64_t *v = pairs[i];
    if (v[0] == v[1]) out_printf(o, "%s%lld", i ? "," : "", (long long)v[0]);
    else out_printf(o, "%s%lld:%lld", i ? "," : "", (long long)v[0], (long long)v[1]);
  }
}

/* An id layer carries its table's seed: a worker or a loaded model makes
 * the same rows. */
static int idlayer_write(const nn_module *m, spec_out *o) {
  nn_idlayer l;
  int rc = nn_idlayer_get(m, &l);
  if (rc < 0) return rc;
  unsigned long long rows = (unsigned long long)l.rows, seed = (unsigned long long)l.seed;
  if (l.kind == NN_ID_BAG)
    out_printf(o, "EmbeddingBag(%llu,%lld,%d,%d,%.9g,%llu)", rows, (long long)l.dim,
               (int)l.o.mode, (int)l.o.bags, (double)l.o.std, seed);
  else
    out_printf(o, "%s(%llu,%lld,%.9g,%llu)",
               l.kind == NN_ID_LINEAR ? "SparseLinear" : "SparseEmbedding", rows,
               (long long)l.dim, (double)l.o.std, seed);
  return 0;
}

static int spec_write(const nn_module *m, spec_out *o) {
  const char *type = m->ops->type;
  if (m->tab) return idlayer_write(m, o);
  if (strcmp(type, "Sequential") == 0 || strcmp(type, "Concat") == 0 ||
      strcmp(type, "Sum") == 0 || strcmp(type, "Residual") == 0) {
    out_printf(o, "%s(", type);
    for (int i = 0; i < m->nchildren; i++) {
      if (i) out_printf(o, ",");
      int rc = spec_write(m->children[i], o);
      if (rc < 0) return rc;
    }
    out_printf(o, ")");
  } else if (strcmp(type, "Linear") == 0) {
    out_printf(o, "Linear(%lld,%lld)", (long long)m->in_features, (long long)m->out_features);
  } else if (strcmp(type, "Dropout") == 0) {
    /* %.9g round-trips any float exactly through strtof. */
    out_printf(o, "Dropout(%.9g)", (double)m->p);
  } else if (strcmp(type, "LeakyReLU") == 0) {
    out_printf(o, "LeakyReLU(%.9g)", (double)m->p);
  } else if (strcmp(type, "Conv2d") == 0) {
    /* Conv2d(in,out,k,stride,padding,dilation,bias) when every pair is
     * square (the form of every spec before pairs), else each pair as
     * "h:w" in its place. */
    out_printf(o, "Conv2d(%lld,%lld,", (long long)m->in_features, (long long)m->out_features);
    write_pairs(o, (const int64_t *[]){m->k, m->stride, m->pad, m->dil}, 4);
    out_printf(o, ",%d)", m->nparams > 1);
  } else if (strcmp(type, "MaxPool2d") == 0 || strcmp(type, "AvgPool2d") == 0) {
    out_printf(o, "%s(", type);
    write_pairs(o, (const int64_t *[]){m->k, m->stride, m->pad}, 3);
    out_printf(o, ")");
  } else if (strcmp(type, "Embedding") == 0) {
    out_printf(o, "Embedding(%lld,%lld)", (long long)m->in_features, (long long)m->out_features);
  } else if (strcmp(type, "LayerNorm") == 0) {
    out_printf(o, "LayerNorm(%lld,%.9g)", (long long)m->in_features, (double)m->eps);
  } else if (strcmp(type, "BatchNorm1d") == 0 || strcmp(type, "BatchNorm2d") == 0) {
    out_printf(o, "%s(%lld,%.9g,%.9g)", type, (long long)m->in_features, (double)m->eps,
               (double)m->momentum);
  } else if (strcmp(type, "DotInteraction") == 0) {
    out_printf(o, "DotInteraction(%lld,%d)", (long long)m->in_features, m->out_features != 0);
  } else if (strcmp(type, "Unflatten") == 0) {
    out_printf(o, "Unflatten(");
    for (int i = 0; i < m->nview; i++) out_printf(o, "%s%lld", i ? "," : "", (long long)m->view[i]);
    out_printf(o, ")");
  } else if (strcmp(type, "ReLU") == 0 || strcmp(type, "Tanh") == 0 ||
             strcmp(type, "Sigmoid") == 0 || strcmp(type, "Softmax") == 0 ||
             strcmp(type, "GELU") == 0 || strcmp(type, "Identity") == 0 ||
             strcmp(type, "Flatten") == 0) {
    out_printf(o, "%s", type);
  } else {
    return err_set(DRV_EUNSUPPORTED, "model spec: layer type '%s' has no spec", type);
  }
  return 0;
}

int nn_spec(const nn_module *m, char *buf, size_t n) {
  if (!m) return err_set(DRV_EINVAL, "nn_spec: NULL module");
  spec_out o = {buf, buf ? n : 0, 0};
  if (o.n) buf[0] = '\0';
  int rc = spec_write(m, &o);
  if (rc < 0) return rc;
  if (o.len > INT32_MAX) return err_set(DRV_ERANGE, "model spec: longer than 2 GiB");
  return (int)o.len;
}

/* ============================== parsing ================================== */

typedef struct spec_in {
  const char *s; /* the whole spec, for positions */
  const char *p; /* cursor */
  rng_t *r;
} spec_in;

static int pos(const spec_in *in, const char *at) { return (int)(at - in->s) + 1; }

static void skip_space(spec_in *in) {
  while (*in->p == ' ' || *in->p == '\t' || *in->p == '\n' || *in->p == '\r') in->p++;
}

/* What the cursor points at, for "expected X, found Y" messages. */
static const char *found(const spec_in *in, char *buf, size_t n) {
  if (!*in->p) return "end of spec";
  snprintf(buf, n, "'%c'", *in->p);
  return buf;
}

static int expect_char(spec_in *in, char c) {
  skip_space(in);
  if (*in->p == c) {
    in->p++;
    return 0;
  }
  char f[8];
  return err_set(DRV_EPARSE, "model spec: position %d: expected '%c', found %s",
                 pos(in, in->p), c, found(in, f, sizeof f));
}

/* A decimal integer in min .. SPEC_MAX_SIZE. */
static int parse_int(spec_in *in, const char *what, int64_t min, int64_t *v) {
  skip_space(in);
  const char *start = in->p;
  int64_t x = 0;
  if (*in->p < '0' || *in->p > '9') {
    char f[8];
    return err_set(DRV_EPARSE, "model spec: position %d: expected %s (a positive integer), "
                   "found %s", pos(in, start), what, found(in, f, sizeof f));
  }
  while (*in->p >= '0' && *in->p <= '9') {
    x = x * 10 + (*in->p++ - '0');
    if (x > SPEC_MAX_SIZE)
      return err_set(DRV_ERANGE, "model spec: position %d: %s is larger than %d",
                     pos(in, start), what, SPEC_MAX_SIZE);
  }
  if (x < min) /* min is 0 or 1, so x is 0 here */
    return err_set(DRV_ERANGE, "model spec: position %d: %s must be positive, got 0",
                   pos(in, start), what);
  *v = x;
  return 0;
}

static int parse_size(spec_in *in, const char *what, int64_t *v) {
  return parse_int(in, what, 1, v);
}

/* A finite float; *v is left alone on error. */
static int parse_float(spec_in *in, const char *what, float *v) {
  skip_space(in);
  const char *start = in->p;
  char tok[64];
  size_t k = 0;
  /* Scan the token ourselves: strtof alone would take "nan", "inf", hex
   * floats and leading spaces, none of which a spec should carry. */
  while (*in->p && strchr("0123456789.eE+-", *in->p) && k + 1 < sizeof tok) tok[k++] = *in->p++;
  tok[k] = '\0';
  char *end = NULL;
  errno = 0;
  float p = k ? strtof(tok, &end) : 0.0f;
  if (!k || *end || errno == ERANGE) {
    char f[8];
    in->p = start;
    return err_set(DRV_EPARSE, "model spec: position %d: expected %s, found %s",
                   pos(in, start), what, found(in, f, sizeof f));
  }
  *v = p;
  return 0;
}

static int parse_prob(spec_in *in, float *v) {
  skip_space(in);
  const char *start = in->p;
  float p = 0.0f;
  int rc = parse_float(in, "a dropout probability", &p);
  if (rc < 0) return rc;
  char tok[64];
  snprintf(tok, sizeof tok, "%.*s", (int)(in->p - start), start);
  if (!(p >= 0.0f && p <= 1.0f))
    return err_set(DRV_ERANGE, "model spec: position %d: dropout probability %s is outside "
                   "[0, 1]", pos(in, start), tok);
  *v = p;
  return 0;
}

static nn_module *parse_layer(spec_in *in, int depth);

/* The children list of a Sequential, cursor after its '('. */
static int parse_children(spec_in *in, nn_module *seq, int depth) {
  skip_space(in);
  if (*in->p == ')') {
    in->p++;
    return 0;
  }
  for (;;) {
    const char *at = in->p;
    nn_module *child = parse_layer(in, depth + 1);
    if (!child) return DRV_EPARSE;
    int rc = nn_sequential_add(seq, child);
    nn_unref(child);
    if (rc < 0)
      return err_set(rc, "model spec: position %d: %s", pos(in, at), err_msg());
    skip_space(in);
    if (*in->p == ')') {
      in->p++;
      return 0;
    }
    if (*in->p != ',') {
      char f[8];
      return err_set(DRV_EPARSE, "model spec: position %d: expected ',' or ')', found %s",
                     pos(in, in->p), found(in, f, sizeof f));
    }
    in->p++;
  }
}

/* Wraps a constructor's failure with the layer's position. */
static nn_module *built(spec_in *in, const char *at, nn_module *m) {
  if (!m) err_set(DRV_EINVAL, "model spec: position %d: %s", pos(in, at), err_msg());
  return m;
}

static nn_module *parse_linear(spec_in *in, const char *at) {
  int64_t a = 0, b = 0;
  if (expect_char(in, '(') < 0 || parse_size(in, "Linear input size", &a) < 0 ||
      expect_char(in, ',') < 0 || parse_size(in, "Linear output size", &b) < 0 ||
      expect_char(in, ')') < 0)
    return NULL;
  if (!in->r) {
    err_set(DRV_EINVAL, "model spec: position %d: Linear needs an rng to initialise its "
            "weights", pos(in, at));
    return NULL;
  }
  return built(in, at, nn_linear(a, b, in->r));
}

static nn_module *parse_dropout(spec_in *in, const char *at) {
  float p = 0.0f;
  if (expect_char(in, '(') < 0 || parse_prob(in, &p) < 0 || expect_char(in, ')') < 0)
    return NULL;
  if (!in->r) {
    err_set(DRV_EINVAL, "model spec: position %d: Dropout needs an rng for its seed",
            pos(in, at));
    return NULL;
  }
  return built(in, at, nn_dropout(p, rng_u64(in->r)));
}

static nn_module *parse_leaky(spec_in *in, const char *at) {
  float a = 0.0f;
  if (expect_char(in, '(') < 0 || parse_float(in, "a LeakyReLU slope", &a) < 0 ||
      expect_char(in, ')') < 0)
    return NULL;
  return built(in, at, nn_leaky_relu(a));
}

/* DotInteraction(fields,keep_first). */
static nn_module *parse_dot(spec_in *in, const char *at) {
  int64_t fields, keep;
  if (expect_char(in, '(') < 0 || parse_int(in, "DotInteraction fields", 2, &fields) < 0 ||
      expect_char(in, ',') < 0 || parse_int(in, "DotInteraction keep_first (0 or 1)", 0, &keep) < 0 ||
      expect_char(in, ')') < 0)
    return NULL;
  if (keep > 1) {
    err_set(DRV_EPARSE, "model spec: position %d: DotInteraction keep_first is 0 or 1",
            pos(in, at));
    return NULL;
  }
  return built(in, at, nn_dot_interaction(fields, keep == 1));
}

/* n or h:w, each at least min, as a pair. */
static int parse_pair(spec_in *in, const char *what, int64_t min, int64_t *v) {
  int rc = parse_int(in, what, min, &v[0]);
  if (rc < 0) return rc;
  v[1] = v[0];
  if (*in->p != ':') return 0;
  in->p++;
  return parse_int(in, what, min, &v[1]);
}

/* Conv2d(in,out,k,stride,padding,dilation,bias), each of k, stride,
 * padding and dilation n or h:w. */
static nn_module *parse_conv(spec_in *in, const char *at) {
  int64_t a = 0, b = 0, bias = 0, k[2] = {0, 0};
  nn_conv_opts o = NN_CONV_DEFAULTS;
  if (expect_char(in, '(') < 0 || parse_size(in, "Conv2d input channels", &a) < 0 ||
      expect_char(in, ',') < 0 || parse_size(in, "Conv2d output channels", &b) < 0 ||
      expect_char(in, ',') < 0 || parse_pair(in, "Conv2d kernel size", 1, k) < 0 ||
      expect_char(in, ',') < 0 || parse_pair(in, "Conv2d stride", 1, o.stride) < 0 ||
      expect_char(in, ',') < 0 || parse_pair(in, "Conv2d padding", 0, o.padding) < 0 ||
      expect_char(in, ',') < 0 || parse_pair(in, "Conv2d dilation", 1, o.dilation) < 0 ||
      expect_char(in, ',') < 0 || parse_int(in, "Conv2d bias flag", 0, &bias) < 0 ||
      expect_char(in, ')') < 0)
    return NULL;
  if (!in->r || bias > 1) {
    err_set(DRV_EINVAL, "model spec: position %d: Conv2d needs %s", pos(in, at),
            in->r ? "a bias flag of 0 or 1" : "an rng to initialise its weights");
    return NULL;
  }
  o.bias = bias == 1;
  return built(in, at, nn_conv2d(a, b, k, &o, in->r));
}

/* MaxPool2d / AvgPool2d (kernel, stride, padding), each n or h:w. */
static nn_module *parse_pool(spec_in *in, const char *at, bool max) {
  int64_t k[2] = {0, 0}, s[2] = {0, 0}, p[2] = {0, 0};
  if (expect_char(in, '(') < 0 || parse_pair(in, "pool kernel size", 1, k) < 0 ||
      expect_char(in, ',') < 0 || parse_pair(in, "pool stride", 1, s) < 0 ||
      expect_char(in, ',') < 0 || parse_pair(in, "pool padding", 0, p) < 0 ||
      expect_char(in, ')') < 0)
    return NULL;
  return built(in, at, max ? nn_maxpool2d(k, s, p) : nn_avgpool2d(k, s, p));
}

static nn_module *parse_embedding(spec_in *in, const char *at) {
  int64_t n = 0, d = 0;
  if (expect_char(in, '(') < 0 || parse_size(in, "Embedding count", &n) < 0 ||
      expect_char(in, ',') < 0 || parse_size(in, "Embedding size", &d) < 0 ||
      expect_char(in, ')') < 0)
    return NULL;
  if (!in->r) {
    err_set(DRV_EINVAL, "model spec: position %d: Embedding needs an rng", pos(in, at));
    return NULL;
  }
  return built(in, at, nn_embedding(n, d, in->r));
}

/* A decimal integer in 0 .. max (up to 2^64-1). */
static int parse_u64(spec_in *in, const char *what, uint64_t max, uint64_t *v) {
  skip_space(in);
  const char *start = in->p;
  uint64_t x = 0;
  if (*in->p < '0' || *in->p > '9') {
    char f[8];
    return err_set(DRV_EPARSE, "model spec: position %d: expected %s (an integer), found %s",
                   pos(in, start), what, found(in, f, sizeof f));
  }
  while (*in->p >= '0' && *in->p <= '9') {
    uint64_t d = (uint64_t)(*in->p++ - '0');
    if (d > max || x > (max - d) / 10)
      return err_set(DRV_ERANGE, "model spec: position %d: %s is larger than %llu",
                     pos(in, start), what, (unsigned long long)max);
    x = x * 10 + d;
  }
  *v = x;
  return 0;
}

/* EmbeddingBag(rows,dim,mode,bags,std,seed), SparseLinear(rows,out,std,seed),
 * SparseEmbedding(rows,dim,std,seed). */
static nn_module *parse_idlayer(spec_in *in, const char *at, nn_idkind kind) {
  nn_idlayer l = {.kind = kind, .o = NN_BAG_DEFAULTS};
  uint64_t mode = 0, bags = 0;
  if (expect_char(in, '(') < 0 || parse_u64(in, "table rows", SPTABLE_MAX_ROWS, &l.rows) < 0 ||
      expect_char(in, ',') < 0 || parse_size(in, "table dim", &l.dim) < 0 ||
      expect_char(in, ',') < 0)
    return NULL;
  if (kind == NN_ID_BAG &&
      (parse_u64(in, "EmbeddingBag mode (0 sum, 1 mean)", 1, &mode) < 0 ||
       expect_char(in, ',') < 0 ||
       parse_u64(in, "EmbeddingBag bags (0 auto, 1 field, 2 all)", 2, &bags) < 0 ||
       expect_char(in, ',') < 0))
    return NULL;
  if (parse_float(in, "a table's std", &l.o.std) < 0 || expect_char(in, ',') < 0 ||
      parse_u64(in, "a table's seed", UINT64_MAX, &l.seed) < 0 || expect_char(in, ')') < 0)
    return NULL;
  l.o.mode = mode ? NN_BAG_MEAN : NN_BAG_SUM;
  l.o.bags = bags == 1 ? NN_BAGS_FIELD : bags == 2 ? NN_BAGS_ALL : NN_BAGS_AUTO;
  return built(in, at, nn_idlayer_new(&l));
}

/* LayerNorm(dim,eps) when bn is 0; BatchNorm<bn>d(channels,eps,momentum). */
static nn_module *parse_norm(spec_in *in, const char *at, int bn) {
  int64_t c = 0;
  float eps = 0.0f, mo = 0.0f;
  if (expect_char(in, '(') < 0 || parse_size(in, "normalisation size", &c) < 0 ||
      expect_char(in, ',') < 0 || parse_float(in, "an eps", &eps) < 0 ||
      (bn && (expect_char(in, ',') < 0 || parse_float(in, "a momentum", &mo) < 0)) ||
      expect_char(in, ')') < 0)
    return NULL;
  return built(in, at, bn ? nn_batch_norm(bn, c, eps, mo) : nn_layer_norm(c, eps));
}

static nn_module *parse_unflatten(spec_in *in, const char *at) {
  int64_t shape[3];
  int n = 0;
  if (expect_char(in, '(') < 0) return NULL;
  for (;;) {
    if (n == 3) {
      err_set(DRV_EPARSE, "model spec: position %d: Unflatten takes at most 3 sizes",
              pos(in, in->p));
      return NULL;
    }
    if (parse_size(in, "Unflatten size", &shape[n++]) < 0) return NULL;
    skip_space(in);
    if (*in->p != ',') break;
    in->p++;
  }
  if (expect_char(in, ')') < 0) return NULL;
  return built(in, at, nn_unflatten(n, shape));
}

static nn_module *parse_layer(spec_in *in, int depth) {
  skip_space(in);
  const char *at = in->p;
  if (depth > SPEC_MAX_DEPTH) {
    err_set(DRV_ERANGE, "model spec: position %d: nested deeper than %d levels", pos(in, at),
            SPEC_MAX_DEPTH);
    return NULL;
  }
  size_t len = 0;
  while ((at[len] >= 'A' && at[len] <= 'Z') || (at[len] >= 'a' && at[len] <= 'z') ||
         (at[len] >= '0' && at[len] <= '9') || at[len] == '_')
    len++;
  in->p = at + len;
  if (len == 0) {
    char f[8];
    in->p = at;
    err_set(DRV_EPARSE, "model spec: position %d: expected a layer name, found %s",
            pos(in, at), found(in, f, sizeof f));
    return NULL;
  }
#define IS(name) (len == strlen(name) && memcmp(at, name, len) == 0)
  if (IS("Linear")) return parse_linear(in, at);
  if (IS("Dropout")) return parse_dropout(in, at);
  if (IS("ReLU")) return built(in, at, nn_relu());
  if (IS("Tanh")) return built(in, at, nn_tanh());
  if (IS("Sigmoid")) return built(in, at, nn_sigmoid());
  if (IS("Softmax")) return built(in, at, nn_softmax());
  if (IS("GELU")) return built(in, at, nn_gelu());
  if (IS("Identity")) return built(in, at, nn_identity());
  if (IS("Flatten")) return built(in, at, nn_flatten());
  if (IS("LeakyReLU")) return parse_leaky(in, at);
  if (IS("Conv2d")) return parse_conv(in, at);
  if (IS("MaxPool2d")) return parse_pool(in, at, true);
  if (IS("AvgPool2d")) return parse_pool(in, at, false);
  if (IS("Unflatten")) return parse_unflatten(in, at);
  if (IS("DotInteraction")) return parse_dot(in, at);
  if (IS("Embedding")) return parse_embedding(in, at);
  if (IS("EmbeddingBag")) return parse_idlayer(in, at, NN_ID_BAG);
  if (IS("SparseLinear")) return parse_idlayer(in, at, NN_ID_LINEAR);
  if (IS("SparseEmbedding")) return parse_idlayer(in, at, NN_ID_EMBEDDING);
  if (IS("LayerNorm")) return parse_norm(in, at, 0);
  if (IS("BatchNorm1d")) return parse_norm(in, at, 1);
  if (IS("BatchNorm2d")) return parse_norm(in, at, 2);
  if (IS("Residual")) {
    if (expect_char(in, '(') < 0) return NULL;
    nn_module *child = parse_layer(in, depth + 1);
    nn_module *res = child ? built(in, at, nn_residual(child)) : NULL;
    nn_unref(child);
    if (res && expect_char(in, ')') < 0) {
      nn_unref(res);
      return NULL;
    }
    return res;
  }
  if (IS("Sequential") || IS("Concat") || IS("Sum")) {
    if (expect_char(in, '(') < 0) return NULL;
    nn_module *seq = built(in, at, IS("Concat") ? nn_concat() : IS("Sum") ? nn_sum() : nn_sequential());
    if (seq && parse_children(in, seq, depth) < 0) {
      nn_unref(seq);
      return NULL;
    }
    return seq;
  }
#undef IS
  err_set(DRV_EPARSE, "model spec: unknown layer '%.*s' at position %d (known: Sequential, Residual, Concat, Sum, "
          "Linear, ReLU, Tanh, Sigmoid, Softmax, Dropout, GELU, LeakyReLU, Identity, Flatten, "
          "Unflatten, Conv2d, MaxPool2d, AvgPool2d, Embedding, LayerNorm, BatchNorm1d, "
          "BatchNorm2d, DotInteraction, EmbeddingBag, SparseLinear, SparseEmbedding)", (int)(len > 64 ? 64 : len), at,
          pos(in, at));
  return NULL;
}

nn_module *nn_from_spec(const char *spec, rng_t *r) {
  if (!spec) {
    err_set(DRV_EINVAL, "nn_from_spec: NULL spec");
    return NULL;
  }
  spec_in in = {spec, spec, r};
  nn_module *m = parse_layer(&in, 0);
  if (!m) return NULL;
  skip_space(&in);
  if (*in.p) {
    err_set(DRV_EPARSE, "model spec: position %d: expected end of spec, found '%c'",
            pos(&in, in.p), *in.p);
    nn_unref(m);
    return NULL;
  }
  return m;
}

/* ============================== losses =================================== */

/* Constructors by type name, in the order the message lists them. */
static const struct {
  const char *name;
  nn_loss *(*make)(void);
} loss_table[] = {
    {"CrossEntropy", nn_cross_entropy},
    {"MSE", nn_mse},
    {"BCEWithLogits", nn_bce_with_logits},
    {"L1", nn_l1},
    {"NLL", nn_nll},
};

int nn_loss_spec(const nn_loss *l, char *buf, size_t n) {
  if (!l || !buf) return err_set(DRV_EINVAL, "nn_loss_spec: NULL argument");
  if (strcmp(l->ops->type, "Huber") == 0 && l->delta != 1.0f)
    return snprintf(buf, n, "Huber(%.9g)", (double)l->delta);
  return snprintf(buf, n, "%s", l->ops->type);
}

/* "Huber" or "Huber(delta)"; NULL with a message on anything else. */
static nn_loss *huber_from_name(const char *name) {
  if (strcmp(name, "Huber") == 0) return nn_huber(1.0f);
  char *end = NULL;
  float d = strtof(name + 6, &end);
  if (strncmp(name, "Huber(", 6) != 0 || end == name + 6 || strcmp(end, ")") != 0) {
    err_set(DRV_EINVAL, "loss '%.64s': expected Huber(delta)", name);
    return NULL;
  }
  return nn_huber(d);
}

nn_loss *nn_loss_from_name(const char *name) {
  if (!name) {
    err_set(DRV_EINVAL, "nn_loss_from_name: NULL name");
    return NULL;
  }
  if (strncmp(name, "Huber", 5) == 0) return huber_from_name(name);
  for (size_t i = 0; i < sizeof loss_table / sizeof loss_table[0]; i++)
    if (strcmp(name, loss_table[i].name) == 0) return loss_table[i].make();
  err_set(DRV_EINVAL, "unknown loss '%.64s' (known: CrossEntropy, MSE, BCEWithLogits, L1, "
          "Huber, NLL)", name);
  return NULL;
}
