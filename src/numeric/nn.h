/* nn.h - layers and losses: forward, backward, parameters and gradients.
 *
 * A module is a refcounted object behind a const ops table (htop-style
 * "classes"). Modules own their parameters, their gradient buffers and
 * their output/grad-input buffers; buffers are reused across calls and
 * resized when the batch size changes, so a training step allocates nothing
 * once warm.
 *
 * Calling convention (all modules, including Sequential):
 *   nn_forward(m, x, &y)      y is owned by m, valid until m's next forward.
 *   nn_backward(m, x, dy, &dx) x must be the same input given to the last
 *                             forward (and still hold the same values); dy
 *                             has y's shape. Parameter gradients are
 *                             ACCUMULATED (+=) into the grad buffers; call
 *                             nn_zero_grad() between steps. dx is owned by m,
 *                             valid until m's next backward. Passing dx ==
 *                             NULL skips computing the input gradient (the
 *                             first layer of a model never needs it).
 * Inputs are [batch, ...]: Linear, Softmax and the losses take 2-D
 * [batch, features]; Conv2d and the pools take 4-D [batch, channels, height,
 * width]; Flatten and Unflatten convert between the two; the element-wise
 * layers take any shape.
 *
 * Losses are means, as PyTorch's default reduction: CrossEntropy over the
 * N rows, MSE and BCEWithLogits over all N*K elements. Targets are float
 * tensors:
 *   CrossEntropy  pred [N, C] logits, target [N] (or [N, 1]) class ids
 *                 0..C-1 (a non-integral or out-of-range id is DRV_ERANGE).
 *   MSE           pred [N, K], target [N, K] (or [N] when K == 1).
 *   BCEWithLogits pred [N, K] logits, target same shape in [0, 1]
 *                 (or [N] when K == 1).
 *
 * A module instance may appear once in one model (it keeps its last output
 * for backward); nn_sequential_add refuses repeats and cycles. Errors from
 * inside a Sequential are prefixed with the layer's position ("layer 2.1:").
 */
#ifndef DROVER_NN_H
#define DROVER_NN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "numeric/rng.h"
#include "numeric/sparse.h"
#include "numeric/tensor.h"

/* ---- parameters -------------------------------------------------------- */

typedef struct nn_param {
  char name[64];  /* "weight", "bias"; qualified "1.weight" when collected */
  tensor *value;  /* owned by the module */
  tensor *grad;   /* same shape as value, owned by the module */
} nn_param;

/* A growable list of borrowed parameter references (the tensors stay owned
 * by their modules; the list must not outlive the model). */
typedef struct nn_param_list {
  nn_param *items;
  int n;
  size_t cap;
} nn_param_list;

void nn_param_list_free(nn_param_list *l);  /* frees items, not tensors */

/* ---- modules ----------------------------------------------------------- */

typedef struct nn_module nn_module;

typedef struct nn_module_ops {
  const char *type; /* "Linear", "ReLU", "Sequential", ... */
  int (*forward)(nn_module *m, const tensor *x, const tensor **y);
  int (*backward)(nn_module *m, const tensor *x, const tensor *dy, const tensor **dx);
  /* Appends a one-line description ("nn.Linear(64 -> 128)"); Sequential
   * appends its multi-line Torch7-style listing indented by `indent`. */
  int (*describe)(const nn_module *m, char *buf, size_t n, int indent);
  void (*destroy)(nn_module *m); /* frees what the module owns beyond the base */
} nn_module_ops;

struct nn_module {
  const nn_module_ops *ops;
  int refs;
  bool training;       /* Dropout is the identity when false */
  nn_param params[2];  /* own parameters (Linear: weight, bias) */
  int nparams;
  /* State that is not trained but saved (PyTorch's buffers): BatchNorm's
   * running_mean, running_var and num_batches_tracked; grad is NULL. */
  nn_param buffers[3];
  int nbuffers;
  float eps, momentum; /* LayerNorm, BatchNorm */
  nn_module **children; /* Sequential only; each holds one reference */
  int nchildren;
  size_t capchildren;
  int nparents;        /* containers holding this one (nn_sequential_add's checks) */
  uint64_t mark;       /* nn_sequential_add's walk: in the tree being added to */
  tensor *out;         /* forward output buffer */
  tensor *dx;          /* input-gradient buffer */
  tensor *mask;        /* Dropout mask */
  int64_t in_features, out_features; /* Linear; Conv2d's channels */
  float p;             /* Dropout probability; LeakyReLU's negative slope */
  /* Conv2d, MaxPool2d, AvgPool2d: {height, width} of the kernel, stride,
   * padding and dilation (pools: dilation 1). */
  int64_t k[2], stride[2], pad[2], dil[2];
  int64_t view[3];     /* Unflatten: the shape of one example */
  int nview;
  tensor *cols;        /* Conv2d: one example's im2col matrix */
  int64_t *argmax;     /* MaxPool2d: the input index of each output */
  size_t capargmax;
  uint32_t *winpos;    /* MaxPool2d 2x2 stride 2: the max's place in each window, 0..3 */
  size_t capwinpos;
  rng_t rng;           /* Dropout */
  const nn_sparse *sparse; /* the batch's ids, set by nn_set_sparse (borrowed) */
  struct nn_sptab *tab;     /* id layers: their table and sparse gradient (nn_sparse.c) */
};

