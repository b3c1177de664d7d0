// SliceBudget (slice_budget.h): the layers a round may carry are share x the measured decode step
// over the measured time of one layer, in [1, most]; one layer until a sliced call was timed;
// the averages follow new timings without jumping on one outlier.
#include <gtest/gtest.h>

#include <random>

#include "serve/slice_budget.h"

using frost::serve::SliceBudget;

TEST(SliceBudget, OneLayerUntilTimed) {
    SliceBudget b(0.6);
    EXPECT_EQ(b.layers(32), 1);
    b.note_decode(6.0);
    EXPECT_EQ(b.layers(32), 1);  // no layer timed yet
    SliceBudget c(0.6);
    c.note_layers(2, 1.0);
    EXPECT_EQ(c.layers(32), 1);  // no decode step timed yet
}

TEST(SliceBudget, ShareOfTheDecodeStepInWholeLayers) {
    std::mt19937 rng(std::random_device{}());
    for (int i = 0; i < 200; ++i) {
        const double share = std::uniform_real_distribution<double>(0.1, 2.0)(rng);
        const double dec = std::uniform_real_distribution<double>(0.5, 20.0)(rng);
        const double layer = std::uniform_real_distribution<double>(0.05, 3.0)(rng);
        const int k = std::uniform_int_distribution<int>(1, 8)(rng);
        const int most = std::uniform_int_distribution<int>(1, 64)(rng);
        SliceBudget b(share);
        b.note_decode(dec);
        b.note_layers(k, layer * k);
        int want = int(share * dec / layer);  // floor
        want = std::max(1, std::min(most, want));
        EXPECT_EQ(b.layers(most), want) << share << " " << dec << " " << layer << " " << most;
        EXPECT_NEAR(b.layer_ms(), layer, 1e-9);
    }
    SliceBudget b(0.6);
    EXPECT_EQ(b.layers(0), 1);
}

TEST(SliceBudget, AveragesMoveTowardNewTimings) {
    SliceBudget b(1.0);
    b.note_decode(10.0);
    b.note_layers(1, 1.0);
    EXPECT_EQ(b.layers(100), 10);
    b.note_decode(30.0);  // one slow step: the average moves a quarter of the way
    EXPECT_NEAR(b.decode_ms(), 15.0, 1e-9);
    for (int i = 0; i < 40; ++i) b.note_decode(30.0);
    EXPECT_NEAR(b.decode_ms(), 30.0, 1e-3);
    EXPECT_EQ(b.layers(100), 29);  // 30 - a little: never above the share
    b.note_layers(0, 5.0);          // no layers: ignored
    EXPECT_NEAR(b.layer_ms(), 1.0, 1e-9);
}
