/* mambarl policy-plugin ABI (C, versioned).
 *
 * A plugin is a shared library exporting one function, MAMBARL_PLUGIN_ENTRY
 * ("mambarl_plugin_register"). The host calls it with its ABI version and a
 * registry; the plugin refuses a version it was not built for, and otherwise
 * registers named policy factories. Everything crosses as plain C: opaque
 * handles, function tables whose first field is the ABI version, tensors as
 * views (pointer, dtype, device, shape). Errors never unwind across the
 * boundary: functions return a status and the handle's last_error() says why.
 *
 * Bump MAMBARL_PLUGIN_ABI_VERSION on any change to a struct or signature here.
 */
#ifndef MAMBARL_PLUGIN_H
#define MAMBARL_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MAMBARL_PLUGIN_ABI_VERSION 9u  /* 2: env factories; 3: dtype in create args, MAMBARL_UNSUPPORTED;
                                          4: split-phase and device-enqueued actor steps, device chunks;
                                          5: peeks take the envs whose value is needed;
                                          6: load_weights (exported files), greedy actors;
                                          7: chunks with loss-free context steps; data-parallel learners
                                             (collective in create args, actor_create's first_env,
                                             empty train chunks);
                                          8: the collective's device sums (sum_f64_device; sum_gradient
                                             on a device view), for a data-parallel GPU learner;
                                          9: vf_trunk_coef in the learner config */
#define MAMBARL_PLUGIN_ENTRY "mambarl_plugin_register"

#if defined(__GNUC__)
#define MAMBARL_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define MAMBARL_PLUGIN_EXPORT
#endif

typedef int32_t mambarl_status; /* 0 = ok; otherwise see last_error() */
#define MAMBARL_OK 0
#define MAMBARL_ERROR 1
/* From probe() only: this policy type has no engine for that device at all,
 * on any machine (a config error), as opposed to MAMBARL_ERROR: this machine
 * cannot run it now (no usable GPU, a build without CUDA), where a host may
 * fall back to the CPU. */
#define MAMBARL_UNSUPPORTED 2

enum { MAMBARL_DTYPE_F32 = 0, MAMBARL_DTYPE_U8 = 1 };
enum { MAMBARL_DEVICE_CPU = 0, MAMBARL_DEVICE_CUDA = 1 };

/* A view of memory the caller owns. shape[0..ndim-1], row-major, contiguous. */
typedef struct mambarl_tensor {
  void* data;
  int32_t dtype;
  int32_t device;
  int32_t ndim;
  int64_t shape[4];
} mambarl_tensor;

/* What the environment looks like to the policy. */
typedef struct mambarl_env_info {
  int32_t obs_dim;
  int32_t discrete;   /* 1: categorical head over action_dim actions; 0: Gaussian over action_dim dims */
  int32_t action_dim;
} mambarl_env_info;

/* Learner hyper-parameters the runner resolved from the `algo:` section. */
typedef struct mambarl_learner_config {
  double clip_eps, vf_coef, ent_coef;
  int32_t normalize_advantages;
  double adam_beta1, adam_beta2, adam_eps, weight_decay, max_grad_norm;
  /* ABI 9: the share of the value loss's gradient that reaches the layers the
   * value head shares with the policy head, in [0, 1] (1: all of it). */
  double vf_trunk_coef;
} mambarl_learner_config;

/* Data-parallel training (ABI 7): `size` processes ("ranks") each train a
 * replica of the policy on their share of the envs, and the learner sums
 * across them through these callbacks, so that every replica takes the same
 * step as one learner on all the envs would (plugin/DESIGN.md "Data-parallel
 * training"). Every rank makes the same calls in the same order; a host call
 * returns when the sum is on every rank. The runner owns the transport (MPI
 * on the host, NCCL on the device); the plugin never links either.
 * A device call (ABI 8: sum_f64_device, sum_gradient on a device view) only
 * ENQUEUES the sum on `stream` (a cudaStream_t), without host
 * synchronisation or allocation, so a GPU learner may capture it into its
 * CUDA graph and replay it; the sum is done when the stream gets there. */
typedef struct mambarl_collective {
  int32_t rank, size;
  void* ctx;
  /* In-place sum of n host doubles (loss statistics, token counts). */
  mambarl_status (*sum_f64)(void* ctx, double* data, int64_t n);
  /* In-place sum of the flat gradient, (num_params) f32 on the learner's
   * device; `stream` is the cudaStream_t to enqueue on for a device view
   * (a device-side transport such as NCCL), NULL for host memory. */
  mambarl_status (*sum_gradient)(void* ctx, mambarl_tensor grad, void* stream);
  const char* (*last_error)(void* ctx);
  /* ABI 8: in-place sum of n doubles in device memory, enqueued on `stream`
   * (advantage statistics and loss sums of a GPU learner). NULL when the
   * transport sums host memory only (then sum_gradient refuses device
   * views too, and a GPU learner refuses the collective). */
  mambarl_status (*sum_f64_device)(void* ctx, double* data, int64_t n, void* stream);
} mambarl_collective;