/* Constructors return a module with one reference, or NULL (err_msg()).
 * Linear initialises weight [out, in] and bias [out] uniformly in
 * +-1/sqrt(in) from `r` (PyTorch's default), so a seed fixes the model. */
nn_module *nn_linear(int64_t in, int64_t out, rng_t *r);
nn_module *nn_relu(void);
nn_module *nn_tanh(void);
nn_module *nn_sigmoid(void);
nn_module *nn_softmax(void);         /* row-wise */
nn_module *nn_dropout(float p, uint64_t seed);
nn_module *nn_sequential(void);
nn_module *nn_identity(void);
nn_module *nn_gelu(void);                 /* exact (erf) form, PyTorch's default */
nn_module *nn_leaky_relu(float slope);    /* PyTorch's default slope: 0.01 */
/* [N, d1, d2, ...] -> [N, d1*d2*...] (PyTorch's nn.Flatten()). */
nn_module *nn_flatten(void);
/* [N, prod(shape)] -> [N, shape...], 1 <= ndim <= 3 (PyTorch's
 * nn.Unflatten(1, shape)): e.g. rows of 64 pixels into [N, 1, 8, 8]. */
nn_module *nn_unflatten(int ndim, const int64_t *shape);

/* Conv2d options, each {height, width} as PyTorch's tuples; start from
 * NN_CONV_DEFAULTS (stride 1, padding 0, dilation 1, bias). */
typedef struct nn_conv_opts {
  int64_t stride[2], padding[2], dilation[2];
  bool bias;
} nn_conv_opts;
#define NN_CONV_DEFAULTS ((nn_conv_opts){{1, 1}, {0, 0}, {1, 1}, true})
/* Input [N, in, H, W], output [N, out, OH, OW] with
 * OH = (H + 2 padding[0] - dilation[0] (k[0] - 1) - 1) / stride[0] + 1
 * (OW likewise with index 1); weight [out, in, k[0], k[1]] and bias [out],
 * initialised as PyTorch does (U(+-1/sqrt(in k[0] k[1]))). Computed one
 * example at a time: im2col, then one sgemm for the output, one for the
 * weight gradient and one for the input gradient, in place in the NCHW
 * tensors. */
nn_module *nn_conv2d(int64_t in, int64_t out, const int64_t k[2], const nn_conv_opts *o,
                     rng_t *r);
/* The square case, nn_conv2d(in, out, {k, k}, o, r). */
nn_module *nn_conv2d_square(int64_t in, int64_t out, int64_t k, const nn_conv_opts *o,
                            rng_t *r);
/* kh x kw windows ({height, width} pairs as PyTorch's tuples), stride
 * (NULL or {0, 0}: the kernel) and zero padding (NULL: none; each at most
 * half the kernel's size in its dimension), as PyTorch:
 * [N, C, H, W] -> [N, C, OH, OW], OH = (H + 2 padding[0] - k[0]) / stride[0]
 * + 1 (OW likewise with index 1). MaxPool2d's padding never wins the max;
 * AvgPool2d counts it (PyTorch's count_include_pad=True). The arrays are
 * read during the call only. */
nn_module *nn_maxpool2d(const int64_t k[2], const int64_t stride[2], const int64_t padding[2]);
nn_module *nn_avgpool2d(const int64_t k[2], const int64_t stride[2], const int64_t padding[2]);
/* The square case: k x k, stride (0: k) and padding for both dimensions. */
nn_module *nn_maxpool2d_square(int64_t k, int64_t stride, int64_t padding);
nn_module *nn_avgpool2d_square(int64_t k, int64_t stride, int64_t padding);

/* Input [N, ...] of integral ids in 0..n-1 (as floats; anything else is
 * DRV_ERANGE), output [N, ..., dim]: rows of weight [n, dim], initialised
 * N(0, 1) as PyTorch does. Ids get no gradient (dx is zeros). */
nn_module *nn_embedding(int64_t n, int64_t dim, rng_t *r);
/* Normalises over the last dimension, of size dim, then scales by weight
 * [dim] (ones) and shifts by bias [dim] (zeros): PyTorch's
 * nn.LayerNorm(dim, eps). */
