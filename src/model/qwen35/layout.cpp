// Precision per backend, derived widths and the state layout (layout.h).
#include "model/qwen35/layout.h"

#include <algorithm>

#include "kernels/params.h"

namespace frost::model::qwen35 {

Precision precision_for(ops::DType act) {
    Precision p;
    p.act = p.matrix = p.kv = p.conv = act;
    p.row_align = act == ops::DType::BF16 ? 8 : 1;
    return p;
}

static int round_up(int v, int m) { return (v + m - 1) / m * m; }

Dims dims_of(const ModelConfig& c, const Precision& p) {
    Dims d;
    d.lin_width = round_up(c.conv_dim() + c.lin_v_dim() + 2 * c.lin_num_v_heads, p.row_align);
    d.full_width = round_up(2 * c.num_heads * c.head_dim + 2 * c.num_kv_heads * c.head_dim, p.row_align);
    d.proj_width = 2 * c.intermediate_size;
    if (c.num_linear_layers() > 0) {
        d.proj_width = std::max(d.proj_width, d.lin_width);
        d.core_width = std::max(d.core_width, c.lin_v_dim());
    }
    if (c.num_full_layers() > 0) {
        d.proj_width = std::max(d.proj_width, d.full_width);
        d.core_width = std::max(d.core_width, c.num_heads * c.head_dim);
    }
    return d;
}

int slot_stride(const ModelConfig& c) { return 1 + 4 * c.num_layers; }

int slot_column(int layer, StateKind kind) {
    switch (kind) {
        case StateKind::Cursor: return 0;
        case StateKind::Conv: return 1 + 4 * layer;
        case StateKind::Recurrent: return 2 + 4 * layer;
        case StateKind::Kv: return 3 + 4 * layer;
        default: return -1;
    }
}

size_t StateSpec::bytes() const {
    size_t n = 1;
    for (int64_t s : shape) n *= size_t(s);
    return n * ops::dtype_bits(dtype) / 8;
}

size_t StateSpec::bytes_per_position() const {
    if (kind != StateKind::Kv || shape.empty() || shape[0] <= 0) return 0;
    return bytes() / size_t(shape[0]);
}

std::vector<StateSpec> state_layout(const ModelConfig& c, const Precision& p, int max_seq) {
    std::vector<StateSpec> out;
    out.push_back({"cursor", BufferRole::Cursor, StateKind::Cursor, ops::DType::U8, -1,
                   {int64_t(sizeof(kernels::StepCursor))}});
    for (int l = 0; l < c.num_layers; ++l) {
        const std::string lp = "layer" + std::to_string(l) + ".";
        if (c.is_linear(l)) {
            out.push_back({lp + "conv_state", BufferRole::State, StateKind::Conv, p.conv, l,
                           {c.conv_dim(), c.conv_kernel - 1}});
            out.push_back({lp + "recurrent_state", BufferRole::State, StateKind::Recurrent, ops::DType::F32, l,
                           {c.lin_num_v_heads, c.lin_k_head_dim, c.lin_v_head_dim}});
        } else {
            for (const char* kv : {"k_cache", "v_cache"})
                out.push_back({lp + kv, BufferRole::State, StateKind::Kv, p.kv, l,
                               {max_seq, c.num_kv_heads, c.head_dim}});
        }
    }
    return out;
}

}  // namespace frost::model::qwen35