typedef struct mambarl_policy_create_args {
  const char* config_text;       /* the whole experiment YAML, as read from config_file */
  const char* config_file;       /* its path, for error messages */
  const char* const* overrides;  /* "a.b=c" command-line overrides, applied after the file */
  int32_t num_overrides;
  mambarl_env_info env;
  mambarl_learner_config learner;
  uint64_t seed;
  const char* device;            /* "cpu" or "cuda": where the policy's engines run (runtime.device) */
  const char* dtype;             /* "float32" or "bfloat16": the actor's weights (runtime.dtype);
                                    state and accumulation stay float32 */
  const mambarl_collective* collective; /* NULL: this process trains alone (ABI 7) */
} mambarl_policy_create_args;

/* One training chunk of B sequences of T steps (plugin/DESIGN.md "The plugin ABI").
 * The loss covers the last L <= T steps (L from actions' shape); since ABI 7
 * the T - L steps before them are context: they carry the recurrent state and
 * the gradient of the later steps' loss through it, and add no loss terms
 * (truncated BPTT longer than the rollout chunk, algo.bptt_len).
 * With a collective of size > 1, B may be 0 (this rank owns none of the
 * minibatch's sequences): the call still joins the ranks' sums (ABI 7).
 * Since ABI 4 the views may all be on MAMBARL_DEVICE_CUDA when the policy's
 * learner runs on the GPU (no host round trip; train_step still returns
 * only when the update is done). Mixed devices within one chunk are refused. */
typedef struct mambarl_chunk {
  mambarl_tensor obs;            /* (T, B, obs_dim) f32 */
  mambarl_tensor actions;        /* (L, B, act_width) f32; act_width = 1 for discrete */
  mambarl_tensor old_logp;       /* (L, B) f32 */
  mambarl_tensor advantages;     /* (L, B) f32 */
  mambarl_tensor returns;        /* (L, B) f32 */
  mambarl_tensor episode_start;  /* (T, B) u8 */
  mambarl_tensor initial_state;  /* (B, state_size) f32: the state each sequence started with */
} mambarl_chunk;

typedef struct mambarl_train_metrics {
  double loss, pg_loss, v_loss, entropy, approx_kl, clip_frac, grad_norm;
  int32_t skipped; /* 1 when the update was refused (non-finite loss or gradient) */
} mambarl_train_metrics;

typedef struct mambarl_policy_info {
  int64_t num_params;   /* floats in the flat weight buffer */
  int64_t state_size;   /* recurrent floats per env, all layers */
  int32_t act_width;
  const char* type;     /* "mamba1", ... */
} mambarl_policy_info;

typedef struct mambarl_policy mambarl_policy; /* learner: parameters + optimizer */
typedef struct mambarl_actor mambarl_actor;   /* rollout: one recurrent state per env */