nn_module *nn_layer_norm(int64_t dim, float eps);
/* Per channel over the batch (and length or height x width): BatchNorm1d
 * takes [N, C] or [N, C, L], BatchNorm2d [N, C, H, W]. Training normalises
 * with the batch's statistics and updates the buffers running_mean and
 * running_var (momentum as PyTorch's: new = (1 - m) old + m batch, the
 * variance unbiased) and num_batches_tracked; evaluation uses the running
 * ones. weight [C] (ones) and bias [C] (zeros). */
nn_module *nn_batch_norm(int dims, int64_t channels, float eps, float momentum);

/* Re-initialises the weight and bias of every Linear and Conv2d in m
 * (recursively) with PyTorch's formulas, fan_in = in (x k x k) and
 * fan_out = out (x k x k):
 *   "uniform"  PyTorch's layer default: weight and bias U(+-1/sqrt(fan_in))
 *   "kaiming"  kaiming_uniform_(nonlinearity="relu"): weight
 *              U(+-sqrt(6/fan_in)), bias 0
 *   "xavier"   xavier_uniform_: weight U(+-sqrt(6/(fan_in + fan_out))),
 *              bias 0
 * DRV_EINVAL for another name. */
int nn_init(nn_module *m, const char *how, rng_t *r);
/* Appends child to a Sequential or a Concat, taking a new reference. */
int nn_sequential_add(nn_module *seq, nn_module *child);
bool nn_takes_children(const nn_module *m); /* Sequential or Concat */
/* y = x + m(x); m's output must have x's shape. Takes a reference to m,
 * its only child (PyTorch names its parameters "0.weight", ...). */
nn_module *nn_residual(nn_module *m);
/* Torch7's nn.Concat(2): every child gets the same input; their outputs,
 * [N, a, ...], [N, b, ...] equal but in dimension 1, are concatenated into
 * [N, a + b + ..., ...]. Children are added with nn_sequential_add. */
nn_module *nn_concat(void);
/* Every child gets the same input; their outputs, of one shape, are added
 * (Torch7's ConcatTable + CAddTable): a wide and a deep part into one
 * logit. Children are added with nn_sequential_add. */
nn_module *nn_sum(void);
/* DLRM's dot interaction: x [N, fields*d] read as `fields` vectors of d;
 * y [N, fields(fields-1)/2], the dot products of pairs (i, j), j < i, in
 * the order (1,0), (2,0), (2,1), (3,0)... (DLRM's); keep_first puts
 * vector 0 in front, as DLRM keeps its dense part: [N, d + ...]. fields in
 * 2..4096. No parameters (nn_interact.c). */
nn_module *nn_dot_interaction(int64_t fields, bool keep_first);

nn_module *nn_ref(nn_module *m);  /* returns m */
void nn_unref(nn_module *m);      /* NULL is fine */

int nn_forward(nn_module *m, const tensor *x, const tensor **y);
int nn_backward(nn_module *m, const tensor *x, const tensor *dy, const tensor **dx);
void nn_set_training(nn_module *m, bool training); /* recursive */
void nn_zero_grad(nn_module *m);                   /* recursive */
/* Hands the batch's sparse input (sparse.h; NULL: none) to every module
 * of the tree, for the layers that read ids. Borrowed until the backward
 * after the next forward has returned. */
void nn_set_sparse(nn_module *m, const nn_sparse *sp);  /* recursive */

/* Appends m's parameters (recursively, in order) to `out`, names qualified
 * Torch7-style by 1-based child position: "1.weight", "3.bias". */
int nn_collect_params(nn_module *m, nn_param_list *out);
int64_t nn_num_params(nn_module *m);

/* Writes the Torch7-style description of m into buf (truncated to n);
 * returns the length it needed, like snprintf. */
int nn_describe(const nn_module *m, char *buf, size_t n);

/* ---- losses ------------------------------------------------------------ */

typedef struct nn_loss nn_loss;

typedef struct nn_loss_ops {
  const char *type; /* "CrossEntropy", "MSE", "BCEWithLogits" */
  /* Mean loss over the batch into *loss. */
  int (*forward)(nn_loss *l, const tensor *pred, const tensor *target, float *loss);
  /* d(mean loss)/d(pred) into a buffer owned by l, valid until the next call. */
  int (*backward)(nn_loss *l, const tensor *pred, const tensor *target, const tensor **dpred);
} nn_loss_ops;

struct nn_loss {
  const nn_loss_ops *ops;
  int refs;
  tensor *grad;    /* dpred buffer */
  tensor *scratch; /* e.g. softmax probabilities */
  float delta;     /* Huber */
};

nn_loss *nn_cross_entropy(void);
nn_loss *nn_mse(void);
nn_loss *nn_bce_with_logits(void);
/* Mean absolute error; pred and target as MSE's. */
nn_loss *nn_l1(void);
/* Mean of 0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta), with
 * d = pred - target (PyTorch's HuberLoss); shapes as MSE's. delta > 0. */
