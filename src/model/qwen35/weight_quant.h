// Quantized GEMM weights on the device (issue 15): a matrix of the weight table whose parts are all
// quantized linears of one format is uploaded as stored (packed weights + scales, no dequant) and
// bound as one quantized view (ops/tensor.h); anything else is dequantized on the host. The
// fusion concatenates rows, so per-part scale layouts are merged: FP8 row blocks that do not tile
// the parts become per-row scales, INT4 zero points are repacked 8 rows per word, and NVFP4
// global scales become one divisor per row.
#pragma once
#include <string>
#include <vector>

#include "frost/exec.h"
#include "model/buffers.h"
#include "model/weight_stager.h"
#include "model/weights.h"
#include "ops/tensor.h"

namespace frost::model::qwen35 {

// Why `parts` (row-concatenated, K columns) cannot stay quantized as one view, or "" when it can.
std::string quant_matrix_refusal(const std::vector<const TensorView*>& parts, int64_t K);

// Allocates `name` (+ ".scale", ".zero_point", ".global_scale" as the format needs) in `list`,
// queues the packed rows and merged scales on `stager`, zero rows up to `rows` (rows that
// contribute 0), and fills *view. Call only when quant_matrix_refusal() is "".
frost_status upload_quant_matrix(const std::string& name, const std::vector<const TensorView*>& parts, int64_t K,
                                 int64_t rows, BufferList* list, WeightStager* stager, frost_stream* stream,
                                 ops::Tensor* view);

// `v` as dense values of dtype `to` (F32 or BF16) in out (numel elements): a quantized view is
// dequantized (fp32, then rounded to nearest even for BF16).
frost_status dequantize_view(const TensorView& v, ops::DType to, void* out);

}  // namespace frost::model::qwen35
