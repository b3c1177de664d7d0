// op_moe on the CPU backend: runs from a copy of its params (the caller's struct may change
// after recording) with the same result as the kernel called directly, reports a cost that
// counts only k of E experts per row, rejects bad params at record time naming the op, and is
// UNSUPPORTED by name on a CUDA stream (no launcher wired yet).
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>
#include <string>

#include "kernels/cpu/moe.h"
#include "ops/ops.h"

namespace frost::ops {
namespace {

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
        work.assign(size_t(rows) * kernels::moe_work_floats(H, I, Is), 0.0f);
        ids.assign(size_t(rows) * k, -1);
    }
    MoeParams params() {
        MoeParams p{};
        p.x = x.data(); p.y = y.data(); p.router = router.data(); p.experts_gate_up = gu.data();
        p.experts_down = down.data(); p.shared_gate_up = sgu.data(); p.shared_down = sdown.data();
        p.shared_gate = sg.data(); p.probs = probs.data(); p.topk_ids = ids.data(); p.topk_w = w.data();
        p.work = work.data(); p.H = H; p.E = E; p.k = k; p.I = I; p.Is = Is; p.norm_topk = 1; p.max_rows = rows;
        return p;
    }
};

TEST(OpsMoe, RunsFromACopyAndEqualsTheKernel) {
    MoeData a, b;
    b = a;
    frost_ctx* ctx = nullptr;
    frost_stream* st = nullptr;
    ASSERT_EQ(frost_ctx_create(FROST_BACKEND_CPU, 0, &ctx), FROST_OK);
    ASSERT_EQ(frost_stream_create(ctx, 0, &st), FROST_OK);
    MoeParams p = a.params();
    OpCost cost;
    ASSERT_EQ(op_moe(st, p, &cost), FROST_OK) << frost_last_error();
    p.k = 0;  // changing the caller's struct after the launch does not change what runs
    ASSERT_EQ(frost_stream_sync(st), FROST_OK) << frost_last_error();
    ASSERT_EQ(kernels::cpu::moe(b.params()), FROST_OK);
    EXPECT_EQ(0, std::memcmp(a.y.data(), b.y.data(), sizeof(float) * a.y.size()));
    EXPECT_EQ(a.ids, b.ids);
    // 2 * rows * H * (E + 3 k I + 3 Is + 1) multiply-adds: k of E experts, not all E.
    EXPECT_DOUBLE_EQ(cost.flops, 2.0 * a.rows * a.H * (a.E + 3.0 * a.k * a.I + 3.0 * a.Is + 1));
    frost_ctx_destroy(ctx);
}

TEST(OpsMoe, BadParamsRefusedNamingTheOp) {
    frost_ctx* ctx = nullptr;
    frost_stream* st = nullptr;
    ASSERT_EQ(frost_ctx_create(FROST_BACKEND_CPU, 0, &ctx), FROST_OK);
    ASSERT_EQ(frost_stream_create(ctx, 0, &st), FROST_OK);
    MoeData a;
    MoeParams p = a.params();
    p.k = p.E + 1;
    EXPECT_EQ(op_moe(st, p), FROST_ERR_INVALID_ARG);
    EXPECT_NE(std::string(frost_last_error()).find("op_moe"), std::string::npos) << frost_last_error();
    p = a.params();
    p.topk_ids = nullptr;
    EXPECT_EQ(op_moe(st, p), FROST_ERR_INVALID_ARG);
    frost_ctx_destroy(ctx);
    if (!frost_backend_available(FROST_BACKEND_CUDA)) return;
    ASSERT_EQ(frost_ctx_create(FROST_BACKEND_CUDA, 0, &ctx), FROST_OK);
    ASSERT_EQ(frost_stream_create(ctx, 0, &st), FROST_OK);
    EXPECT_EQ(op_moe(st, a.params()), FROST_ERR_UNSUPPORTED);
    EXPECT_NE(std::string(frost_last_error()).find("op_moe"), std::string::npos) << frost_last_error();
    frost_ctx_destroy(ctx);
}

}  // namespace
}  // namespace frost::ops
