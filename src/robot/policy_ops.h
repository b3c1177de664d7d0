// Enqueues one robot-policy kernel on a frost stream, whatever the stream's backend: on cpu it is
// a frost_launch_host closure over the params (recorded into the graph during capture), on cuda
// the CUDA launcher on frost_stream_native(stream). Pointers in the params are the buffers'
// frost_buffer_ptr values, baked in at capture (the contract keeps them fixed).
#pragma once
#include "frost/exec.h"
#include "kernels/params/policy.h"

namespace frost::robot {

frost_status enqueue_linear(frost_stream* s, const kernels::PolicyLinearParams& p);
frost_status enqueue_rmsnorm(frost_stream* s, const kernels::PolicyRmsNormParams& p);
frost_status enqueue_act(frost_stream* s, const kernels::PolicyActParams& p);
frost_status enqueue_time_embed(frost_stream* s, const kernels::PolicyTimeEmbedParams& p);
frost_status enqueue_axpy(frost_stream* s, const kernels::PolicyAxpyParams& p);
frost_status enqueue_noise(frost_stream* s, const kernels::PolicyNoiseParams& p);
frost_status enqueue_counter(frost_stream* s, const kernels::PolicyCounterParams& p);

// Host <-> buffer transfers for setup and tests (not the hot path): wraps the host range, copies
// on `s`, synchronises `s`, forgets the wrap. Blocking.
frost_status upload(frost_buffer* dst, size_t dst_off, const void* src, size_t bytes,
                    frost_stream* s);
frost_status download(void* dst, const frost_buffer* src, size_t src_off, size_t bytes,
                      frost_stream* s);

}  // namespace frost::robot
