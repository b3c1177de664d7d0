// SliceBudget (slice_budget.h).
#include "serve/slice_budget.h"

#include <algorithm>
#include <cmath>

namespace frost::serve {

int SliceBudget::layers(int most) const {
    if (most < 1) return 1;
    if (decode_ms_ < 0 || layer_ms_ <= 0) return 1;
    const double n = std::floor(share_ * decode_ms_ / layer_ms_);
    return int(std::clamp(n, 1.0, double(most)));
}

}  // namespace frost::serve