typedef struct mambarl_policy_vtable {
  uint32_t abi_version; /* MAMBARL_PLUGIN_ABI_VERSION */

  void (*destroy)(mambarl_policy* p);
  const char* (*last_error)(const mambarl_policy* p);
  mambarl_status (*info)(mambarl_policy* p, mambarl_policy_info* out);
  const char* (*resolved_config)(mambarl_policy* p); /* YAML of the policy section, defaults filled */

  /* When out->skipped is set the call still returns MAMBARL_OK, and
   * last_error() says which quantity was not finite. */
  mambarl_status (*train_step)(mambarl_policy* p, const mambarl_chunk* chunk, double lr,
                               mambarl_train_metrics* out);
  mambarl_status (*get_weights)(mambarl_policy* p, mambarl_tensor weights /* (num_params) f32 */);
  mambarl_status (*set_weights)(mambarl_policy* p, mambarl_tensor weights);
  /* Checkpoint: weights, optimizer moments and step, resolved config, plus the
   * caller's metadata (JSON object of string values) and extra named f32/u8
   * tensors, whose names must start with "runner.". */
  mambarl_status (*save)(mambarl_policy* p, const char* path, const char* metadata_json,
                         const char* const* extra_names, const mambarl_tensor* extra, int32_t n_extra);
  /* Loads a checkpoint written by save(); on failure the policy is unchanged.
   * on_extra (may be NULL) is called once per extra tensor (name and view valid
   * during the call), then once more with name == NULL and t == NULL, so that
   * the metadata (a JSON object of strings, the same text in every call)
   * arrives even when there are no extra tensors. */
  mambarl_status (*load)(mambarl_policy* p, const char* path,
                         void (*on_extra)(void* ctx, const char* name, const mambarl_tensor* t,
                                          const char* metadata_json),
                         void* ctx);

  /* Env b of the actor samples from the stream that env first_env + b of a
   * whole-batch actor of the same seed would (ABI 7): a rank owning envs
   * [first_env, first_env + num_envs) of a data-parallel run acts as the
   * one-process run does for them. */
  mambarl_status (*actor_create)(mambarl_policy* p, int32_t num_envs, uint64_t seed, int64_t first_env,
                                 mambarl_actor** out);
  void (*actor_destroy)(mambarl_actor* a);
  const char* (*actor_last_error)(const mambarl_actor* a);
  /* Zeroes the recurrent state of every env with mask[b] != 0. mask: (B) u8 */
  mambarl_status (*actor_reset)(mambarl_actor* a, mambarl_tensor mask);
  /* One step: reset envs with episode_start[b], step the model, sample.
   * obs (B, obs_dim) f32, episode_start (B) u8 -> actions (B, act_width), logp (B), values (B) f32 */
  mambarl_status (*actor_act)(mambarl_actor* a, mambarl_tensor obs, mambarl_tensor episode_start,
                              mambarl_tensor actions, mambarl_tensor logp, mambarl_tensor values);
  /* V(obs) from the current state, leaving the state unchanged (bootstrap on truncation).
   * needed (B) u8 on obs's device: values[b] is wanted where needed[b] != 0,
   * the others are left unspecified (finite), so an engine may skip them; a
   * view with data NULL and ndim 0 stands for every env. */
  mambarl_status (*actor_peek_values)(mambarl_actor* a, mambarl_tensor obs, mambarl_tensor needed,
                                      mambarl_tensor values);
  mambarl_status (*actor_get_state)(mambarl_actor* a, mambarl_tensor state /* (B, state_size) f32 */);
  mambarl_status (*actor_set_state)(mambarl_actor* a, mambarl_tensor state);
  mambarl_status (*actor_set_weights)(mambarl_actor* a, mambarl_tensor weights, int64_t version);
  /* The actor's sampling RNG, as opaque bytes, so a resumed run continues bit-exactly. */
  mambarl_status (*actor_get_rng)(mambarl_actor* a, mambarl_tensor bytes /* (n) u8 */);
  mambarl_status (*actor_set_rng)(mambarl_actor* a, mambarl_tensor bytes);
  int64_t (*actor_rng_size)(const mambarl_actor* a);

  /* ---- overlapping the actor with CPU envs (ABI 4) ---------------------------
   * actor_act split in two: begin starts the step on the given host views and
   * returns as soon as the work is queued (a GPU actor: copies and kernels
   * enqueued on its own stream; a CPU actor may do the whole step here); end
   * waits for it and writes the outputs. While a step is begun, the caller
   * may step envs but must not touch `obs` / `episode_start` or call any other
   * function of this actor; end must follow every successful begin. */
  mambarl_status (*actor_act_begin)(mambarl_actor* a, mambarl_tensor obs, mambarl_tensor episode_start);
  mambarl_status (*actor_act_end)(mambarl_actor* a, mambarl_tensor actions, mambarl_tensor logp,
                                  mambarl_tensor values);

  /* ---- device-resident rollouts (ABI 4) ---------------------------------------
   * For an actor whose engine runs on a GPU: the work of actor_act,
   * actor_peek_values and actor_get_state on views with device ==
   * MAMBARL_DEVICE_CUDA, ENQUEUED on the caller's CUDA stream (`stream` is a
   * cudaStream_t) without host synchronisation and without allocating, so a
   * caller may capture a sequence of these calls into its own CUDA graph and
   * replay it. The caller's views must stay valid while such a graph exists.
   * An actor on the CPU returns MAMBARL_UNSUPPORTED (last_error says why). */
  mambarl_status (*actor_enqueue_act)(mambarl_actor* a, void* stream, mambarl_tensor obs,
                                      mambarl_tensor episode_start, mambarl_tensor actions,
                                      mambarl_tensor logp, mambarl_tensor values);
  mambarl_status (*actor_enqueue_peek_values)(mambarl_actor* a, void* stream, mambarl_tensor obs,
                                              mambarl_tensor needed, mambarl_tensor values);
  mambarl_status (*actor_enqueue_get_state)(mambarl_actor* a, void* stream,
                                            mambarl_tensor state /* (B, state_size) f32 */);

  /* ---- evaluation (ABI 6) ------------------------------------------------------
   * load_weights: the parameters alone, by name, from a checkpoint or a file
   * written by `mambarl export` (whose policy_config metadata must be this
   * policy's resolved config); the optimizer state is left as it is. On
   * failure the policy is unchanged. Actors created later start from them.
   * actor_set_greedy: greedy != 0 makes actor_act / actor_act_end take the
   * distribution's mode (argmax of the logits; a Gaussian's mean) instead of
   * sampling; an engine without it answers MAMBARL_UNSUPPORTED. */
  mambarl_status (*load_weights)(mambarl_policy* p, const char* path);
  mambarl_status (*actor_set_greedy)(mambarl_actor* a, int32_t greedy);
} mambarl_policy_vtable;

