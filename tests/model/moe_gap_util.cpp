#include "model/moe_gap_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

namespace frost::test {

RouterGaps router_gaps(model::Engine& e, int valid) {
    const model::ModelConfig& c = e.config();
    const int E = c.num_experts, k = c.num_experts_per_tok;
    RouterGaps g;
    g.gap.assign(size_t(valid), 1.0);
    g.experts.assign(size_t(valid), {});
    for (int l = 0; l < c.num_layers; ++l) {
        if (!c.is_moe_layer(l)) continue;
        std::vector<float> probs;
        int rows = 0;
        EXPECT_EQ(e.read_trace("router_probs", l, &probs, &rows), FROST_OK) << frost_last_error();
        EXPECT_LE(valid, rows) << "router_probs trace of layer " << l << " holds fewer rows than asked";
        for (int r = 0; r < valid && r < rows; ++r) {
            const float* p = probs.data() + size_t(r) * size_t(E);
            std::vector<int> order(static_cast<size_t>(E));
            std::iota(order.begin(), order.end(), 0);
            // Ties keep the lower id first, as both backends' top-k do. A total order (the id breaks
            // ties) instead of std::stable_sort: gcc 13 warned (-Wfree-nonheap-object) on
            // stable_sort's temporary buffer here, a false positive; the order is the same.
            std::sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
            g.gap[size_t(r)] = std::min(g.gap[size_t(r)], double(p[order[size_t(k) - 1]]) - double(p[order[size_t(k)]]));
            // The top k by id, sorted in place: gcc 13 raised the same false positive on a vector
            // copied from order's first k.
            std::sort(order.begin(), order.begin() + k);
            for (int j = 0; j < k; ++j) g.experts[size_t(r)].push_back(order[size_t(j)]);
        }
    }
    return g;
}

}  // namespace frost::test
