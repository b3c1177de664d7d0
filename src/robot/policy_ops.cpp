// Backend dispatch of the robot-policy kernels (see policy_ops.h). The CPU path copies the params
// into the stream's closure (frost_launch_host copies args), so callers may pass stack structs.
#include "robot/policy_ops.h"

#include "exec/error.h"
#include "kernels/cpu/policy_kernels.h"
#ifdef FROST_WITH_CUDA
#include "kernels/cuda/policy_kernels.h"
#endif

namespace frost::robot {

namespace {

template <class P, void (*Cpu)(const P&)>
frost_status host_trampoline(const void* args) {
    Cpu(*static_cast<const P*>(args));
    return FROST_OK;
}

using kernels::PolicyActParams;
using kernels::PolicyAxpyParams;
using kernels::PolicyCounterParams;
using kernels::PolicyLinearParams;
using kernels::PolicyNoiseParams;
using kernels::PolicyRmsNormParams;
using kernels::PolicyTimeEmbedParams;

#ifdef FROST_WITH_CUDA
template <class P>
using CudaLauncher = int (*)(const P&, void*);
#endif

template <class P, void (*Cpu)(const P&)>
frost_status enqueue(frost_stream* s, const P& p, const char* what,
#ifdef FROST_WITH_CUDA
                     CudaLauncher<P> cuda
#else
                     const void* /*no cuda*/
#endif
) {
    if (!s) return fail(FROST_ERR_INVALID_ARG, "%s: null stream", what);
    const frost_backend backend = frost_ctx_backend(frost_stream_ctx(s));
    if (backend == FROST_BACKEND_CPU) return frost_launch_host(s, &host_trampoline<P, Cpu>, &p, sizeof p);
#ifdef FROST_WITH_CUDA
    const int err = cuda(p, frost_stream_native(s));
    if (err != 0)
        return fail(FROST_ERR_BACKEND, "%s: CUDA launch failed: %s", what,
                    kernels::policy_cuda_error_string(err));
    return FROST_OK;
#else
    return fail(FROST_ERR_UNSUPPORTED, "%s: this build has no CUDA kernels", what);
#endif
}

#ifdef FROST_WITH_CUDA
#define FROST_POLICY_CUDA(fn) &kernels::fn
#else
#define FROST_POLICY_CUDA(fn) nullptr
#endif

}  // namespace

frost_status enqueue_linear(frost_stream* s, const PolicyLinearParams& p) {
    if (!p.x || !p.w || !p.y || p.rows < 0 || p.in <= 0 || p.out <= 0)
        return fail(FROST_ERR_INVALID_ARG, "policy linear: bad params (rows %d, in %d, out %d)",
                    p.rows, p.in, p.out);
    return enqueue<PolicyLinearParams, kernels::policy_linear_cpu>(
        s, p, "policy linear", FROST_POLICY_CUDA(policy_linear_cuda));
}

frost_status enqueue_rmsnorm(frost_stream* s, const PolicyRmsNormParams& p) {
    if (!p.x || !p.g || !p.y || p.rows < 0 || p.dim <= 0)
        return fail(FROST_ERR_INVALID_ARG, "policy rmsnorm: bad params (dim %d)", p.dim);
    return enqueue<PolicyRmsNormParams, kernels::policy_rmsnorm_cpu>(
        s, p, "policy rmsnorm", FROST_POLICY_CUDA(policy_rmsnorm_cuda));
}

frost_status enqueue_act(frost_stream* s, const PolicyActParams& p) {
    if (!p.x || p.n < 0) return fail(FROST_ERR_INVALID_ARG, "policy act: bad params");
    return enqueue<PolicyActParams, kernels::policy_act_cpu>(s, p, "policy act",
                                                             FROST_POLICY_CUDA(policy_act_cuda));
}

frost_status enqueue_time_embed(frost_stream* s, const PolicyTimeEmbedParams& p) {
    if (!p.out || p.dim <= 0 || p.dim % 2 != 0 || !(p.max_period > 0.0f))
        return fail(FROST_ERR_INVALID_ARG,
                    "policy time embedding: dim must be even and positive, got %d", p.dim);
    return enqueue<PolicyTimeEmbedParams, kernels::policy_time_embed_cpu>(
        s, p, "policy time embedding", FROST_POLICY_CUDA(policy_time_embed_cuda));
}

frost_status enqueue_axpy(frost_stream* s, const PolicyAxpyParams& p) {
    if (!p.x || !p.v || p.n < 0) return fail(FROST_ERR_INVALID_ARG, "policy axpy: bad params");
    return enqueue<PolicyAxpyParams, kernels::policy_axpy_cpu>(s, p, "policy axpy",
                                                               FROST_POLICY_CUDA(policy_axpy_cuda));
}

frost_status enqueue_noise(frost_stream* s, const PolicyNoiseParams& p) {
    if (!p.out || !p.rng || p.n < 0) return fail(FROST_ERR_INVALID_ARG, "policy noise: bad params");
    return enqueue<PolicyNoiseParams, kernels::policy_noise_cpu>(
        s, p, "policy noise", FROST_POLICY_CUDA(policy_noise_cuda));
}

frost_status enqueue_counter(frost_stream* s, const PolicyCounterParams& p) {
    if (!p.rng) return fail(FROST_ERR_INVALID_ARG, "policy counter: null rng");
    return enqueue<PolicyCounterParams, kernels::policy_counter_cpu>(
        s, p, "policy counter", FROST_POLICY_CUDA(policy_counter_cuda));
}

frost_status upload(frost_buffer* dst, size_t dst_off, const void* src, size_t bytes,
                    frost_stream* s) {
    if (bytes == 0) return FROST_OK;
    if (!dst || !src || !s) return fail(FROST_ERR_INVALID_ARG, "upload: null argument");
    frost_buffer* wrap = nullptr;
    FROST_TRY(frost_buffer_wrap(frost_buffer_ctx(dst), "robot.upload", const_cast<void*>(src),
                                bytes, FROST_SPACE_HOST, &wrap));
    frost_status st = frost_buffer_copy(dst, dst_off, wrap, 0, bytes, s);
    const frost_status sync = frost_stream_sync(s);
    frost_buffer_free(wrap);
    return st != FROST_OK ? st : sync;
}

frost_status download(void* dst, const frost_buffer* src, size_t src_off, size_t bytes,
                      frost_stream* s) {
    if (bytes == 0) return FROST_OK;
    if (!dst || !src || !s) return fail(FROST_ERR_INVALID_ARG, "download: null argument");
    frost_buffer* wrap = nullptr;
    FROST_TRY(frost_buffer_wrap(frost_buffer_ctx(src), "robot.download", dst, bytes,
                                FROST_SPACE_HOST, &wrap));
    frost_status st = frost_buffer_copy(wrap, 0, src, src_off, bytes, s);
    const frost_status sync = frost_stream_sync(s);
    frost_buffer_free(wrap);
    return st != FROST_OK ? st : sync;
}

}  // namespace frost::robot
