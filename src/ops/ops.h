// Op dispatch: the only way model code launches a kernel. `op_<name>(stream, params)` enqueues
// the kernel on the stream (or into the graph being captured on it): on the CPU backend through
// frost_launch_host with the params copied by value, on CUDA through the launcher registered in
// the CUDA op table (ops/cuda_table.cpp); until a CUDA launcher exists the op fails with
// FROST_ERR_UNSUPPORTED naming it. Params are checked here, once, at record time.
#pragma once
#include "frost/exec.h"
#include "kernels/params.h"
#include "kernels/params/moe.h"

namespace frost::ops {

using namespace frost::kernels;  // params structs are the op vocabulary

// Work of one launch at its row capacity, for benches (performance.md: bytes and FLOPs are part
// of a kernel's contract). Accumulated into *cost when the caller passes one.
struct OpCost {
    double flops = 0;
    double bytes = 0;
    void add(const OpCost& o) { flops += o.flops; bytes += o.bytes; }
};

frost_status op_embed(frost_stream* s, const EmbedParams& p, OpCost* cost = nullptr);
frost_status op_rmsnorm(frost_stream* s, const RmsNormParams& p, OpCost* cost = nullptr);
frost_status op_gated_rmsnorm(frost_stream* s, const GatedRmsNormParams& p, OpCost* cost = nullptr);
frost_status op_gemm(frost_stream* s, const GemmParams& p, OpCost* cost = nullptr);
frost_status op_conv1d(frost_stream* s, const Conv1dParams& p, OpCost* cost = nullptr);
frost_status op_l2norm(frost_stream* s, const L2NormParams& p, OpCost* cost = nullptr);
frost_status op_gdn_gates(frost_stream* s, const GdnGateParams& p, OpCost* cost = nullptr);
frost_status op_gdn_chunked(frost_stream* s, const GdnParams& p, OpCost* cost = nullptr);
frost_status op_gdn_recurrent(frost_stream* s, const GdnParams& p, OpCost* cost = nullptr);
frost_status op_rope(frost_stream* s, const RopeParams& p, OpCost* cost = nullptr);
frost_status op_kv_append(frost_stream* s, const KvAppendParams& p, OpCost* cost = nullptr);
frost_status op_attention(frost_stream* s, const AttentionParams& p, OpCost* cost = nullptr);
frost_status op_swiglu(frost_stream* s, const SwigluParams& p, OpCost* cost = nullptr);
frost_status op_sample(frost_stream* s, const SampleParams& p, OpCost* cost = nullptr);
frost_status op_cursor(frost_stream* s, const CursorParams& p, OpCost* cost = nullptr);
// Sparse MoE MLP with fused residual add (params/moe.h). CPU only for now: on CUDA it fails
// with FROST_ERR_UNSUPPORTED until the lm_moe.cu launchers are wired into a table slot.
frost_status op_moe(frost_stream* s, const MoeParams& p, OpCost* cost = nullptr);

// CUDA launchers: one slot per op, taking the native cudaStream_t. The CUDA-kernels engineer
// fills the table in cuda_table.cpp under FROST_WITH_CUDA; a null slot makes the op UNSUPPORTED.
struct CudaOpTable {
    frost_status (*embed)(void* stream, const EmbedParams&) = nullptr;
    frost_status (*rmsnorm)(void* stream, const RmsNormParams&) = nullptr;
    frost_status (*gated_rmsnorm)(void* stream, const GatedRmsNormParams&) = nullptr;
    frost_status (*gemm)(void* stream, const GemmParams&) = nullptr;
    frost_status (*conv1d)(void* stream, const Conv1dParams&) = nullptr;
    frost_status (*l2norm)(void* stream, const L2NormParams&) = nullptr;
    frost_status (*gdn_gates)(void* stream, const GdnGateParams&) = nullptr;
    frost_status (*gdn_chunked)(void* stream, const GdnParams&) = nullptr;
    frost_status (*gdn_recurrent)(void* stream, const GdnParams&) = nullptr;
    frost_status (*rope)(void* stream, const RopeParams&) = nullptr;
    frost_status (*kv_append)(void* stream, const KvAppendParams&) = nullptr;
    frost_status (*attention)(void* stream, const AttentionParams&) = nullptr;
    frost_status (*swiglu)(void* stream, const SwigluParams&) = nullptr;
    frost_status (*sample)(void* stream, const SampleParams&) = nullptr;
    frost_status (*cursor)(void* stream, const CursorParams&) = nullptr;
};
const CudaOpTable& cuda_op_table();

}  // namespace frost::ops
