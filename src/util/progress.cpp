// Progress bar: redraws at most every 100 ms once the operation has lasted past the 1 s delay.
#include "util/progress.h"

#include <unistd.h>

#include <cstdio>

namespace frost::util {
namespace {
constexpr auto kShowAfter = std::chrono::seconds(1);
constexpr auto kRedrawEvery = std::chrono::milliseconds(100);
constexpr int kBarWidth = 30;
constexpr double kBytesPerGB = 1e9;
}  // namespace

Progress::Progress(std::string label, uint64_t total, bool enabled)
    : label_(std::move(label)), total_(total), active_(enabled && isatty(STDERR_FILENO)),
      start_(std::chrono::steady_clock::now()), last_draw_(start_) {}

Progress::~Progress() { finish(); }

void Progress::add(uint64_t n) { set(done_ + n); }

void Progress::set(uint64_t done) {
    done_ = done;
    if (!active_) return;
    auto now = std::chrono::steady_clock::now();
    if (now - start_ < kShowAfter || now - last_draw_ < kRedrawEvery) return;
    last_draw_ = now;
    draw(false);
}

void Progress::finish() {
    if (active_ && drawn_) draw(true);
    active_ = false;
}

void Progress::draw(bool final_line) {
    double frac = total_ ? double(done_) / double(total_) : 1.0;
    if (frac > 1.0) frac = 1.0;
    int filled = int(frac * kBarWidth);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    double rate = secs > 0 ? double(done_) / secs / kBytesPerGB : 0.0;
    std::string bar(size_t(filled), '#');
    bar.append(size_t(kBarWidth - filled), '.');
    std::fprintf(stderr, "\r%s [%s] %5.1f%% %.2f GB/s%s", label_.c_str(), bar.c_str(), frac * 100.0,
                 rate, final_line ? "\n" : "");
    std::fflush(stderr);
    drawn_ = true;
}

}  // namespace frost::util
