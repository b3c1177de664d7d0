// How much of a prompt's prefill one round may carry beside the batched decode step of the
// running streams (issue 16, architecture.md "Prefill beside decode"). A prefill chunk cannot
// share one pass over the weights with the decode rows (their bits must equal a solo decode's),
// so the round pays for the chunk's layers on top of the decode step; the budget keeps that
// extra at `share` of the decode step, measured, in whole layers (EngineIface sliced prefill).
// Outputs do not depend on it: a slice's bits are its chunk's whatever the cut.
#pragma once

namespace frost::serve {

class SliceBudget {
public:
    explicit SliceBudget(double share) : share_(share) {}
    // A batched decode step's wall time, and a sliced call of `layers` layers.
    void note_decode(double ms) { decode_ms_ = mix(decode_ms_, ms); }
    void note_layers(int layers, double ms) {
        if (layers > 0) layer_ms_ = mix(layer_ms_, ms / layers);
    }
    // Layers the next sliced call may run (at least 1, at most `most`); 1 until a call was timed.
    int layers(int most) const;
    double decode_ms() const { return decode_ms_; }
    double layer_ms() const { return layer_ms_; }

private:
    // Exponential average (the first sample taken whole), so one slow step moves it a little.
    static double mix(double avg, double x) { return avg < 0 ? x : 0.75 * avg + 0.25 * x; }
    double share_;
    double decode_ms_ = -1, layer_ms_ = -1;
};

}  // namespace frost::serve