/* A named factory. probe() may refuse a device: MAMBARL_ERROR when this
 * machine cannot run it (e.g. "cuda" asked, no GPU), MAMBARL_UNSUPPORTED when
 * this policy type never can; either way it writes the reason into `why`
 * (NUL-terminated, at most why_len bytes). */
typedef struct mambarl_policy_factory {
  uint32_t abi_version;
  const char* name;
  const char* description;
  const mambarl_policy_vtable* vtable;
  mambarl_status (*create)(const mambarl_policy_create_args* args, mambarl_policy** out,
                           char* error, size_t error_len);
  mambarl_status (*probe)(const char* device, char* why, size_t why_len);
} mambarl_policy_factory;

/* ---- environments a plugin adds ------------------------------------------
 * A vectorised env of B copies with Gymnasium auto-reset semantics (see
 * envs/vec_env.hpp, which the host wraps it in). The env owns every buffer;
 * the pointers in mambarl_env_desc stay valid for its lifetime and their
 * contents are refreshed by reset() and step(). */
typedef struct mambarl_env mambarl_env;

typedef struct mambarl_env_desc {
  int32_t obs_dim;
  int32_t discrete;            /* 1: actions are integers in [0, action_dim) sent as floats */
  int32_t action_dim;
  int32_t max_episode_steps;   /* 0: none */
  const float* obs_low;        /* (obs_dim) */
  const float* obs_high;       /* (obs_dim) */
  const float* obs;            /* (B, obs_dim): after an auto-reset, the new episode's first */
  const float* final_obs;      /* (B, obs_dim): the stepped episode's last obs */
  const float* reward;         /* (B) */
  const uint8_t* terminated;   /* (B) */
  const uint8_t* truncated;    /* (B) */
  const float* episode_return; /* (B): of the episode that just ended, where done */
  const int32_t* episode_length;
} mambarl_env_desc;

typedef struct mambarl_env_factory {
  uint32_t abi_version; /* MAMBARL_PLUGIN_ABI_VERSION */
  const char* name;     /* the `env.type` it answers to */
  const char* description;
  /* env_yaml: the experiment's `env:` map as YAML text; keys other than
   * `type` and `num_envs` are the env's own (unknown ones must be refused). */
  mambarl_status (*create)(const char* env_yaml, int32_t num_envs, mambarl_env** out,
                           mambarl_env_desc* desc, char* error, size_t error_len);
  void (*destroy)(mambarl_env* e);
  const char* (*last_error)(const mambarl_env* e);
  mambarl_status (*reset)(mambarl_env* e, uint64_t seed); /* env b uses the stream (seed, b) */
  mambarl_status (*step)(mambarl_env* e, const float* actions /* (B, act_width) */);
  mambarl_status (*render)(const mambarl_env* e, int32_t env, char* text, size_t text_len);
  /* The whole state as bytes, for bit-exact resume. */
  int64_t (*state_size)(const mambarl_env* e);
  mambarl_status (*save_state)(const mambarl_env* e, uint8_t* out, int64_t n);
  mambarl_status (*load_state)(mambarl_env* e, const uint8_t* in, int64_t n);
} mambarl_env_factory;

typedef struct mambarl_registry {
  uint32_t abi_version;
  void* host;
  /* Each returns MAMBARL_ERROR on a duplicate name or an ABI mismatch in `f`. */
  mambarl_status (*register_policy)(void* host, const mambarl_policy_factory* f);
  mambarl_status (*register_env)(void* host, const mambarl_env_factory* f);
} mambarl_registry;

/* The one exported symbol. Returns MAMBARL_ERROR (and registers nothing) if
 * host_abi_version is not the version the plugin was built with. */
typedef mambarl_status (*mambarl_plugin_register_fn)(uint32_t host_abi_version,
                                                     const mambarl_registry* registry);

#ifdef __cplusplus
}
#endif

#endif /* MAMBARL_PLUGIN_H */
