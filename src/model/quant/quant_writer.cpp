// Quantizers and layouts of the four published formats (see quant_writer.h). Scales: FP8 block /
// channel = absmax / 448; NVFP4 global = 448*6 / absmax(tensor), local = fp8(global * absmax16 / 6);
// INT4 symmetric = absmax / 8, asymmetric = (max - min) / 16 with zero point -8 - round(min/scale)
// (compressed-tensors' calculate_qparams). Per-channel and INT4 scales are bf16, the model dtype.
#include "model/quant/quant_writer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "model/quant/dequant.h"
#include "util/bf16.h"
#include "util/fp8.h"

namespace frost::model::quant {
namespace {

using nlohmann::json;

constexpr float kFp4Max = 6.0f;
constexpr int64_t kBlock = 128, kNvfp4Group = 16, kInt4Group = 128, kPerWord = 8;

int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

template <typename T>
void put(std::string* blob, size_t i, T v) {
    std::memcpy(blob->data() + i * sizeof(T), &v, sizeof(T));
}

float bf16_round(float x) { return util::bf16_to_f32(util::f32_to_bf16(x)); }

json weight_args(int bits, const char* type, const char* strategy, json group_size, bool symmetric) {
    return {{"num_bits", bits},           {"type", type},
            {"symmetric", symmetric},     {"group_size", group_size},
            {"strategy", strategy},       {"block_structure", nullptr},
            {"dynamic", false},           {"actorder", nullptr},
            {"scale_dtype", nullptr},     {"zp_dtype", nullptr},
            {"observer", "minmax"},       {"observer_kwargs", json::object()}};
}

json compressed(const std::string& format, json weights, json inputs, const std::vector<std::string>& ignore) {
    return {{"quant_method", "compressed-tensors"},
            {"format", format},
            {"config_groups",
             {{"group_0",
               {{"targets", {"Linear"}},
                {"weights", weights},
                {"input_activations", inputs},
                {"output_activations", nullptr},
                {"format", format}}}}},
            {"ignore", ignore},
            {"kv_cache_scheme", nullptr},
            {"quantization_status", "compressed"},
            {"sparsity_config", json::object()},
            {"transform_config", json::object()},
            {"global_compression_ratio", nullptr},
            {"version", "0.12.2"}};
}

}  // namespace

bool parse_write_format(const std::string& n, WriteFormat* out) {
    if (n == "fp8") *out = WriteFormat::Fp8Block;
    else if (n == "fp8-dynamic") *out = WriteFormat::Fp8Dynamic;
    else if (n == "nvfp4") *out = WriteFormat::Nvfp4;
    else if (n == "int4") *out = WriteFormat::Int4;
    else if (n == "int4-asym") *out = WriteFormat::Int4Asym;
    else return false;
    return true;
}

const char* write_format_names() { return "fp8|fp8-dynamic|nvfp4|int4|int4-asym"; }

// By their last name parts. Qwen's FP8 releases list them in modules_to_not_convert, and
// llm-compressor's Qwen3.5 recipes ignore them (or all of linear_attn): a router decides by small
// logit gaps, and b / a (one row per value head) set the recurrence's decay and step size.
constexpr const char* kRecipeKeepsBf16[] = {"linear_attn.in_proj_a", "linear_attn.in_proj_b", "linear_attn.in_proj_ba",
                                            "mlp.gate", "mlp.shared_expert_gate"};

bool recipe_keeps_bf16(const std::string& module) {
    for (const char* leaf : kRecipeKeepsBf16) {
        const std::string tail = std::string(".") + leaf;
        if (module.size() > tail.size() && module.compare(module.size() - tail.size(), tail.size(), tail) == 0)
            return true;
    }
    return false;
}

std::vector<std::string> recipe_ignore_list(WriteFormat f) {
    const bool fp8_block = f == WriteFormat::Fp8Block;
    std::vector<std::string> keep = fp8_block ? std::vector<std::string>{"lm_head", "model.visual"}
                                              : std::vector<std::string>{"lm_head", "re:model\\.visual\\..*"};
    for (const char* leaf : kRecipeKeepsBf16) {
        std::string escaped;
        for (const char* ch = leaf; *ch; ++ch) escaped += *ch == '.' ? std::string("\\.") : std::string(1, *ch);
        keep.push_back(fp8_block ? std::string(leaf) : "re:.*\\." + escaped + "$");
    }
    return keep;
}

uint8_t f32_to_fp4_e2m1(float x) {
    const uint8_t sign = std::signbit(x) ? 0x8 : 0x0;
    const float a = std::fabs(x);
    // Midpoints between {0, .5, 1, 1.5, 2, 3, 4, 6}; a tie goes to the even mantissa code.
    uint8_t code;
    if (a <= 0.25f) code = 0;
    else if (a < 0.75f) code = 1;
    else if (a <= 1.25f) code = 2;
    else if (a < 1.75f) code = 3;
    else if (a <= 2.5f) code = 4;
    else if (a < 3.5f) code = 5;
    else if (a <= 5.0f) code = 6;
    else code = 7;
    return code ? uint8_t(sign | code) : 0;
}

std::vector<QuantOutTensor> quant_layout(WriteFormat f, const std::string& m, int64_t out, int64_t in) {
    auto t = [&](const char* suffix, const char* dtype, std::vector<int64_t> shape, size_t elem) {
        uint64_t n = 1;
        for (int64_t d : shape) n *= uint64_t(d);
        return QuantOutTensor{m + "." + suffix, dtype, std::move(shape), n * elem};
    };
    switch (f) {
        case WriteFormat::Fp8Block:
            return {t("weight", "F8_E4M3", {out, in}, 1), t("weight_scale_inv", "F32", {cdiv(out, kBlock), cdiv(in, kBlock)}, 4)};
        case WriteFormat::Fp8Dynamic:
            return {t("weight", "F8_E4M3", {out, in}, 1), t("weight_scale", "BF16", {out, 1}, 2)};
        case WriteFormat::Nvfp4:
            return {t("weight_packed", "U8", {out, in / 2}, 1), t("weight_scale", "F8_E4M3", {out, cdiv(in, kNvfp4Group)}, 1),
                    t("weight_global_scale", "F32", {1}, 4)};
        case WriteFormat::Int4:
        case WriteFormat::Int4Asym: {
            std::vector<QuantOutTensor> v = {t("weight_packed", "I32", {out, cdiv(in, kPerWord)}, 4),
                                             t("weight_scale", "BF16", {out, cdiv(in, kInt4Group)}, 2),
                                             t("weight_shape", "I64", {2}, 8)};
            if (f == WriteFormat::Int4Asym)
                v.push_back(t("weight_zero_point", "I32", {cdiv(out, kPerWord), cdiv(in, kInt4Group)}, 4));
            return v;
        }
    }
    return {};
}

std::vector<std::string> quantize_linear(WriteFormat f, const float* w, int64_t out, int64_t in) {
    const auto layout = quant_layout(f, "m", out, in);
    std::vector<std::string> blobs;
    for (const auto& t : layout) blobs.emplace_back(size_t(t.bytes), '\0');
    switch (f) {
        case WriteFormat::Fp8Block: {
            const int64_t sc = cdiv(in, kBlock);
            for (int64_t br = 0; br < cdiv(out, kBlock); ++br)
                for (int64_t bc = 0; bc < sc; ++bc) {
                    float amax = 0;
                    for (int64_t r = br * kBlock; r < std::min(out, (br + 1) * kBlock); ++r)
                        for (int64_t c = bc * kBlock; c < std::min(in, (bc + 1) * kBlock); ++c)
                            amax = std::max(amax, std::fabs(w[r * in + c]));
                    const float scale = amax > 0 ? amax / util::kE4m3Max : 1.0f;
                    put<float>(&blobs[1], size_t(br * sc + bc), scale);
                    for (int64_t r = br * kBlock; r < std::min(out, (br + 1) * kBlock); ++r)
                        for (int64_t c = bc * kBlock; c < std::min(in, (bc + 1) * kBlock); ++c)
                            blobs[0][size_t(r * in + c)] = char(util::f32_to_e4m3(w[r * in + c] / scale));
                }
            break;
        }
        case WriteFormat::Fp8Dynamic:
            for (int64_t r = 0; r < out; ++r) {
                float amax = 0;
                for (int64_t c = 0; c < in; ++c) amax = std::max(amax, std::fabs(w[r * in + c]));
                const float scale = amax > 0 ? bf16_round(amax / util::kE4m3Max) : 1.0f;  // stored bf16, used as stored
                put<uint16_t>(&blobs[1], size_t(r), util::f32_to_bf16(scale));
                for (int64_t c = 0; c < in; ++c) blobs[0][size_t(r * in + c)] = char(util::f32_to_e4m3(w[r * in + c] / scale));
            }
            break;
        case WriteFormat::Nvfp4: {
            float amax = 0;
            for (int64_t i = 0; i < out * in; ++i) amax = std::max(amax, std::fabs(w[i]));
            const float global = amax > 0 ? util::kE4m3Max * kFp4Max / amax : 1.0f;
            put<float>(&blobs[2], 0, global);
            const int64_t groups = cdiv(in, kNvfp4Group);
            for (int64_t r = 0; r < out; ++r)
                for (int64_t g = 0; g < groups; ++g) {
                    float gmax = 0;
                    for (int64_t c = g * kNvfp4Group; c < std::min(in, (g + 1) * kNvfp4Group); ++c)
                        gmax = std::max(gmax, std::fabs(w[r * in + c]));
                    const uint8_t s8 = util::f32_to_e4m3(global * (gmax / kFp4Max));
                    blobs[1][size_t(r * groups + g)] = char(s8);
                    const float scale = util::e4m3_to_f32(s8) / global;  // what the reader multiplies by
                    for (int64_t c = g * kNvfp4Group; c < std::min(in, (g + 1) * kNvfp4Group); ++c) {
                        const float x = scale > 0 ? std::clamp(w[r * in + c] / scale, -kFp4Max, kFp4Max) : 0.0f;
                        const uint8_t q = f32_to_fp4_e2m1(x);
                        char& byte = blobs[0][size_t(r * (in / 2) + c / 2)];
                        byte = char((c & 1) ? (uint8_t(byte) | uint8_t(q << 4)) : (uint8_t(byte) | q));
                    }
                }
            break;
        }
        case WriteFormat::Int4:
        case WriteFormat::Int4Asym: {
            const bool asym = f == WriteFormat::Int4Asym;
            const int64_t groups = cdiv(in, kInt4Group), words = cdiv(in, kPerWord);
            put<int64_t>(&blobs[2], 0, out);
            put<int64_t>(&blobs[2], 1, in);
            for (int64_t r = 0; r < out; ++r)
                for (int64_t g = 0; g < groups; ++g) {
                    float lo = 0, hi = 0;  // the range always includes 0, as compressed-tensors' observer
                    for (int64_t c = g * kInt4Group; c < std::min(in, (g + 1) * kInt4Group); ++c) {
                        lo = std::min(lo, w[r * in + c]);
                        hi = std::max(hi, w[r * in + c]);
                    }
                    float scale = asym ? (hi - lo) / 15.0f : std::max(-lo, hi) / 8.0f;
                    scale = scale > 0 ? bf16_round(scale) : 1.0f;
                    put<uint16_t>(&blobs[1], size_t(r * groups + g), util::f32_to_bf16(scale));
                    int zp = 0;
                    if (asym) {
                        zp = std::clamp(int(std::nearbyint(-8.0f - lo / scale)), -8, 7);
                        int32_t* zw = reinterpret_cast<int32_t*>(blobs[3].data()) + (r / kPerWord) * groups + g;
                        uint32_t u = uint32_t(*zw) | (uint32_t(zp + 8) << (4 * (r % kPerWord)));
                        std::memcpy(zw, &u, sizeof(u));
                    }
                    for (int64_t c = g * kInt4Group; c < std::min(in, (g + 1) * kInt4Group); ++c) {
                        const int q = std::clamp(int(std::nearbyint(w[r * in + c] / scale)) + zp, -8, 7);
                        int32_t* word = reinterpret_cast<int32_t*>(blobs[0].data()) + r * words + c / kPerWord;
                        uint32_t u = uint32_t(*word) | (uint32_t(q + 8) << (4 * (c % kPerWord)));
                        std::memcpy(word, &u, sizeof(u));
                    }
                }
            break;
        }
    }
    return blobs;
}

json quant_config_json(WriteFormat f, const std::vector<std::string>& ignore) {
    switch (f) {
        case WriteFormat::Fp8Block:
            return {{"quant_method", "fp8"},
                    {"fmt", "e4m3"},
                    {"activation_scheme", "dynamic"},
                    {"weight_block_size", {kBlock, kBlock}},
                    {"modules_to_not_convert", ignore}};
        case WriteFormat::Fp8Dynamic: {
            json inputs = weight_args(8, "float", "token", nullptr, true);
            inputs["dynamic"] = true;
            inputs["observer"] = nullptr;
            return compressed("float-quantized", weight_args(8, "float", "channel", nullptr, true), inputs, ignore);
        }
        case WriteFormat::Nvfp4: {
            json wa = weight_args(4, "float", "tensor_group", kNvfp4Group, true);
            wa["scale_dtype"] = "torch.float8_e4m3fn";
            return compressed("nvfp4-pack-quantized", wa, nullptr, ignore);
        }
        case WriteFormat::Int4:
        case WriteFormat::Int4Asym: {
            json wa = weight_args(4, "int", "group", kInt4Group, f == WriteFormat::Int4);
            if (f == WriteFormat::Int4Asym) wa["zp_dtype"] = "torch.int8";
            return compressed("pack-quantized", wa, nullptr, ignore);
        }
    }
    return nullptr;
}

}  // namespace frost::model::quant
