// op_moe through the one dispatch point on the CPU backend: runs from a copy of its params (the
// caller's struct may change after recording) with the same result as the reference kernel
// called directly, reports a cost that counts only the k routed (+ shared) experts of E, rejects
// bad params at record time naming the op, and every backend table has the slot.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/moe.h"
#include "ops/ops.h"
#include "ops/ops_test_util.h"

namespace frost::ops {
namespace {

using Ctx = test::OpsCtx;

struct MoeData {
    int H = 24, E = 6, k = 2, I = 8, Is = 16, rows = 3;
    std::vector<float> x, y, router, gu, down, sgu, sdown, sg, probs, w, work;
    std::vector<int32_t> ids;
    MoeData() {
        std::mt19937 r(std::random_device{}());
        std::normal_distribution<float> d(0.0f, 0.3f);
        auto fill = [&](std::vector<float>& v, size_t n) {
            v.resize(n);
            for (auto& f : v) f = d(r);
        };
        fill(x, size_t(rows) * H); fill(y, size_t(rows) * H); fill(router, size_t(E) * H);
        fill(gu, size_t(E) * 2 * I * H); fill(down, size_t(E) * H * I); fill(sgu, size_t(2) * Is * H);
        fill(sdown, size_t(H) * Is); fill(sg, size_t(H));
        probs.assign(size_t(rows) * E, std::numeric_limits<float>::quiet_NaN());
        w.assign(size_t(rows) * k, std::numeric_limits<float>::quiet_NaN());
        work.assign(size_t(rows) * kernels::moe_work_floats(H, I, Is), std::numeric_limits<float>::quiet_NaN());
        ids.assign(size_t(rows) * k, -1);
    }
    MoeOp op() {
        const DType f = DType::F32;
        MoeOp p;
        p.x = mat(x.data(), f, rows, H, H); p.y = mat(y.data(), f, rows, H, H);
        p.router = mat(router.data(), f, E, H, H);
        p.experts_gate_up = mat(gu.data(), f, int64_t(E) * 2 * I, H, H);
        p.experts_down = mat(down.data(), f, int64_t(E) * H, I, I);
        p.shared_gate_up = mat(sgu.data(), f, 2 * Is, H, H);
        p.shared_down = mat(sdown.data(), f, H, Is, Is);
        p.shared_gate = mat(sg.data(), f, 1, H, H);
        p.probs = mat(probs.data(), f, rows, E, E);
        p.topk_ids = mat(ids.data(), DType::I32, rows, k, k);
        p.topk_w = mat(w.data(), f, rows, k, k);
        p.work = vec(work.data(), f, int64_t(work.size()));
        p.E = E; p.k = k; p.I = I; p.Is = Is; p.norm_topk = 1; p.rows = {rows, nullptr};
        return p;
    }
    kernels::MoeParams params() {
        kernels::MoeParams p{};
        p.x = x.data(); p.y = y.data(); p.router = router.data(); p.experts_gate_up = gu.data();
        p.experts_down = down.data(); p.shared_gate_up = sgu.data(); p.shared_down = sdown.data();
        p.shared_gate = sg.data(); p.probs = probs.data(); p.topk_ids = ids.data(); p.topk_w = w.data();
        p.work = work.data(); p.H = H; p.E = E; p.k = k; p.I = I; p.Is = Is; p.norm_topk = 1; p.max_rows = rows;
        return p;
    }
};

TEST(OpsMoe, RunsFromACopyAndEqualsTheKernel) {
    Ctx c;
    MoeData a, b;
    b = a;
    MoeOp p = a.op();
    std::vector<OpRecord> seen;
    const OpObserver obs = [&](const OpRecord& r) { seen.push_back(r); };
    ASSERT_EQ(op_moe(c.exec(&obs), p), FROST_OK) << frost_last_error();
    p.k = 0;  // changing the caller's struct after the launch does not change what runs
    ASSERT_EQ(frost_stream_sync(c.st), FROST_OK) << frost_last_error();
    ASSERT_EQ(kernels::cpu::moe(b.params()), FROST_OK);
    EXPECT_EQ(0, std::memcmp(a.y.data(), b.y.data(), sizeof(float) * a.y.size()));
    EXPECT_EQ(a.ids, b.ids);
    EXPECT_EQ(0, std::memcmp(a.probs.data(), b.probs.data(), sizeof(float) * a.probs.size()));
    ASSERT_EQ(seen.size(), 1u);
    EXPECT_EQ(seen[0].kind, OpKind::Moe);
    // 2 * rows * H * (E + 3 k I + 3 Is + 1) FLOPs: k of E experts, not all E.
    EXPECT_DOUBLE_EQ(seen[0].cost.flops, 2.0 * a.rows * a.H * (a.E + 3.0 * a.k * a.I + 3.0 * a.Is + 1));
}

TEST(OpsMoe, CostCountsActiveExpertsOnly) {
    MoeData a;
    MoeOp p = a.op();
    p.rows = {1, nullptr};
    const OpCost one = cost_of(p);
    // Weights of one decode row: router + k experts + shared expert + gate, fp32.
    const double w = 4.0 * a.H * (a.E + 3.0 * a.k * a.I + 3.0 * a.Is + 1);
    EXPECT_GE(one.bytes, w);
    EXPECT_LT(one.bytes, w + 4.0 * 8 * a.H);  // plus activations only, never the idle experts
    p.rows = {1000, nullptr};  // many rows: every expert read once, not once per row
    const OpCost many = cost_of(p);
    const double all = 4.0 * a.H * (a.E + 3.0 * a.E * a.I + 3.0 * a.Is + 1);
    EXPECT_GE(many.bytes, all);
    EXPECT_LT(many.bytes, all + 1000.0 * (4 * 3 * a.H + 4 * a.E + 8 * a.k) + 1);
}

// Quantized experts (kept so on CUDA) count their packed bytes + scales per active expert, and a
// prefill (rows > 8) adds the bf16 tile every quantized expert matrix is dequantized into and
// read back from (2 bytes written + 2 read per element).
// An FP8 view with one f32 scale per 128 x 128 block (views only: the cost model reads no data).
Tensor fp8_view(Tensor t) {
    t.dtype = DType::FP8_E4M3;
    t.scale = t.data;
    t.scale_block = 128;
    t.scale_rows = 128;
    return t;
}

TEST(OpsMoe, CostOfQuantizedExpertsCountsPackedBytesAndThePrefillTile) {
    MoeData a;
    MoeOp p = a.op();
    const MoeOp dense = p;
    const auto fp8 = fp8_view;
    p.experts_gate_up = fp8(p.experts_gate_up);
    p.experts_down = fp8(p.experts_down);
    p.shared_gate_up = fp8(p.shared_gate_up);
    p.shared_down = fp8(p.shared_down);
    const double E = a.E, H = a.H, I = a.I, Is = a.Is;
    auto fp8_bytes = [](double n, double k) { return n * k + std::ceil(n / 128) * std::ceil(k / 128) * 4; };
    const double per_expert = (fp8_bytes(E * 2 * I, H) + fp8_bytes(E * H, I)) / E;
    const double shared = fp8_bytes(2 * Is, H) + fp8_bytes(H, Is);
    for (const int rows : {1, 2, 1000}) {
        p.rows = {rows, nullptr};
        MoeOp d = dense;
        d.rows = p.rows;
        const double active = std::min(E, double(rows) * a.k);
        const double f32_weights = 4.0 * (active * 3 * I * H + 3 * Is * H);  // the fp32 views' expert bytes
        const double tile = rows > 8 ? 4.0 * (E * 2 * I * H + E * H * I + 2 * Is * H + H * Is) : 0.0;
        EXPECT_NEAR(cost_of(p).bytes, cost_of(d).bytes - f32_weights + active * per_expert + shared + tile, 1e-6)
            << rows << " rows";
        EXPECT_EQ(cost_of(p).flops, cost_of(d).flops) << rows << " rows";
    }
}

// quant_act over FP8 experts in 128 x 128 blocks (the CUDA W8A8 prefill, cuda_ops.cpp moe_w8a8):
// no dequantized tile; x and the expert activations [rows * (k + 1), I] are read once more and
// written as e4m3 + one f32 scale per 128. Decode rows, and experts of other scale blocks, keep
// the cost without it.
TEST(OpsMoe, CostOfW8a8PrefillCountsTheQuantizedActivationsNotTheTile) {
    MoeData a;
    a.Is = a.I;  // the W8A8 grouped GEMMs need the shared expert as wide as the routed ones
    MoeOp p = a.op();
    p.experts_gate_up = fp8_view(p.experts_gate_up);
    p.experts_down = fp8_view(p.experts_down);
    p.shared_gate_up = fp8_view(p.shared_gate_up);
    p.shared_down = fp8_view(p.shared_down);
    const double E = a.E, H = a.H, I = a.I, rows = 1000;
    p.rows = {int32_t(rows), nullptr};
    MoeOp q = p;
    q.quant_act = 1;
    const double tile = 4.0 * (E * 2 * I * H + E * H * I + 2 * I * H + H * I);
    const double act = rows * (a.k + 1) * I;
    const double quant = rows * H * 4.0 + act * 2.0 + (rows * H + act) * (1.0 + 4.0 / 128.0);
    EXPECT_NEAR(cost_of(q).bytes, cost_of(p).bytes - tile + quant, 1e-6);
    EXPECT_EQ(cost_of(q).flops, cost_of(p).flops);
    // The FP8 tensor cores run the routed and shared experts, not the router or the shared gate.
    EXPECT_DOUBLE_EQ(cost_of(q).flops_fp8, 2.0 * rows * H * (3.0 * a.k * I + 3.0 * I));
    EXPECT_LT(cost_of(q).flops_fp8, cost_of(q).flops);
    EXPECT_EQ(cost_of(p).flops_fp8, 0.0) << "exact: bf16 tiles";
    q.rows = p.rows = {1, nullptr};
    EXPECT_EQ(cost_of(q).bytes, cost_of(p).bytes) << "decode";
    EXPECT_EQ(cost_of(q).flops_fp8, 0.0) << "decode";
    q.rows = p.rows = {int32_t(rows), nullptr};
    q.experts_down.scale_rows = p.experts_down.scale_rows = 1;  // per-row scales: the exact path's tile
    EXPECT_EQ(cost_of(q).bytes, cost_of(p).bytes);
    // One scale per row (per-channel, compressed-tensors FP8-dynamic) on all four: W8A8 again.
    for (MoeOp* o : {&p, &q})
        for (Tensor* t : {&o->experts_gate_up, &o->experts_down, &o->shared_gate_up, &o->shared_down}) {
            t->scale_rows = 1;
            t->scale_block = int32_t(t->shape[1]);
        }
    EXPECT_NEAR(cost_of(q).bytes, cost_of(p).bytes - tile + quant, 1e-6);
    EXPECT_DOUBLE_EQ(cost_of(q).flops_fp8, 2.0 * rows * H * (3.0 * a.k * I + 3.0 * I));
}

TEST(OpsMoe, BadParamsRefusedNamingTheOp) {
    Ctx c;
    MoeData a;
    MoeOp p = a.op();
    p.k = p.E + 1;
    EXPECT_EQ(op_moe(c.exec(), p), FROST_ERR_INVALID_ARG);
    EXPECT_NE(std::string(frost_last_error()).find("op_moe"), std::string::npos) << frost_last_error();
    p = a.op();
    p.topk_ids = Tensor{};
    EXPECT_EQ(op_moe(c.exec(), p), FROST_ERR_INVALID_ARG);
    p = a.op();
    p.experts_down = mat(a.down.data(), DType::F32, int64_t(a.E) * a.H, a.I - 1, a.I - 1);  // wrong expert width
    EXPECT_EQ(op_moe(c.exec(), p), FROST_ERR_INVALID_ARG);
    p = a.op();
    p.work = vec(a.work.data(), DType::F32, 1);  // smaller than the backend's moe_work_floats
    EXPECT_EQ(op_moe(c.exec(), p), FROST_ERR_INVALID_ARG);
    EXPECT_NE(std::string(frost_last_error()).find("moe"), std::string::npos) << frost_last_error();
}

}  // namespace
}  // namespace frost::ops
