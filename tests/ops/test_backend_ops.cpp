// Backend parity of every op, in the style of llama.cpp's test-backend-ops: each case builds one op
// over the shapes the Qwen3.5 models use (head_dim 256, GDN heads of 128, decode and prefill row
// counts), on fresh random inputs, and runs it twice:
//   reference: the CPU backend on fp32 views holding bf16-representable values;
//   candidate: the CUDA backend (bf16 activations) where this build and machine have one, else the
//              CPU backend on bf16 views (its widen / narrow path).
// Outputs are compared with a tolerance by dtype (bf16 outputs: relative to the output's scale;
// fp32 outputs: tighter; ids, tokens and cursors: exact). A coverage test fails for any op of
// ops::OpKind without a case, and for any backend table with an empty slot.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "exec/error.h"
#include "ops/ops.h"
#include "ops/ops_test_util.h"
#include "util/bf16.h"

namespace frost::ops {
namespace {

using kernels::StepCursor;

enum class Kind { Act, F32, I32, Bytes };  // Act: f32 on the reference, the candidate's activation dtype
enum class Use { In, Out, InOut, Scratch };  // Scratch: written, not compared (e.g. CPU-only temporaries)

struct Arg {
    std::string name;
    Kind kind = Kind::Act;
    Use use = Use::In;
    size_t count = 0;                                   // elements (bytes for Bytes)
    std::function<size_t(const Backend&)> sized;        // backend-dependent count (work areas)
    std::vector<float> f;                               // Act / F32 initial values
    std::vector<int32_t> i;                             // I32 initial values
    std::vector<uint8_t> bytes;                         // Bytes initial values
};

// Device pointers and dtypes of one run's arguments, by name.
struct Bound {
    std::map<std::string, void*> ptr;
    std::map<std::string, DType> dt;
    std::map<std::string, size_t> count;
    void* p(const std::string& n) const { return ptr.at(n); }
    DType d(const std::string& n) const { return dt.at(n); }
    Tensor m(const std::string& n, int64_t off, int64_t rows, int64_t cols, int64_t ld) const {
        return mat(p(n), d(n), rows, cols, ld).offset(off);
    }
    Tensor h(const std::string& n, int64_t off, int64_t rows, int64_t nh, int64_t dim, int64_t ld, int64_t hs) const {
        return heads(p(n), d(n), rows, nh, dim, ld, hs).offset(off);
    }
    Tensor v(const std::string& n) const {
        return count.at(n) ? vec(p(n), d(n), int64_t(count.at(n))) : Tensor{};
    }
    template <class T>
    T* as(const std::string& n) const { return static_cast<T*>(p(n)); }
};

struct Case {
    std::string name;
    OpKind op;
    std::vector<Arg> args;
    std::function<frost_status(const Exec&, const Bound&)> launch;
    // > 0: the relative tolerance of this case's fp32 outputs on a bf16 candidate, where the
    // kernel's arithmetic is known to be coarser than tolerance() assumes (the case says why).
    double f32_tol = 0;
};

// ---------------------------------------------------------------- inputs

std::mt19937_64& rng() {
    static std::mt19937_64 r(std::random_device{}());
    return r;
}
float bf16_round(float x) { return util::bf16_to_f32(util::f32_to_bf16(x)); }
std::vector<float> normal(size_t n, float scale = 1.0f) {
    std::normal_distribution<float> d(0.0f, scale);
    std::vector<float> v(n);
    for (auto& x : v) x = bf16_round(d(rng()));
    return v;
}
std::vector<float> uniform(size_t n, float lo, float hi) {
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = bf16_round(d(rng()));
    return v;
}
// Poison for outputs: the same on both sides, so untouched elements compare equal and written
// ones cannot pass by accident.
std::vector<float> poison(size_t n) { return std::vector<float>(n, -777.0f); }

std::vector<uint8_t> cursor_bytes(int pos, int n_tokens, int last_token = 0, int mode = kernels::kSampleGreedy,
                                  float temperature = 0.0f, int top_k = 0, float top_p = 1.0f, uint64_t seed = 0) {
    StepCursor c{};
    c.pos = pos;
    c.n_tokens = n_tokens;
    c.last_token = last_token;
    c.sample_mode = mode;
    c.rng_seed = seed;
    c.temperature = temperature;
    c.top_k = top_k;
    c.top_p = top_p;
    std::vector<uint8_t> b(sizeof c);
    std::memcpy(b.data(), &c, sizeof c);
    return b;
}

Arg act(std::string n, Use u, std::vector<float> init) {
    Arg a;
    a.name = std::move(n); a.kind = Kind::Act; a.use = u; a.count = init.size(); a.f = std::move(init);
    return a;
}
Arg f32(std::string n, Use u, std::vector<float> init) {
    Arg a = act(std::move(n), u, std::move(init));
    a.kind = Kind::F32;
    return a;
}
Arg i32(std::string n, Use u, std::vector<int32_t> init) {
    Arg a;
    a.name = std::move(n); a.kind = Kind::I32; a.use = u; a.count = init.size(); a.i = std::move(init);
    return a;
}
Arg bytes(std::string n, Use u, std::vector<uint8_t> init) {
    Arg a;
    a.name = std::move(n); a.kind = Kind::Bytes; a.use = u; a.count = init.size(); a.bytes = std::move(init);
    return a;
}
Arg work(std::string n, std::function<size_t(const Backend&)> sized) {
    Arg a;
    a.name = std::move(n); a.kind = Kind::F32; a.use = Use::Scratch; a.sized = std::move(sized);
    return a;
}
Arg rows_arg(int n) { return i32("n", Use::In, {n}); }

// l2-normalised heads of `dim` (what the GDN kernels expect of q and k), bf16-representable.
void normalise_heads(std::vector<float>& v, size_t row_stride, size_t rows, size_t off, int heads, int dim) {
    for (size_t r = 0; r < rows; ++r)
        for (int h = 0; h < heads; ++h) {
            float* x = v.data() + r * row_stride + off + size_t(h) * dim;
            double s = 0;
            for (int i = 0; i < dim; ++i) s += double(x[i]) * x[i];
            const float inv = float(1.0 / std::sqrt(s + 1e-6));
            for (int i = 0; i < dim; ++i) x[i] = bf16_round(x[i] * inv);
        }
}


// ---------------------------------------------------------------- quantized weights
// Random quantized weights in the layouts of ops/tensor.h and their values decoded here, by this
// file's own decoders (independent of model/quant and of the kernels): the reference runs the fp32
// GEMM on the decoded values, the CUDA candidate the GEMM op on the packed view.

// Fp8Rows: one scale per row and 128 columns, what a fused FP8 matrix whose parts are not whole
// 128-row blocks carries (the GDN in_proj, model/qwen35/weight_quant.cpp). Fp8RowsGrid: the same
// with the leading whole 128-row blocks' scales also as a 128x128 grid (ops::Tensor::grid_rows,
// kGridRows rows: the in_proj's qkv | z before b | a), which CUDA's W8A8 prefill runs block-scaled.
enum class QFmt { Fp8Block, Fp8Channel, Fp8Rows, Fp8RowsGrid, Nvfp4, Int4, Int4Asym };
const char* qfmt_name(QFmt f) {
    switch (f) {
        case QFmt::Fp8Block: return "fp8-block128";
        case QFmt::Fp8Channel: return "fp8-channel";
        case QFmt::Fp8Rows: return "fp8-rows1x128";
        case QFmt::Fp8RowsGrid: return "fp8-rows1x128+grid";
        case QFmt::Nvfp4: return "nvfp4";
        case QFmt::Int4: return "int4-g128";
        case QFmt::Int4Asym: return "int4-g128-asym";
    }
    return "?";
}
constexpr int kQBlock = 128, kQGroup4 = 128, kNvGroup = 16, kGridRows = 256;

float e4m3(uint8_t b) {  // OCP e4m3fn (no NaN is generated here)
    const int e = (b >> 3) & 0xF, m = b & 7;
    const float v = e == 0 ? std::ldexp(float(m), -9) : std::ldexp(1.0f + m / 8.0f, e - 7);
    return (b & 0x80) ? -v : v;
}
float e2m1(uint8_t n) {
    static const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    return (n & 8) ? -mag[n & 7] : mag[n & 7];
}
uint8_t rand_e4m3(int e_lo, int e_hi, bool sign) {
    const int e = e_lo + int(rng()() % uint64_t(e_hi - e_lo + 1));
    return uint8_t((sign && (rng()() & 1) ? 0x80 : 0) | (e << 3) | int(rng()() % 8));
}

struct QuantW {
    std::vector<uint8_t> w, scale;  // packed rows; scale bytes (f32 / bf16 / e4m3 per format)
    std::vector<int32_t> zp;        // INT4 asymmetric
    std::vector<float> gs;          // NVFP4 per-row divisor
    std::vector<float> grid;        // Fp8RowsGrid: [kGridRows / 128][K / 128], else one unused value
    std::vector<float> ref;         // decoded [N, K]
};

QuantW make_quant(QFmt f, int N, int K) {
    QuantW q;
    q.ref.resize(size_t(N) * K);
    q.zp.assign(size_t((N + 7) / 8) * (K / kQGroup4), int32_t(0x88888888u));
    q.gs.assign(size_t(N), 1.0f);
    q.grid.assign(1, 0.0f);
    auto put_f32 = [&](std::vector<uint8_t>& v, const std::vector<float>& vals) {
        v.resize(vals.size() * 4);
        std::memcpy(v.data(), vals.data(), v.size());
    };
    if (f == QFmt::Fp8Block || f == QFmt::Fp8Channel || f == QFmt::Fp8Rows || f == QFmt::Fp8RowsGrid) {
        q.w.resize(size_t(N) * K);
        for (auto& b : q.w) b = rand_e4m3(1, 8, true);
        const int br = f == QFmt::Fp8Block ? kQBlock : 1, bc = f == QFmt::Fp8Channel ? K : kQBlock;
        const int sr = (N + br - 1) / br, sc = (K + bc - 1) / bc;
        std::vector<float> s = uniform(size_t(sr) * sc, 0.005f, 0.03f);
        if (f == QFmt::Fp8RowsGrid) {  // the grid's rows share their block's scales
            q.grid = uniform(size_t(kGridRows / kQBlock) * sc, 0.005f, 0.03f);
            for (int r = 0; r < kGridRows; ++r)
                for (int c = 0; c < sc; ++c) s[size_t(r) * sc + c] = q.grid[size_t(r / kQBlock) * sc + c];
        }
        put_f32(q.scale, s);
        for (int r = 0; r < N; ++r)
            for (int c = 0; c < K; ++c) q.ref[size_t(r) * K + c] = e4m3(q.w[size_t(r) * K + c]) * s[size_t(r / br) * sc + c / bc];
    } else if (f == QFmt::Nvfp4) {
        q.w.resize(size_t(N) * K / 2);
        for (auto& b : q.w) b = uint8_t(rng()());
        q.scale.resize(size_t(N) * K / kNvGroup);
        for (auto& b : q.scale) b = rand_e4m3(5, 9, false);
        for (auto& g : q.gs) g = float(32 << (rng()() % 3));
        for (int r = 0; r < N; ++r)
            for (int c = 0; c < K; ++c) {
                const uint8_t byte = q.w[(size_t(r) * K + c) / 2];
                const float s = e4m3(q.scale[size_t(r) * (K / kNvGroup) + c / kNvGroup]) / q.gs[size_t(r)];
                q.ref[size_t(r) * K + c] = e2m1((c & 1) ? uint8_t(byte >> 4) : uint8_t(byte & 0xF)) * s;
            }
    } else {
        const int G = K / kQGroup4;
        q.w.resize(size_t(N) * K / 2);
        for (auto& b : q.w) b = uint8_t(rng()());
        std::vector<float> s = uniform(size_t(N) * G, 0.002f, 0.01f);  // bf16-representable
        q.scale.resize(s.size() * 2);
        for (size_t i = 0; i < s.size(); ++i) {
            const uint16_t h = util::f32_to_bf16(s[i]);
            std::memcpy(q.scale.data() + 2 * i, &h, 2);
        }
        if (f == QFmt::Int4Asym)
            for (auto& z : q.zp) z = int32_t(uint32_t(rng()()));
        for (int r = 0; r < N; ++r)
            for (int c = 0; c < K; ++c) {
                const uint8_t byte = q.w[(size_t(r) * K + c) / 2];
                const int v = (c & 1) ? byte >> 4 : byte & 0xF;
                const int zp = int((uint32_t(q.zp[size_t(r / 8) * G + c / kQGroup4]) >> (4 * (r % 8))) & 0xF);
                q.ref[size_t(r) * K + c] = float(v - zp) * s[size_t(r) * G + c / kQGroup4];
            }
    }
    return q;
}

// The packed view of a case's quantized weight (args wq, ws, wz, wg).
Tensor quant_view(const Bound& b, QFmt f, int N, int K) {
    const DType dt = f == QFmt::Nvfp4 ? DType::NVFP4 : (f == QFmt::Int4 || f == QFmt::Int4Asym) ? DType::INT4
                                                                                                  : DType::FP8_E4M3;
    Tensor t = mat(b.p("wq"), dt, N, K, K);
    t.scale = b.p("ws");
    switch (f) {
        case QFmt::Fp8Block: t.scale_rows = kQBlock; t.scale_block = kQBlock; break;
        case QFmt::Fp8Channel: t.scale_rows = 1; t.scale_block = K; break;
        case QFmt::Fp8Rows: t.scale_rows = 1; t.scale_block = kQBlock; break;
        case QFmt::Fp8RowsGrid:
            t.scale_rows = 1; t.scale_block = kQBlock; t.grid_scale = b.as<float>("wgrid"); t.grid_rows = kGridRows;
            break;
        case QFmt::Nvfp4: t.scale_block = kNvGroup; t.global_scale = b.as<float>("wg"); break;
        case QFmt::Int4: t.scale_block = kQGroup4; break;
        case QFmt::Int4Asym: t.scale_block = kQGroup4; t.zero_point = b.as<int32_t>("wz"); break;
    }
    return t;
}

// ---------------------------------------------------------------- model shapes

constexpr int H = 256, F = 512, VOCAB = 1000;
constexpr int Hq = 4, Hkv = 2, D = 256, ROT = 64;                // gated attention
constexpr int Hk = 2, Hv = 4, DK = 128, DV = 128, KC = 4;        // Gated DeltaNet
constexpr int Q = Hk * DK, VW = Hv * DV, C = 2 * Q + VW;         // 256, 512, 1024
constexpr int WL = C + VW + 2 * Hv;                              // GDN in_proj width (1544, a multiple of 8)
constexpr int WF = 2 * Hq * D + 2 * Hkv * D;                     // attention qkv width (3072)
constexpr int MAX_SEQ = 256;
constexpr float EPS = 1e-6f;

std::vector<Case> cases() {
    std::vector<Case> cs;
    for (int rows : {64, 1}) {
        const int n = rows == 1 ? 1 : 37;
        const std::string tag = rows == 1 ? " decode" : " prefill";
        {
            std::vector<int32_t> ids(rows);
            for (auto& t : ids) t = int32_t(rng()() % VOCAB);
            cs.push_back({"embed" + tag, OpKind::Embed,
                          {act("table", Use::In, normal(size_t(VOCAB) * H)), i32("ids", Use::In, ids),
                           act("y", Use::Out, poison(size_t(rows) * H)), rows_arg(n)},
                          [rows](const Exec& ex, const Bound& b) {
                              EmbedOp p{b.m("table", 0, VOCAB, H, H), b.as<int32_t>("ids"), b.m("y", 0, rows, H, H),
                                        {rows, b.as<int32_t>("n")}};
                              return op_embed(ex, p);
                          }});
        }
        for (int last : {0, 1}) {
            if (last && rows == 1) continue;
            cs.push_back({"add_rmsnorm" + tag + (last ? " last_row" : ""), OpKind::AddRmsNorm,
                          {act("h", Use::In, normal(size_t(rows) * H, 3.0f)), f32("w", Use::In, normal(H, 0.3f)),
                           act("y", Use::Out, poison(size_t(last ? 1 : rows) * H)), rows_arg(n)},
                          [rows, last](const Exec& ex, const Bound& b) {
                              AddRmsNormOp p;
                              p.h = b.m("h", 0, rows, H, H); p.w = b.v("w");
                              p.y = b.m("y", 0, last ? 1 : rows, H, H); p.eps = EPS; p.last_row_only = last;
                              p.rows = {rows, b.as<int32_t>("n")}; p.pdl = rows == 1;
                              return op_add_rmsnorm(ex, p);
                          }});
        }
        cs.push_back({"add_rmsnorm+delta" + tag, OpKind::AddRmsNorm,
                      {act("h", Use::InOut, normal(size_t(rows) * H)), act("delta", Use::In, normal(size_t(rows) * H)),
                       f32("w", Use::In, normal(H, 0.3f)), act("y", Use::Out, poison(size_t(rows) * H)), rows_arg(n)},
                      [rows](const Exec& ex, const Bound& b) {
                          AddRmsNormOp p;
                          p.h = b.m("h", 0, rows, H, H); p.delta = b.m("delta", 0, rows, H, H); p.w = b.v("w");
                          p.y = b.m("y", 0, rows, H, H); p.eps = EPS; p.rows = {rows, b.as<int32_t>("n")};
                          return op_add_rmsnorm(ex, p);
                      }});
        cs.push_back({"qk_norm_rope" + tag, OpKind::QkNormRope,
                      {act("proj", Use::InOut, normal(size_t(rows) * WF)), f32("qw", Use::In, normal(D, 0.2f)),
                       f32("kw", Use::In, normal(D, 0.2f)), bytes("cursor", Use::In, cursor_bytes(rows == 1 ? 190 : 21, n))},
                      [rows](const Exec& ex, const Bound& b) {
                          QkNormRopeOp p;
                          p.q = b.h("proj", 0, rows, Hq, D, WF, 2 * D);
                          p.k = b.h("proj", 2 * Hq * D, rows, Hkv, D, WF, D);
                          p.q_w = b.v("qw"); p.k_w = b.v("kw"); p.rotary_dim = ROT; p.eps = EPS; p.theta = 1e7f;
                          p.inv_freq_bf16 = 1; p.max_rows = rows; p.cursor = b.as<StepCursor>("cursor");
                          return op_qk_norm_rope(ex, p);
                      }});
        cs.push_back({"conv1d_silu_l2" + tag, OpKind::Conv1dSiluL2,
                      {act("proj", Use::In, normal(size_t(rows) * WL)), f32("w", Use::In, normal(size_t(C) * KC, 0.5f)),
                       act("state", Use::InOut, normal(size_t(C) * (KC - 1))),
                       act("y", Use::Out, poison(size_t(rows) * C)), rows_arg(n)},
                      [rows](const Exec& ex, const Bound& b) {
                          Conv1dSiluL2Op p;
                          p.x = b.m("proj", 0, rows, C, WL); p.w = b.m("w", 0, C, KC, KC);
                          p.state = b.m("state", 0, C, KC - 1, KC - 1); p.y = b.m("y", 0, rows, C, C);
                          p.l2_dim = DK; p.l2_heads = 2 * Hk; p.l2_q_heads = Hk; p.l2_eps = EPS;
                          p.q_scale = 1.0f / std::sqrt(float(DK)); p.rows = {rows, b.as<int32_t>("n")}; p.pdl = rows == 1;
                          return op_conv1d_silu_l2(ex, p);
                      }});
        cs.push_back({"gdn_gate" + tag, OpKind::GdnGate,
                      {act("proj", Use::In, normal(size_t(rows) * WL)), f32("A_log", Use::In, uniform(Hv, -1.0f, 1.0f)),
                       f32("dt", Use::In, normal(Hv)), f32("beta", Use::Out, poison(size_t(rows) * Hv)),
                       f32("g", Use::Out, poison(size_t(rows) * Hv)), rows_arg(n)},
                      [rows](const Exec& ex, const Bound& b) {
                          GdnGateOp p;
                          p.b = b.m("proj", C + VW, rows, Hv, WL); p.a = b.m("proj", C + VW + Hv, rows, Hv, WL);
                          p.A_log = b.v("A_log"); p.dt_bias = b.v("dt"); p.beta = b.m("beta", 0, rows, Hv, Hv);
                          p.g = b.m("g", 0, rows, Hv, Hv); p.rows = {rows, b.as<int32_t>("n")};
                          return op_gdn_gate(ex, p);
                      }});
        cs.push_back({"gated_rmsnorm" + tag, OpKind::GatedRmsNorm,
                      {act("core", Use::In, normal(size_t(rows) * VW)), act("proj", Use::In, normal(size_t(rows) * WL)),
                       f32("w", Use::In, normal(DV, 0.5f)), act("y", Use::Out, poison(size_t(rows) * VW)), rows_arg(n)},
                      [rows](const Exec& ex, const Bound& b) {
                          GatedRmsNormOp p;
                          p.x = b.m("core", 0, rows, VW, VW); p.z = b.m("proj", C, rows, VW, WL); p.w = b.v("w");
                          p.y = b.m("y", 0, rows, VW, VW); p.heads = Hv; p.dim = DV; p.eps = EPS;
                          p.rows = {rows, b.as<int32_t>("n")}; p.pdl = rows == 1;
                          return op_gated_rmsnorm(ex, p);
                      }});
        cs.push_back({"kv_append" + tag, OpKind::KvAppend,
                      {act("proj", Use::In, normal(size_t(rows) * WF)),
                       act("kc", Use::InOut, normal(size_t(MAX_SEQ) * Hkv * D)),
                       act("vc", Use::InOut, normal(size_t(MAX_SEQ) * Hkv * D)),
                       bytes("cursor", Use::In, cursor_bytes(rows == 1 ? 200 : 17, n))},
                      [rows](const Exec& ex, const Bound& b) {
                          KvAppendOp p;
                          p.k = b.m("proj", 2 * Hq * D, rows, Hkv * D, WF);
                          p.v = b.m("proj", 2 * Hq * D + Hkv * D, rows, Hkv * D, WF);
                          p.k_cache = b.h("kc", 0, MAX_SEQ, Hkv, D, Hkv * D, D);
                          p.v_cache = b.h("vc", 0, MAX_SEQ, Hkv, D, Hkv * D, D);
                          p.max_rows = rows; p.cursor = b.as<StepCursor>("cursor");
                          return op_kv_append(ex, p);
                      }});
        // q/k norm + RoPE with the KV append as one op (one launch on CUDA), decode and prefill.
        cs.push_back({"qk_norm_rope+kv_append" + tag, OpKind::QkRopeKvAppend,
                      {act("proj", Use::InOut, normal(size_t(rows) * WF)), f32("qw", Use::In, normal(D, 0.2f)),
                       f32("kw", Use::In, normal(D, 0.2f)),
                       act("kc", Use::InOut, normal(size_t(MAX_SEQ) * Hkv * D)),
                       act("vc", Use::InOut, normal(size_t(MAX_SEQ) * Hkv * D)),
                       bytes("cursor", Use::In, cursor_bytes(rows == 1 ? 201 : 19, n))},
                      [rows](const Exec& ex, const Bound& b) {
                          QkRopeKvAppendOp p;
                          QkNormRopeOp& q = p.qk;
                          q.q = b.h("proj", 0, rows, Hq, D, WF, 2 * D);
                          q.k = b.h("proj", 2 * Hq * D, rows, Hkv, D, WF, D);
                          q.q_w = b.v("qw"); q.k_w = b.v("kw"); q.rotary_dim = ROT; q.eps = EPS; q.theta = 1e7f;
                          q.inv_freq_bf16 = 1; q.max_rows = rows; q.cursor = b.as<StepCursor>("cursor");
                          KvAppendOp& kv = p.kv;
                          kv.k = b.m("proj", 2 * Hq * D, rows, Hkv * D, WF);
                          kv.v = b.m("proj", 2 * Hq * D + Hkv * D, rows, Hkv * D, WF);
                          kv.k_cache = b.h("kc", 0, MAX_SEQ, Hkv, D, Hkv * D, D);
                          kv.v_cache = b.h("vc", 0, MAX_SEQ, Hkv, D, Hkv * D, D);
                          kv.max_rows = rows; kv.cursor = q.cursor;
                          return op_qk_rope_kv_append(ex, p);
                      }});
        cs.push_back({rows == 1 ? "attention_decode" : "attention_prefill",
                      rows == 1 ? OpKind::AttentionDecode : OpKind::AttentionPrefill,
                      {act("proj", Use::In, normal(size_t(rows) * WF)),
                       act("kc", Use::In, normal(size_t(MAX_SEQ) * Hkv * D)),
                       act("vc", Use::In, normal(size_t(MAX_SEQ) * Hkv * D)),
                       act("o", Use::Out, poison(size_t(rows) * Hq * D)),
                       work("work", [rows](const Backend& be) { return be.attn_work_floats(Hq, MAX_SEQ, rows); }),
                       bytes("cursor", Use::In, cursor_bytes(rows == 1 ? 200 : 30, n))},
                      [rows](const Exec& ex, const Bound& b) {
                          AttentionOp p;
                          p.q = b.h("proj", 0, rows, Hq, D, WF, 2 * D); p.gate = b.h("proj", D, rows, Hq, D, WF, 2 * D);
                          p.k_cache = b.h("kc", 0, MAX_SEQ, Hkv, D, Hkv * D, D);
                          p.v_cache = b.h("vc", 0, MAX_SEQ, Hkv, D, Hkv * D, D);
                          p.o = b.m("o", 0, rows, Hq * D, Hq * D); p.work = b.v("work");
                          p.scale = 1.0f / std::sqrt(float(D)); p.max_rows = rows; p.cursor = b.as<StepCursor>("cursor");
                          return rows == 1 ? op_attention_decode(ex, p) : op_attention_prefill(ex, p);
                      }});
        // GEMM epilogues as the forward uses them: projections, residual outputs, fp32 logits, the
        // decode SwiGLU GEMV.
        for (int ep = 0; ep < 3; ++ep) {
            if (ep == 2 && rows != 1) continue;
            const int N = ep == 2 ? 2 * F : 384, out_cols = ep == 2 ? F : N;
            cs.push_back({std::string("gemm ") + (ep == 0 ? "none" : ep == 1 ? "residual" : "swiglu") + tag, OpKind::Gemm,
                          {act("x", Use::In, normal(size_t(rows) * H)), act("w", Use::In, normal(size_t(N) * H, 0.05f)),
                           act("y", ep == 1 ? Use::InOut : Use::Out,
                               ep == 1 ? normal(size_t(rows) * out_cols) : poison(size_t(rows) * out_cols)),
                           act("tmp", Use::Scratch, poison(size_t(rows) * N))},
                          [rows, ep, N, out_cols](const Exec& ex, const Bound& b) {
                              GemmOp p;
                              p.x = b.m("x", 0, rows, H, H); p.w = b.m("w", 0, N, H, H);
                              p.y = b.m("y", 0, rows, out_cols, out_cols); p.tmp = b.m("tmp", 0, rows, N, N);
                              p.epilogue = Epilogue(ep); p.pdl = rows == 1;
                              return op_gemm(ex, p);
                          }});
        }
        cs.push_back({"gemm lm_head f32" + tag, OpKind::Gemm,
                      {act("x", Use::In, normal(size_t(rows) * H)), act("w", Use::In, normal(size_t(VOCAB) * H, 0.05f)),
                       f32("y", Use::Out, poison(size_t(rows) * VOCAB))},
                      [rows](const Exec& ex, const Bound& b) {
                          GemmOp p;
                          p.x = b.m("x", 0, rows, H, H); p.w = b.m("w", 0, VOCAB, H, H);
                          p.y = b.m("y", 0, rows, VOCAB, VOCAB);
                          return op_gemm(ex, p);
                      }});
    }
    // Quantized GEMM weights (issue 15): the CUDA backend runs the packed view (decode: quantized
    // GEMV with the residual / SwiGLU epilogue fused; prefill: dequant tile + bf16
    // GEMM); the reference (and a CPU candidate, which takes dequantized weights) the decoded fp32.
    // W8A8 decode (GemmOp::quant_act on decode rows, EngineOptions::fp8_w8a8_decode), FP8 layouts
    // only, one row and a batched step of 3 (PDL): CUDA's GEMV rounds x to e4m3 per 128-wide
    // group in shared memory and runs FP8 mma (lm_gemv_quant.h act_fp8), the CPU rounds x the same
    // way in fp32.
    // "paired": a 4-bit weight first put into the CUDA backend's layout by
    // Backend::prepare_quant_weight (the paired nibble order the engine's load writes, and the
    // 8-row blocks, which every shape here allows), called twice to show the second call changes
    // nothing.
    for (QFmt f : {QFmt::Fp8Block, QFmt::Fp8Channel, QFmt::Fp8Rows, QFmt::Nvfp4, QFmt::Int4, QFmt::Int4Asym})
        for (int paired : {0, 1})
        for (int w8a8 : {0, 1})
        for (int rows : {1, 3, 64})
            for (int ep = 0; ep < 4; ++ep) {  // none, residual, swiglu (decode only), f32 logits
                const bool fp8 = f == QFmt::Fp8Block || f == QFmt::Fp8Channel || f == QFmt::Fp8Rows;
                if ((w8a8 && !fp8) || (w8a8 && rows == 64) || (paired && fp8)) continue;
                if (rows == 3 && !(w8a8 && (ep == 1 || ep == 2))) continue;  // batched: residual, swiglu
                if (ep == 2 && rows == 64) continue;
                const int N = ep == 2 ? 2 * F : ep == 3 ? 512 : 384, out_cols = ep == 2 ? F : N;
                const QuantW q = make_quant(f, N, H);
                const char* epn = ep == 0 ? "none" : ep == 1 ? "residual" : ep == 2 ? "swiglu" : "f32";
                Arg y = ep == 3 ? f32("y", Use::Out, poison(size_t(rows) * out_cols))
                                : act("y", ep == 1 ? Use::InOut : Use::Out,
                                      ep == 1 ? normal(size_t(rows) * out_cols) : poison(size_t(rows) * out_cols));
                cs.push_back({std::string("gemm ") + qfmt_name(f) + (paired ? " paired" : "") + (w8a8 ? " w8a8 " : " ") + epn +
                                  (rows == 1 ? " decode" : rows == 3 ? " batched decode" : " prefill"),
                              OpKind::Gemm,
                              {act("x", Use::In, normal(size_t(rows) * H)), std::move(y),
                               act("tmp", Use::Scratch, poison(size_t(rows) * N)), bytes("wq", Use::In, q.w),
                               bytes("ws", Use::In, q.scale), i32("wz", Use::In, q.zp), f32("wg", Use::In, q.gs),
                               f32("wref", Use::In, q.ref)},
                              [rows, ep, N, out_cols, f, w8a8, paired](const Exec& ex, const Bound& b) {
                                  GemmOp p;
                                  p.x = b.m("x", 0, rows, H, H);
                                  p.w = ex.backend->kind() == FROST_BACKEND_CUDA ? quant_view(b, f, N, H)
                                                                                 : b.m("wref", 0, N, H, H);
                                  if (paired && ex.backend->kind() == FROST_BACKEND_CUDA) {
                                      FROST_TRY(ex.backend->prepare_quant_weight(ex.stream, &p.w));
                                      if (p.w.nibble_pairs != 1) return fail(FROST_ERR_BACKEND, "not paired");
                                      if (p.w.row_blocks != 1) return fail(FROST_ERR_BACKEND, "not in 8-row blocks");  // N, H allow it
                                      FROST_TRY(ex.backend->prepare_quant_weight(ex.stream, &p.w));
                                  }
                                  p.y = b.m("y", 0, rows, out_cols, out_cols); p.tmp = b.m("tmp", 0, rows, N, N);
                                  p.epilogue = ep == 3 ? Epilogue::None : Epilogue(ep); p.pdl = rows <= 3;
                                  p.quant_act = w8a8;
                                  return op_gemm(ex, p);
                              }});
            }
    // A batched decode step's rows (3 members, PDL): CUDA runs the quantized tensor-core GEMV on all
    // rows at once (K = H), or, on a shape only the one-row SIMT kernel takes (fp8 per-channel at
    // K = 192, not a multiple of 128), one launch per member.
    for (const auto& [f, K] : {std::pair{QFmt::Fp8Block, H}, std::pair{QFmt::Nvfp4, H}, std::pair{QFmt::Int4Asym, H},
                               std::pair{QFmt::Fp8Channel, 192}})
        for (int ep : {1, 2}) {  // residual (bf16 y), swiglu
            const int rows = 3, N = ep == 2 ? 2 * F : 384, out_cols = ep == 2 ? F : N;
            const QuantW q = make_quant(f, N, K);
            cs.push_back({std::string("gemm ") + qfmt_name(f) + " K" + std::to_string(K) + (ep == 2 ? " swiglu" : " residual") +
                              " batched decode",
                          OpKind::Gemm,
                          {act("x", Use::In, normal(size_t(rows) * K)),
                           act("y", ep == 1 ? Use::InOut : Use::Out,
                               ep == 1 ? normal(size_t(rows) * out_cols) : poison(size_t(rows) * out_cols)),
                           act("tmp", Use::Scratch, poison(size_t(rows) * N)), bytes("wq", Use::In, q.w),
                           bytes("ws", Use::In, q.scale), i32("wz", Use::In, q.zp), f32("wg", Use::In, q.gs),
                           f32("wref", Use::In, q.ref)},
                          [rows, ep, N, K, out_cols, f](const Exec& ex, const Bound& b) {
                              GemmOp p;
                              p.x = b.m("x", 0, rows, K, K);
                              p.w = ex.backend->kind() == FROST_BACKEND_CUDA ? quant_view(b, f, N, K)
                                                                             : b.m("wref", 0, N, K, K);
                              p.y = b.m("y", 0, rows, out_cols, out_cols); p.tmp = b.m("tmp", 0, rows, N, N);
                              p.epilogue = Epilogue(ep);
                              p.pdl = true;
                              return op_gemm(ex, p);
                          }});
        }
    // W8A8 prefill on FP8 128x128-block weights (GemmOp::quant_act): CUDA quantizes the activations
    // and runs cuBLASLt's block-scaled FP8 GEMM, the CPU quantizes them the same way in fp32.
    // K = 512: the smallest K the CUDA path plans (kernels/cuda/lm_gemm_fp8.h). Per-row scales
    // (Fp8Rows) take the same GEMM with VEC128 weight scales, laid out in the backend's tile.
    // The per-row cases take the shapes tests/kernels/test_cuda_gemm_fp8.cpp saw cuBLASLt plan
    // (M 128 N 320 K 512 f32 out; M 256 N 448 K 1024 bf16 residual). Fp8RowsGrid: the same shapes,
    // rows [0, 256) block-scaled and the rest (64 / 192 rows) per-row, written after them.
    // Per-channel scales (Fp8Channel, compressed-tensors FP8-dynamic) run as per-row ones, each
    // row's scale repeated along k: the same shapes. INT4 in 128-wide groups (W4A8) too: its values
    // converted to e4m3 in the tile, its group scales per-row; Int4Asym first put into the CUDA
    // layout the engine's load writes (paired nibbles, 8-row blocks; Backend::prepare_quant_weight).
    for (QFmt f : {QFmt::Fp8Block, QFmt::Fp8Rows, QFmt::Fp8RowsGrid, QFmt::Fp8Channel, QFmt::Int4, QFmt::Int4Asym})
    for (int ep : {0, 1, 3}) {
        const bool rows1 = f != QFmt::Fp8Block;
        if (rows1 && ep == 0) continue;
        const int rows = rows1 ? (ep == 3 ? 128 : 256) : 64;
        const int N = rows1 ? (ep == 3 ? 320 : 448) : ep == 3 ? 512 : 384, KQ = rows1 && ep == 1 ? 1024 : 512;
        const QuantW q = make_quant(f, N, KQ);
        const char* epn = ep == 0 ? "none" : ep == 1 ? "residual" : "f32";
        Arg y = ep == 3 ? f32("y", Use::Out, poison(size_t(rows) * N))
                        : act("y", ep == 1 ? Use::InOut : Use::Out, ep == 1 ? normal(size_t(rows) * N) : poison(size_t(rows) * N));
        cs.push_back({std::string("gemm ") + qfmt_name(f) + " w8a8 " + epn + " prefill", OpKind::Gemm,
                      {act("x", Use::In, normal(size_t(rows) * KQ)), std::move(y), bytes("wq", Use::In, q.w),
                       bytes("ws", Use::In, q.scale), i32("wz", Use::In, q.zp), f32("wg", Use::In, q.gs),
                       f32("wgrid", Use::In, q.grid), f32("wref", Use::In, q.ref)},
                      [rows, ep, N, KQ, f](const Exec& ex, const Bound& b) {
                          GemmOp p;
                          p.x = b.m("x", 0, rows, KQ, KQ);
                          p.w = ex.backend->kind() == FROST_BACKEND_CUDA ? quant_view(b, f, N, KQ)
                                                                         : b.m("wref", 0, N, KQ, KQ);
                          if (f == QFmt::Int4Asym && ex.backend->kind() == FROST_BACKEND_CUDA) {
                              FROST_TRY(ex.backend->prepare_quant_weight(ex.stream, &p.w));
                              if (p.w.nibble_pairs != 1 || p.w.row_blocks != 1) return fail(FROST_ERR_BACKEND, "not prepared");
                          }
                          p.y = b.m("y", 0, rows, N, N);
                          p.epilogue = ep == 3 ? Epilogue::None : Epilogue(ep);
                          p.quant_act = 1;
                          return op_gemm(ex, p);
                      }});
    }
    // W8A8 with the GEMM input quantized by its producer (ops.h Fp8Act): add_rmsnorm, gated_rmsnorm
    // or swiglu writes its output and the output's FP8 twin, and the FP8 GEMM reads the twin
    // (GemmOp::xq) instead of quantizing x. Both backends: the CPU twin comes from its fp32 output,
    // the CUDA one from the bf16 output, so the GEMM's inputs differ by those roundings only.
    // K = 512 (kernels/cuda/lm_gemm_fp8.h kFp8MinK); 64 rows, 50 valid. yq_only: the producer skips
    // its output (the GEMM, its only reader, reads the twin: Backend::gemm_reads_twin must say so),
    // so the output is no result on either side (CUDA leaves it, the CPU works in it). Variants 6
    // and 7: swiglu at 1024 rows (1000 valid), whose e4m3 rows alone (512 KB) are more than the
    // dequant tile left after the scales (Side: [2F, H] bf16, 512 KB); the twin needs none of the
    // tile, so the FP8 GEMM must still run (the CUDA backend once refused it there). Variants 8
    // and 9: add_rmsnorm's twin only into a per-channel FP8 weight (Fp8Channel) and an INT4 one in
    // 128-wide groups (W4A8): the GEMM groups x by 128 all the same, so the engine writes twins
    // for them too, and CUDA must read only the twin (its FP8 path engaged), at a per-row shape
    // cuBLASLt plans (above).
    for (int variant = 0; variant < 10; ++variant) {
        const bool big = variant == 6 || variant == 7, per_row = variant >= 8;
        const int producer = big ? 2 : variant % 3, only = big ? variant - 6 : variant >= 3 ? 1 : 0;
        const int rows = big ? 1024 : per_row ? 256 : 64, n = big ? 1000 : per_row ? 250 : 50;
        const int KQ = per_row ? 1024 : 512, N = per_row ? 448 : 384;
        const QFmt fmt = variant == 8 ? QFmt::Fp8Channel : variant == 9 ? QFmt::Int4 : QFmt::Fp8Block;
        const QuantW q = make_quant(fmt, N, KQ);
        const char* name = producer == 0 ? "add_rmsnorm" : producer == 1 ? "gated_rmsnorm" : "swiglu";
        const size_t in_cols = producer == 2 ? 2 * KQ : KQ;
        cs.push_back({std::string(name) + (only ? " fp8 twin only" : " fp8 twin") + (big ? " 1024 rows" : "") +
                          " -> gemm " + qfmt_name(fmt) + " w8a8 residual prefill",
                      OpKind::Gemm,
                      {act("in", Use::In, normal(size_t(rows) * in_cols)), act("z", Use::In, normal(size_t(rows) * KQ)),
                       f32("nw", Use::In, uniform(producer == 1 ? 128 : KQ, -0.5f, 0.5f)),
                       act("act", only ? Use::Scratch : Use::Out, poison(size_t(rows) * KQ)),
                       // Twin rows past the count stay e4m3 zeros with scale 1: the CUDA GEMM
                       // computes them (adding 0 to y), the CPU skips them.
                       bytes("q", Use::Scratch, std::vector<uint8_t>(size_t(rows) * KQ, 0)),
                       f32("s", Use::Scratch, std::vector<float>(size_t(fp8_act_ld(rows)) * (KQ / 128), 1.0f)),
                       act("y", Use::InOut, normal(size_t(rows) * N)), bytes("wq", Use::In, q.w),
                       bytes("ws", Use::In, q.scale), i32("wz", Use::In, q.zp), f32("wg", Use::In, q.gs),
                       f32("wref", Use::In, q.ref), rows_arg(n)},
                      [=](const Exec& ex, const Bound& b) {
                          const Fp8Act twin = fp8_act(b.p("q"), b.p("s"), rows, KQ);
                          const Rows rw{rows, b.as<int32_t>("n")};
                          const Tensor a = b.m("act", 0, rows, KQ, KQ);
                          GemmOp g;
                          g.x = a;
                          g.w = ex.backend->kind() == FROST_BACKEND_CUDA ? quant_view(b, fmt, N, KQ)
                                                                         : b.m("wref", 0, N, KQ, KQ);
                          g.y = b.m("y", 0, rows, N, N);
                          g.epilogue = Epilogue::Residual;
                          g.n_rows = b.as<int32_t>("n");
                          g.quant_act = 1;
                          g.xq = twin;
                          if ((only || big) && !ex.backend->gemm_reads_twin(g)) {
                              ADD_FAILURE() << "gemm_reads_twin: no for the " << qfmt_name(fmt) << " GEMM";
                              return FROST_ERR_UNSUPPORTED;
                          }
                          g.xq_only = only;
                          if (producer == 0) {
                              AddRmsNormOp p;
                              p.h = b.m("in", 0, rows, KQ, KQ); p.w = b.v("nw"); p.y = a; p.eps = 1e-6f;
                              p.rows = rw; p.yq = twin; p.yq_only = only;
                              FROST_TRY(op_add_rmsnorm(ex, p));
                          } else if (producer == 1) {
                              GatedRmsNormOp p;
                              p.x = b.m("in", 0, rows, KQ, KQ); p.z = b.m("z", 0, rows, KQ, KQ);
                              p.w = b.v("nw"); p.y = a; p.heads = KQ / 128; p.dim = 128; p.eps = 1e-6f;
                              p.rows = rw; p.yq = twin; p.yq_only = only;
                              FROST_TRY(op_gated_rmsnorm(ex, p));
                          } else {
                              SwigluOp p{b.m("in", 0, rows, 2 * KQ, 2 * KQ), a, rw, twin, only};
                              FROST_TRY(op_swiglu(ex, p));
                          }
                          return op_gemm(ex, g);
                      }});
    }
    // Gated delta rule: prefill over a chunk boundary (pos 40, 100 rows), decode step with its gate.
    {
        const int rows = 128, n = 100;
        auto qkv = normal(size_t(rows) * C);
        normalise_heads(qkv, C, rows, 0, 2 * Hk, DK);
        // gate: the op's own gate (prefill's form; CUDA computes beta / g in the chunk prep).
        for (int gate = 0; gate < 2; ++gate) {
            std::vector<Arg> args = {act("qkv", Use::In, qkv),
                                     f32("beta", gate ? Use::Scratch : Use::In,
                                         gate ? poison(size_t(rows) * Hv) : uniform(size_t(rows) * Hv, 0.05f, 0.95f)),
                                     f32("g", gate ? Use::Scratch : Use::In,
                                         gate ? poison(size_t(rows) * Hv) : uniform(size_t(rows) * Hv, -0.5f, -0.01f)),
                                     f32("state", Use::InOut, normal(size_t(Hv) * DK * DV, 0.05f)),
                                     act("o", Use::Out, poison(size_t(rows) * VW)),
                                     work("work", [](const Backend& be) { return be.gdn_work_floats(Hv, 128); }),
                                     bytes("cursor", Use::In, cursor_bytes(40, n))};
            if (gate) {
                args.push_back(act("proj", Use::In, normal(size_t(rows) * WL)));
                args.push_back(f32("A_log", Use::In, uniform(Hv, -1.0f, 1.0f)));
                args.push_back(f32("dt", Use::In, normal(Hv)));
            }
            cs.push_back({gate ? "gdn_gate+gdn_chunk prefill" : "gdn_chunk prefill", OpKind::GdnChunk, args,
                          [rows, gate](const Exec& ex, const Bound& b) {
                              GdnChunkOp p;
                              p.q = b.h("qkv", 0, rows, Hk, DK, C, DK); p.k = b.h("qkv", Q, rows, Hk, DK, C, DK);
                              p.v = b.h("qkv", 2 * Q, rows, Hv, DV, C, DV);
                              p.beta = b.m("beta", 0, rows, Hv, Hv); p.g = b.m("g", 0, rows, Hv, Hv);
                              p.state = b.h("state", 0, Hv, DK, DV, DK * DV, DV); p.o = b.m("o", 0, rows, VW, VW);
                              p.work = b.v("work"); p.chunk = 64; p.max_rows = rows;
                              p.cursor = b.as<StepCursor>("cursor");
                              if (gate) {
                                  GdnGateOp& g = p.gate;
                                  g.b = b.m("proj", C + VW, rows, Hv, WL); g.a = b.m("proj", C + VW + Hv, rows, Hv, WL);
                                  g.A_log = b.v("A_log"); g.dt_bias = b.v("dt"); g.beta = p.beta; g.g = p.g;
                                  g.rows = {rows, &p.cursor->n_tokens};
                              }
                              return op_gdn_chunk(ex, p);
                          },
                          // The CUDA chunk kernel (lm_gdn_bf16.cu) forms each chunk's products on bf16
                          // tensor cores from bf16-rounded intermediates (decay-scaled k, corrected v)
                          // and adds them to the fp32 state: 64-term sums of bf16-rounded terms. Its
                          // state error reached 5.8e-3 of the state's scale on the H100 (2026-11-24,
                          // fresh inputs; 5e-3 had passed earlier runs); the engine goldens bound the
                          // end-to-end effect.
                          1e-2});
        }
        auto q1 = normal(C);
        normalise_heads(q1, C, 1, 0, 2 * Hk, DK);
        cs.push_back({"gdn_step+gate decode", OpKind::GdnStep,
                      {act("qkv", Use::In, q1), act("proj", Use::In, normal(WL)),
                       f32("A_log", Use::In, uniform(Hv, -1.0f, 1.0f)), f32("dt", Use::In, normal(Hv)),
                       f32("beta", Use::Scratch, poison(Hv)), f32("g", Use::Scratch, poison(Hv)),
                       f32("state", Use::InOut, normal(size_t(Hv) * DK * DV, 0.05f)),
                       act("o", Use::Out, poison(VW)), bytes("cursor", Use::In, cursor_bytes(77, 1))},
                      [](const Exec& ex, const Bound& b) {
                          GdnStepOp p;
                          p.q = b.h("qkv", 0, 1, Hk, DK, C, DK); p.k = b.h("qkv", Q, 1, Hk, DK, C, DK);
                          p.v = b.h("qkv", 2 * Q, 1, Hv, DV, C, DV);
                          p.b = b.m("proj", C + VW, 1, Hv, WL); p.a = b.m("proj", C + VW + Hv, 1, Hv, WL);
                          p.A_log = b.v("A_log"); p.dt_bias = b.v("dt"); p.beta = b.m("beta", 0, 1, Hv, Hv);
                          p.g = b.m("g", 0, 1, Hv, Hv); p.state = b.h("state", 0, Hv, DK, DV, DK * DV, DV);
                          p.o = b.m("o", 0, 1, VW, VW); p.max_rows = 1; p.cursor = b.as<StepCursor>("cursor"); p.pdl = 1;
                          return op_gdn_step(ex, p);
                      }});
        // The GDN layer's decode step as one op (conv, gated step, norm): one launch on CUDA. With
        // gates: a quantized checkpoint's bf16 [b; a] rows, computed in the op from the normed
        // hidden state into proj's b | a columns (CUDA: in the same launch).
        for (int fold = 0; fold < 2; ++fold) {
            std::vector<Arg> args = {
                act("proj", fold ? Use::InOut : Use::In, normal(WL)), f32("cw", Use::In, normal(size_t(C) * KC, 0.5f)),
                act("cstate", Use::InOut, normal(size_t(C) * (KC - 1))), act("qkv", Use::Out, poison(C)),
                f32("A_log", Use::In, uniform(Hv, -1.0f, 1.0f)), f32("dt", Use::In, normal(Hv)),
                f32("beta", Use::Scratch, poison(Hv)), f32("g", Use::Scratch, poison(Hv)),
                f32("state", Use::InOut, normal(size_t(Hv) * DK * DV, 0.05f)),
                act("o", Use::Out, poison(VW)), f32("nw", Use::In, normal(DV, 0.5f)),
                act("y", Use::Out, poison(VW)), bytes("cursor", Use::In, cursor_bytes(77, 1))};
            if (fold) {
                args.push_back(act("xg", Use::In, normal(H)));
                args.push_back(act("gw", Use::In, normal(size_t(2) * Hv * H, 0.1f)));
            }
            cs.push_back({fold ? "gdn_decode (gates+conv+step+norm)" : "gdn_decode (conv+step+norm)", OpKind::GdnDecode,
                          args,
                          [fold](const Exec& ex, const Bound& b) {
                              GdnDecodeOp p;
                              StepCursor* cur = b.as<StepCursor>("cursor");
                              Conv1dSiluL2Op& c = p.conv;
                              c.x = b.m("proj", 0, 1, C, WL); c.w = b.m("cw", 0, C, KC, KC);
                              c.state = b.m("cstate", 0, C, KC - 1, KC - 1); c.y = b.m("qkv", 0, 1, C, C);
                              c.l2_dim = DK; c.l2_heads = 2 * Hk; c.l2_q_heads = Hk; c.l2_eps = EPS;
                              c.q_scale = 1.0f / std::sqrt(float(DK)); c.rows = {1, &cur->n_tokens}; c.pdl = 1;
                              GdnStepOp& d = p.step;
                              d.q = b.h("qkv", 0, 1, Hk, DK, C, DK); d.k = b.h("qkv", Q, 1, Hk, DK, C, DK);
                              d.v = b.h("qkv", 2 * Q, 1, Hv, DV, C, DV);
                              d.b = b.m("proj", C + VW, 1, Hv, WL); d.a = b.m("proj", C + VW + Hv, 1, Hv, WL);
                              d.A_log = b.v("A_log"); d.dt_bias = b.v("dt"); d.beta = b.m("beta", 0, 1, Hv, Hv);
                              d.g = b.m("g", 0, 1, Hv, Hv); d.state = b.h("state", 0, Hv, DK, DV, DK * DV, DV);
                              d.o = b.m("o", 0, 1, VW, VW); d.max_rows = 1; d.cursor = cur; d.pdl = 1;
                              GatedRmsNormOp& g = p.norm;
                              g.x = d.o; g.z = b.m("proj", C, 1, VW, WL); g.w = b.v("nw"); g.y = b.m("y", 0, 1, VW, VW);
                              g.heads = Hv; g.dim = DV; g.eps = EPS; g.rows = c.rows; g.pdl = 1;
                              if (fold) {
                                  GemmOp& gt = p.gates;
                                  gt.x = b.m("xg", 0, 1, H, H); gt.w = b.m("gw", 0, 2 * Hv, H, H);
                                  gt.y = b.m("proj", C + VW, 1, 2 * Hv, WL); gt.pdl = 1;
                              }
                              return op_gdn_decode(ex, p);
                          },
                          // Unlike the step case above, q/k/v here are the conv's own output: the CUDA
                          // path rounds them to bf16 before the delta update (as the separate kernels
                          // do; the fused-kernel test checks those bits), the fp32 reference does not,
                          // and v - k^T S cancels. The state's error reached 7.1e-3 of its scale on the
                          // H100 (2026-11-25, fresh inputs; earlier runs passed 5e-3).
                          1.5e-2});
        }
    }
    cs.push_back({"swiglu prefill", OpKind::Swiglu,
                  {act("x", Use::In, normal(size_t(64) * 2 * F)), act("y", Use::Out, poison(size_t(64) * F)), rows_arg(50)},
                  [](const Exec& ex, const Bound& b) {
                      SwigluOp p{b.m("x", 0, 64, 2 * F, 2 * F), b.m("y", 0, 64, F, F), {64, b.as<int32_t>("n")}};
                      return op_swiglu(ex, p);
                  }});
    // Sampling: greedy over the last valid row, and seeded top-k / top-p (same draw on both).
    for (int mode = 0; mode < 2; ++mode) {
        cs.push_back({mode ? "sample top-k top-p" : "sample greedy", OpKind::Sample,
                      {f32("logits", Use::In, normal(size_t(4) * VOCAB, 2.0f)), rows_arg(3),
                       work("work", [](const Backend& be) { return be.sample_work_floats(VOCAB); }),
                       i32("idx", Use::Scratch, std::vector<int32_t>(VOCAB, 0)), i32("tok", Use::Out, {-1}),
                       bytes("cursor", Use::In,
                             mode ? cursor_bytes(9, 3, 0, kernels::kSampleRandom, 0.8f, 40, 0.9f, rng()())
                                  : cursor_bytes(9, 3))},
                      [](const Exec& ex, const Bound& b) {
                          SampleOp p;
                          p.logits = b.m("logits", 0, 4, VOCAB, VOCAB); p.select_last_row = 1;
                          p.n_rows = b.as<int32_t>("n"); p.work = b.v("work");
                          p.work_idx = vec(b.p("idx"), DType::I32, VOCAB);
                          p.cursor = b.as<StepCursor>("cursor"); p.out_token = b.as<int32_t>("tok");
                          return op_sample(ex, p);
                      }});
    }
    // MoE: decode (one row: router + expert GEMVs reading the ids from device memory) and prefill
    // (37 of 64 rows: grouped by expert). Experts / widths are multiples of 16 as the kernels need.
    for (int rows : {64, 1}) {
        constexpr int E = 8, TOPK = 2, I = 128, IS = 256;
        const int n = rows == 1 ? 1 : 37;
        cs.push_back({std::string("moe") + (rows == 1 ? " decode" : " prefill"), OpKind::Moe,
                      {act("x", Use::In, normal(size_t(rows) * H)), act("y", Use::InOut, normal(size_t(rows) * H)),
                       act("router", Use::In, normal(size_t(E) * H, 0.1f)),
                       act("gu", Use::In, normal(size_t(E) * 2 * I * H, 0.06f)),
                       act("down", Use::In, normal(size_t(E) * H * I, 0.08f)),
                       act("sgu", Use::In, normal(size_t(2) * IS * H, 0.06f)),
                       act("sdown", Use::In, normal(size_t(H) * IS, 0.06f)), act("sg", Use::In, normal(H, 0.1f)),
                       f32("probs", Use::Out, poison(size_t(rows) * E)),
                       i32("ids", Use::Out, std::vector<int32_t>(size_t(rows) * TOPK, -1)),
                       f32("w", Use::Out, poison(size_t(rows) * TOPK)),
                       work("work", [rows](const Backend& be) { return be.moe_work_floats(H, E, TOPK, I, IS, rows); }),
                       rows_arg(n)},
                      [rows](const Exec& ex, const Bound& b) {
                          MoeOp p;
                          p.x = b.m("x", 0, rows, H, H); p.y = b.m("y", 0, rows, H, H);
                          p.router = b.m("router", 0, E, H, H); p.experts_gate_up = b.m("gu", 0, E * 2 * I, H, H);
                          p.experts_down = b.m("down", 0, E * H, I, I); p.shared_gate_up = b.m("sgu", 0, 2 * IS, H, H);
                          p.shared_down = b.m("sdown", 0, H, IS, IS); p.shared_gate = b.m("sg", 0, 1, H, H);
                          p.probs = b.m("probs", 0, rows, E, E);
                          p.topk_ids = mat(b.p("ids"), DType::I32, rows, TOPK, TOPK);
                          p.topk_w = b.m("w", 0, rows, TOPK, TOPK); p.work = b.v("work");
                          p.E = E; p.k = TOPK; p.I = I; p.Is = IS; p.norm_topk = rows == 1 ? 0 : 1;
                          p.rows = {rows, b.as<int32_t>("n")};
                          return op_moe(ex, p);
                      }});
    }
    // MoE W8A8 prefill (MoeOp::quant_act) over FP8 experts in 128 x 128 blocks: CUDA's grouped
    // GEMMs read the stacks as stored and multiply e4m3 activations on FP8 tensor cores; the CPU
    // reference rounds x and each expert's activations the same way in fp32, on the decoded
    // weights. I = Is and H, I multiples of 128: the shapes where CUDA takes its W8A8 path. (The
    // bf16 tolerance, relative to y's scale, would also pass the exact path: that CUDA takes the
    // W8A8 one is model_test_cuda_quant_engine's check, its arithmetic kernels_test_cuda_moe_prefill's.)
    {
        constexpr int E = 8, TOPK = 2, I = 128, rows = 64, n = 37;
        const QuantW gu = make_quant(QFmt::Fp8Block, E * 2 * I, H), dn = make_quant(QFmt::Fp8Block, E * H, I),
                     sgu = make_quant(QFmt::Fp8Block, 2 * I, H), sdn = make_quant(QFmt::Fp8Block, H, I);
        std::vector<Arg> args = {act("x", Use::In, normal(size_t(rows) * H)),
                                 act("y", Use::InOut, normal(size_t(rows) * H)),
                                 act("router", Use::In, normal(size_t(E) * H, 0.1f)), act("sg", Use::In, normal(H, 0.1f)),
                                 f32("probs", Use::Out, poison(size_t(rows) * E)),
                                 i32("ids", Use::Out, std::vector<int32_t>(size_t(rows) * TOPK, -1)),
                                 f32("w", Use::Out, poison(size_t(rows) * TOPK)),
                                 work("work", [](const Backend& be) { return be.moe_work_floats(H, E, TOPK, I, I, rows); }),
                                 rows_arg(n)};
        const std::pair<const char*, const QuantW*> mats[] = {{"gu", &gu}, {"dn", &dn}, {"sgu", &sgu}, {"sdn", &sdn}};
        for (const auto& [name, q] : mats) {
            args.push_back(bytes(std::string(name) + ".q", Use::In, q->w));
            args.push_back(bytes(std::string(name) + ".s", Use::In, q->scale));
            args.push_back(f32(std::string(name) + ".ref", Use::In, q->ref));
        }
        cs.push_back({"moe fp8 w8a8 prefill", OpKind::Moe, std::move(args), [](const Exec& ex, const Bound& b) {
                          // CUDA: the FP8 stack as stored; CPU: its decoded values.
                          const auto w = [&](const std::string& name, int N, int K) {
                              if (ex.backend->kind() != FROST_BACKEND_CUDA) return b.m(name + ".ref", 0, N, K, K);
                              Tensor t = mat(b.p(name + ".q"), DType::FP8_E4M3, N, K, K);
                              t.scale = b.p(name + ".s");
                              t.scale_rows = kQBlock;
                              t.scale_block = kQBlock;
                              return t;
                          };
                          MoeOp p;
                          p.x = b.m("x", 0, rows, H, H); p.y = b.m("y", 0, rows, H, H);
                          p.router = b.m("router", 0, E, H, H);
                          p.experts_gate_up = w("gu", E * 2 * I, H); p.experts_down = w("dn", E * H, I);
                          p.shared_gate_up = w("sgu", 2 * I, H); p.shared_down = w("sdn", H, I);
                          p.shared_gate = b.m("sg", 0, 1, H, H);
                          p.probs = b.m("probs", 0, rows, E, E);
                          p.topk_ids = mat(b.p("ids"), DType::I32, rows, TOPK, TOPK);
                          p.topk_w = b.m("w", 0, rows, TOPK, TOPK); p.work = b.v("work");
                          p.E = E; p.k = TOPK; p.I = I; p.Is = I; p.norm_topk = 1; p.quant_act = 1;
                          p.rows = {rows, b.as<int32_t>("n")};
                          return op_moe(ex, p);
                      }});
    }
    for (int op : {int(kernels::kCursorDecodeBegin), int(kernels::kCursorAdvance)}) {
        cs.push_back({op ? "cursor advance" : "cursor decode_begin", OpKind::Cursor,
                      {bytes("cursor", Use::InOut, cursor_bytes(12, 5, 321)), i32("ids", Use::Out, {-1, -1})},
                      [op](const Exec& ex, const Bound& b) {
                          CursorOpParams p{b.as<StepCursor>("cursor"), b.as<int32_t>("ids"), op, {}};
                          return op_cursor(ex, p);
                      }});
    }
    // A prefill's tail row: row n - 1 of 64 to row 0 (n = 37, 1: nothing moves, 64), from a column
    // range of a wider row and from a dense view; the tail cursor compared byte for byte.
    for (int n : {37, 1, 64}) {
        std::vector<uint8_t> tail(sizeof(StepCursor), 0xa5);
        cs.push_back({"tail_row n=" + std::to_string(n), OpKind::TailRow,
                      {act("a", Use::InOut, normal(size_t(64) * WL)), act("b", Use::InOut, normal(size_t(64) * H)),
                       bytes("cursor", Use::In, cursor_bytes(21, n, 7)), bytes("tail", Use::Out, tail)},
                      [](const Exec& ex, const Bound& b) {
                          TailRowOp p;
                          p.views[0] = b.m("a", C, 64, VW, WL);
                          p.views[1] = b.m("b", 0, 64, H, H);
                          p.max_rows = 64; p.cursor = b.as<StepCursor>("cursor"); p.tail = b.as<StepCursor>("tail");
                          return op_tail_row(ex, p);
                      }});
    }
    return cs;
}

// ---------------------------------------------------------------- one run of a case

struct Side : test::OpsCtx {
    DType act = DType::F32;
    explicit Side(frost_backend b, DType act_dtype) : OpsCtx(b), act(act_dtype) {
        // The engine reserves the prefill dequant tile for its largest quantized weight at load;
        // here the largest quantized case weight is the W8A8 per-row cases' [448, 1024] (then
        // [2F, H]). W4A8 needs it: its e4m3 weight, scales and quantized x share the tile.
        if (backend) {
            EXPECT_EQ(backend->reserve_dequant_scratch(ctx, std::max(size_t(448) * 1024, size_t(2 * F) * H)), FROST_OK)
                << frost_last_error();
        }
    }
};

// Every compared argument's values after the run, as f32 (ints / bytes widened exactly).
using Result = std::map<std::string, std::vector<double>>;

frost_status copy(Side& s, frost_buffer* dst, frost_buffer* src, size_t bytes) {
    FROST_TRY(frost_buffer_copy(dst, 0, src, 0, bytes, s.st));
    return frost_stream_sync(s.st);
}

Result run_case(Side& s, const Case& c) {
    Result out;
    Bound b;
    std::vector<frost_buffer*> bufs;
    std::vector<std::vector<uint8_t>> host(c.args.size());
    for (size_t i = 0; i < c.args.size(); ++i) {
        const Arg& a = c.args[i];
        const size_t n = a.sized ? a.sized(*s.backend) : a.count;
        const DType dt = a.kind == Kind::Act ? s.act : a.kind == Kind::F32 ? DType::F32
                         : a.kind == Kind::I32 ? DType::I32 : DType::U8;
        const size_t esz = dtype_bits(dt) / 8;
        std::vector<uint8_t>& h = host[i];
        h.assign(std::max<size_t>(1, n) * esz, 0);
        for (size_t k = 0; k < n && !a.sized; ++k) {
            if (dt == DType::BF16) {
                const uint16_t v = util::f32_to_bf16(a.f[k]);
                std::memcpy(h.data() + 2 * k, &v, 2);
            } else if (dt == DType::F32) {
                std::memcpy(h.data() + 4 * k, &a.f[k], 4);
            } else if (dt == DType::I32) {
                std::memcpy(h.data() + 4 * k, &a.i[k], 4);
            } else {
                h[k] = a.bytes[k];
            }
        }
        frost_buffer* dev = nullptr;
        frost_buffer* wrap = nullptr;
        EXPECT_EQ(frost_buffer_alloc(s.ctx, a.name.c_str(), h.size(), FROST_SPACE_DEVICE, &dev), FROST_OK);
        EXPECT_EQ(frost_buffer_wrap(s.ctx, "host", h.data(), h.size(), FROST_SPACE_HOST, &wrap), FROST_OK);
        EXPECT_EQ(copy(s, dev, wrap, h.size()), FROST_OK) << frost_last_error();
        frost_buffer_free(wrap);
        bufs.push_back(dev);
        b.ptr[a.name] = frost_buffer_ptr(dev);
        b.dt[a.name] = dt;
        b.count[a.name] = n;
    }
    const frost_status st = c.launch(Exec{s.st, s.backend.get(), nullptr}, b);
    EXPECT_EQ(st, FROST_OK) << c.name << ": " << frost_last_error();
    EXPECT_EQ(frost_stream_sync(s.st), FROST_OK) << c.name << ": " << frost_last_error();
    for (size_t i = 0; i < c.args.size(); ++i) {
        const Arg& a = c.args[i];
        if (a.use == Use::In || a.use == Use::Scratch) continue;
        std::vector<uint8_t>& h = host[i];
        frost_buffer* wrap = nullptr;
        EXPECT_EQ(frost_buffer_wrap(s.ctx, "host", h.data(), h.size(), FROST_SPACE_HOST, &wrap), FROST_OK);
        EXPECT_EQ(copy(s, wrap, bufs[i], h.size()), FROST_OK);
        frost_buffer_free(wrap);
        const DType dt = b.dt[a.name];
        std::vector<double>& v = out[a.name];
        for (size_t k = 0; k < b.count[a.name]; ++k) {
            if (dt == DType::BF16) {
                uint16_t x;
                std::memcpy(&x, h.data() + 2 * k, 2);
                v.push_back(util::bf16_to_f32(x));
            } else if (dt == DType::F32) {
                float x;
                std::memcpy(&x, h.data() + 4 * k, 4);
                v.push_back(x);
            } else if (dt == DType::I32) {
                int32_t x;
                std::memcpy(&x, h.data() + 4 * k, 4);
                v.push_back(x);
            } else {
                v.push_back(h[k]);
            }
        }
    }
    for (frost_buffer* f : bufs) frost_buffer_free(f);
    return out;
}

// Relative error against the reference's scale: bf16 outputs carry ~2^-8 per element and the
// candidate's fp32 accumulation order differs; exact kinds must match exactly.
double tolerance(Kind k, DType cand_act) {
    if (k == Kind::I32 || k == Kind::Bytes) return 0.0;
    if (k == Kind::Act && cand_act == DType::BF16) return 2e-2;
    return cand_act == DType::BF16 ? 5e-3 : 1e-5;  // fp32 outputs computed from bf16-held inputs
}

void compare(const Case& c, const Result& ref, const Result& cand, DType cand_act) {
    for (const Arg& a : c.args) {
        if (a.use == Use::In || a.use == Use::Scratch) continue;
        const auto& r = ref.at(a.name);
        const auto& x = cand.at(a.name);
        ASSERT_EQ(r.size(), x.size()) << c.name << " " << a.name;
        double scale = 0, worst = 0;
        size_t at = 0;
        for (double v : r) scale = std::max(scale, std::fabs(v));
        for (size_t i = 0; i < r.size(); ++i) {
            const double e = std::fabs(r[i] - x[i]);
            if (!(e <= worst)) {
                worst = e;
                at = i;
            }
        }
        const bool coarse_f32 = c.f32_tol > 0 && a.kind == Kind::F32 && cand_act == DType::BF16;
        const double tol = (coarse_f32 ? c.f32_tol : tolerance(a.kind, cand_act)) * std::max(scale, 1e-6);
        EXPECT_LE(worst, tol) << c.name << ": output " << a.name << " differs at element " << at << " (ref "
                              << r[at] << ", got " << x[at] << "; scale " << scale << ")";
    }
}

bool cuda_here() { return frost_backend_available(FROST_BACKEND_CUDA) != 0; }

// ---------------------------------------------------------------- tests

TEST(BackendOps, EveryOpHasAParityCaseAndEveryTableIsComplete) {
    std::set<OpKind> covered;
    for (const Case& c : cases()) covered.insert(c.op);
    for (int k = 0; k < kOpCount; ++k)
        EXPECT_TRUE(covered.count(OpKind(k))) << "op " << op_name(OpKind(k)) << " has no parity case";
    OpKind missing = OpKind::Count;
    EXPECT_TRUE(op_table_complete(cpu_op_table(), &missing)) << "cpu table lacks " << op_name(missing);
    if (cuda_here()) {
        Side gpu(FROST_BACKEND_CUDA, DType::BF16);
        ASSERT_TRUE(gpu.backend);
        EXPECT_TRUE(op_table_complete(gpu.backend->table(), &missing)) << "cuda table lacks " << op_name(missing);
    }
}

// The CPU backend (the fp32 oracle) takes dequantized weights: a quantized view is refused by name.
TEST(BackendOps, CpuGemmRefusesQuantizedWeights) {
    std::unique_ptr<Backend> cpu;
    ASSERT_EQ(make_cpu_backend(&cpu), FROST_OK);
    std::vector<float> x(H, 1.0f), y(8, 0.0f);
    std::vector<uint8_t> w(size_t(8) * H, 0);
    std::vector<float> sc(8, 1.0f);
    GemmOp p;
    p.x = mat(x.data(), DType::F32, 1, H, H);
    p.w = mat(w.data(), DType::FP8_E4M3, 8, H, H);
    p.w.scale = sc.data(); p.w.scale_rows = 1; p.w.scale_block = H;
    p.y = mat(y.data(), DType::F32, 1, 8, 8);
    EXPECT_EQ(cpu->table().gemm(Exec{nullptr, cpu.get(), nullptr}, p), FROST_ERR_UNSUPPORTED);
    EXPECT_NE(std::string(frost_last_error()).find("fp8_e4m3"), std::string::npos) << frost_last_error();
}

// The CPU op semantics of the FP8 twin: an FP8 GEMM reading its input's twin (GemmOp::xq, written
// by the producing op) gives bit for bit the GEMM that quantizes x itself (GemmOp::quant_act).
TEST(BackendOps, CpuGemmOnTheProducersTwinEqualsQuantizingItself) {
    Side side(FROST_BACKEND_CPU, DType::F32);
    ASSERT_TRUE(side.backend);
    Backend* cpu = side.backend.get();
    const Exec ex{side.st, cpu, nullptr};
    const int rows = 6, Fw = 384, N = 24;
    std::vector<float> x = normal(size_t(rows) * 2 * Fw, 2.0f), act(size_t(rows) * Fw, -777.0f);
    std::vector<float> w = normal(size_t(N) * Fw), y1(size_t(rows) * N, -1.0f), y2 = y1;
    std::vector<uint8_t> q(size_t(rows) * Fw, 0xFF);
    std::vector<float> sc(size_t(fp8_act_ld(rows)) * (Fw / 128), -1.0f);
    const Fp8Act twin = fp8_act(q.data(), sc.data(), rows, Fw);
    SwigluOp sw{mat(x.data(), DType::F32, rows, 2 * Fw, 2 * Fw), mat(act.data(), DType::F32, rows, Fw, Fw), {rows, nullptr},
                twin};
    ASSERT_EQ(cpu->table().swiglu(ex, sw), FROST_OK) << frost_last_error();
    ASSERT_EQ(frost_stream_sync(side.st), FROST_OK);
    GemmOp g;
    g.x = sw.y;
    g.w = mat(w.data(), DType::F32, N, Fw, Fw);
    g.y = mat(y1.data(), DType::F32, rows, N, N);
    g.quant_act = 1;
    ASSERT_EQ(cpu->table().gemm(ex, g), FROST_OK) << frost_last_error();
    g.y = mat(y2.data(), DType::F32, rows, N, N);
    g.xq = twin;
    ASSERT_EQ(cpu->table().gemm(ex, g), FROST_OK) << frost_last_error();
    ASSERT_EQ(frost_stream_sync(side.st), FROST_OK);
    EXPECT_EQ(0, std::memcmp(y1.data(), y2.data(), y1.size() * sizeof(float)));
    EXPECT_NE(y1[0], -1.0f);
    EXPECT_EQ(sc[rows], -1.0f);  // the scale row padding (fp8_act_ld(6) = 8) is left alone
    // A twin of the wrong width is refused.
    g.xq = fp8_act(q.data(), sc.data(), rows, 256);
    EXPECT_NE(cpu->table().gemm(ex, g) == FROST_OK ? frost_stream_sync(side.st) : FROST_ERR_INVALID_ARG, FROST_OK);
}

// yq_only on the CPU (ops.h Fp8Act): the producer writes the same twin (y is its working storage,
// no result), the CPU GEMM always reads the twin (Backend::gemm_reads_twin), and a GEMM told x was
// never written (xq_only) refuses to run without the twin.
TEST(BackendOps, CpuTwinOnlyProducerWritesTheSameTwin) {
    Side side(FROST_BACKEND_CPU, DType::F32);
    ASSERT_TRUE(side.backend);
    Backend* cpu = side.backend.get();
    const Exec ex{side.st, cpu, nullptr};
    const int rows = 5, Fw = 256, N = 8;
    std::vector<float> x = normal(size_t(rows) * 2 * Fw, 2.0f), act(size_t(rows) * Fw, -777.0f);
    std::vector<uint8_t> q1(size_t(rows) * Fw, 0xFF), q2 = q1;
    std::vector<float> s1(size_t(fp8_act_ld(rows)) * (Fw / 128), -1.0f), s2 = s1;
    std::vector<float> w = normal(size_t(N) * Fw), y(size_t(rows) * N, -1.0f);
    for (int only = 0; only < 2; ++only) {
        SwigluOp sw{mat(x.data(), DType::F32, rows, 2 * Fw, 2 * Fw), mat(act.data(), DType::F32, rows, Fw, Fw),
                    {rows, nullptr}, fp8_act(only ? q2.data() : q1.data(), only ? s2.data() : s1.data(), rows, Fw), only};
        ASSERT_EQ(cpu->table().swiglu(ex, sw), FROST_OK) << frost_last_error();
    }
    ASSERT_EQ(frost_stream_sync(side.st), FROST_OK);
    EXPECT_EQ(q1, q2);
    EXPECT_EQ(0, std::memcmp(s1.data(), s2.data(), s1.size() * sizeof(float)));
    EXPECT_NE(q1[0], 0xFF);
    GemmOp g;
    g.x = mat(act.data(), DType::F32, rows, Fw, Fw);
    g.w = mat(w.data(), DType::F32, N, Fw, Fw);
    g.y = mat(y.data(), DType::F32, rows, N, N);
    g.quant_act = 1;
    EXPECT_FALSE(cpu->gemm_reads_twin(g));  // no twin given
    g.xq_only = 1;
    g.xq = fp8_act(q2.data(), s2.data(), rows, Fw);
    EXPECT_TRUE(cpu->gemm_reads_twin(g));
    ASSERT_EQ(cpu->table().gemm(ex, g), FROST_OK) << frost_last_error();
    ASSERT_EQ(frost_stream_sync(side.st), FROST_OK);
    EXPECT_NE(y[0], -1.0f);
    g.xq = Fp8Act{};  // x never written and no twin: refused
    EXPECT_NE(cpu->table().gemm(ex, g) == FROST_OK ? frost_stream_sync(side.st) : FROST_ERR_INVALID_ARG, FROST_OK);
}

class Parity : public ::testing::TestWithParam<int> {};

TEST_P(Parity, CandidateMatchesTheFp32Reference) {
    const Case c = cases()[size_t(GetParam())];
    Side ref(FROST_BACKEND_CPU, DType::F32);
    const bool gpu = cuda_here();
    Side cand(gpu ? FROST_BACKEND_CUDA : FROST_BACKEND_CPU, DType::BF16);
    ASSERT_TRUE(ref.backend && cand.backend);
    const Result r = run_case(ref, c);
    const Result x = run_case(cand, c);
    compare(c, r, x, cand.act);
    // The case's outputs were written at all (not left at their poison).
    for (const Arg& a : c.args)
        if (a.use == Use::Out && a.kind != Kind::I32 && a.kind != Kind::Bytes) {
            const auto& v = r.at(a.name);
            EXPECT_TRUE(std::any_of(v.begin(), v.end(), [](double d) { return d != -777.0; }))
                << c.name << ": " << a.name << " never written";
        }
}

const std::vector<std::string>& case_names() {
    static const std::vector<std::string> names = [] {
        std::vector<std::string> v;
        for (const Case& c : cases()) v.push_back(c.name);
        return v;
    }();
    return names;
}

INSTANTIATE_TEST_SUITE_P(AllOps, Parity, ::testing::Range(0, int(case_names().size())),
                         [](const ::testing::TestParamInfo<int>& i) {
                             std::string n = case_names()[size_t(i.param)];
                             for (char& ch : n)
                                 if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                             return n + "_" + std::to_string(i.param);
                         });

}  // namespace
}  // namespace frost::ops
