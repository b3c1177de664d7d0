// A progress bar on stderr for long operations: it appears only after the operation has run for
// more than a second and only when stderr is a terminal, so logs and tests stay clean.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace frost::util {

class Progress {
public:
    Progress(std::string label, uint64_t total, bool enabled = true);
    ~Progress();  // finishes the line if anything was drawn
    void add(uint64_t n);  // thread-compatible only: call from one thread
    void set(uint64_t done);
    void finish();

private:
    void draw(bool final_line);
    std::string label_;
    uint64_t total_, done_ = 0;
    bool active_;       // stderr is a tty and the caller wants a bar
    bool drawn_ = false;
    std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace frost::util