nn_loss *nn_huber(float delta);
/* Negative log-likelihood: pred [N, C] log-probabilities (a LogSoftmax's
 * output), target as CrossEntropy's; the mean of -pred[i, target_i]. */
nn_loss *nn_nll(void);
nn_loss *nn_loss_ref(nn_loss *l);
void nn_loss_unref(nn_loss *l);

int nn_loss_forward(nn_loss *l, const tensor *pred, const tensor *target, float *loss);
int nn_loss_backward(nn_loss *l, const tensor *pred, const tensor *target, const tensor **dpred);

/* Number of correct predictions in the batch, for classification losses:
 * CrossEntropy and NLL compare the row argmax with the class id, BCEWithLogits
 * counts a row correct when every (logit > 0) matches (target > 0.5).
 * Returns -1 for MSE, L1 and Huber (accuracy does not apply), another negative code on
 * bad input. */
int64_t nn_loss_correct(const nn_loss *l, const tensor *pred, const tensor *target);

/* ---- specs: a model's architecture as text, to rebuild it elsewhere ---- */

/* Writes m's architecture (no parameter values) into buf, e.g.
 * "Sequential(Linear(64,128),ReLU,Dropout(0.5),Linear(128,10))"; returns
 * the length needed, like snprintf. Dropout's p is printed exactly (%.9g). */
int nn_spec(const nn_module *m, char *buf, size_t n);
/* Builds a fresh model from a spec (weights initialised from r; the
 * caller then overwrites them). NULL with a message naming the position of
 * a syntax error or an unknown layer. Dropout layers are seeded from r. */
nn_module *nn_from_spec(const char *spec, rng_t *r);
/* Writes l's name as nn_loss_from_name takes it: the type, with Huber's
 * delta when it is not 1 ("Huber(0.5)"); returns the length, as snprintf. */
int nn_loss_spec(const nn_loss *l, char *buf, size_t n);
/* Loss by its type name ("CrossEntropy", "MSE", "BCEWithLogits", "L1",
 * "NLL", "Huber" or "Huber(delta)"). */
nn_loss *nn_loss_from_name(const char *name);

/* ---- files: parameters in safetensors, named as PyTorch names them ---- */

/* What a cluster keeps on its ps: m's parameters in nn_collect_params
 * order (*ntrained of them), then its running statistics (BatchNorm's
 * running_mean and running_var, whose grad is NULL), named as
 * nn_collect_params (Torch7) or nn_torch_params (torch_names) names them.
 * Tensors are borrowed from m. */
int nn_collect_synced(nn_module *m, bool torch_names, nn_param_list *out, int *ntrained);
/* Appends m's parameters in nn_collect_params order, named as PyTorch's
 * state_dict names the same model: 0-based child positions ("0.weight",
 * "2.bias", "1.0.weight" inside a nested Sequential; a lone Linear's are
 * "weight" and "bias"). Linear's weight is [out, in] in both. Tensors are
 * borrowed from m, as with nn_collect_params. */
int nn_torch_params(nn_module *m, nn_param_list *out);
/* nn_torch_params, each module's buffers after its parameters (as in
 * PyTorch's state_dict: "1.running_mean"): what files hold. */
int nn_torch_state(nn_module *m, nn_param_list *out);
/* Writes m's parameters to a safetensors file at path (atomically: see
 * safetensors_write), with its spec in the metadata under
 * NN_SPEC_META_KEY and "format": "pt", so that PyTorch's load_state_dict
 * takes the file and nn_load rebuilds the model from it alone. */
#define NN_SPEC_META_KEY "drover.spec"
int nn_save(nn_module *m, const char *path);
/* nn_save with each sparse table written dense (nn_tabfile.h: NAME as
 * [rows, dim], PyTorch's nn.EmbeddingBag weight): `drover export`.
 * DRV_ERANGE, with the table's size, when one needs more than max_bytes. */
int nn_save_dense(nn_module *m, const char *path, size_t max_bytes);
/* Loads a safetensors file's values into m's parameters and buffers. As
 * PyTorch's strict load_state_dict: every one must be in the file with its
 * shape, and the file must hold nothing else; otherwise m is left
 * unchanged and the message names the file and the first mismatch. */
int nn_load_params(nn_module *m, const char *path);
/* Rebuilds a model from a file nn_save wrote (its spec, then its values);
 * r seeds what the spec needs (Dropout streams; Linear's initial values,
 * then overwritten). A file without a spec (written by PyTorch) is
 * DRV_EUNSUPPORTED: build the model and use nn_load_params. The caller
 * owns the returned reference; NULL on error. */
nn_module *nn_load(const char *path, rng_t *r);

#endif
