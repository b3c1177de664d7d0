// n > 1 as one batched fork: free slots are claimed at the start, choice 0's live state is
// copied into them at the prompt's last token, and each copy runs as its own choice.
#include "serve/scheduler.h"

#include <algorithm>

#include "serve/scheduler_state.h"

namespace frost::serve {

void Scheduler::claim_fork_slots(Active& a) {
    Job& job = *a.job;
    const size_t P = job.prompt.size();
    // (echo: each choice echoes and scores its own prompt run, one after another)
    if (!engine_.fork_live_supported() || job.capsule_only || job.req.echo || P < 2 || a.pos > P - 1) return;
    std::vector<int> free;
    for (size_t s = 0; s < slots_.size(); ++s)
        if (!slots_[s].busy) free.push_back(int(s));
    if (free.size() < size_t(job.req.n - 1)) return;  // not enough slots now: one after another
    // Least recently used first: their live state is the least likely to be planned against.
    std::sort(free.begin(), free.end(), [&](int x, int y) { return slots_[size_t(x)].last_use < slots_[size_t(y)].last_use; });
    free.resize(size_t(job.req.n - 1));
    for (int s : free) {
        slots_[size_t(s)].busy = true;
        slots_[size_t(s)].journal.clear();
        slots_[size_t(s)].owner = job.owner;
        busy_slots_++;
    }
    a.batched = true;
    a.fork_slots = std::move(free);
}

void Scheduler::free_fork_slots(Active& a) {
    for (int s : a.fork_slots) {
        slots_[size_t(s)].busy = false;
        slots_[size_t(s)].last_use = ++use_clock_;
        busy_slots_--;
    }
    a.fork_slots.clear();
}

void Scheduler::fork_choices(Active& a) {
    a.forked = true;
    if (engine_.fork_live(a.slot, a.fork_slots) != FROST_OK) {
        // Nothing is lost: the other choices run one after another as without the fork.
        for (int s : a.fork_slots) slots_[size_t(s)].journal.clear();
        free_fork_slots(a);
        a.batched = false;
        return;
    }
    // Each child owns its slot from here; the ones not handed out yet stay in a.fork_slots.
    std::vector<int> slots;
    slots.swap(a.fork_slots);
    for (size_t i = 0; i < slots.size(); ++i) {
        auto c = std::make_unique<Active>();
        c->job = a.job;
        c->slot = slots[i];
        c->choice = int(i) + 1;
        c->batched = c->forked = true;
        c->pos = a.pos;
        c->usage = a.usage;
        slots_[size_t(c->slot)].journal = slots_[size_t(a.slot)].journal;
        slots_[size_t(c->slot)].exact = slots_[size_t(a.slot)].exact;
        slots_[size_t(c->slot)].last_use = ++use_clock_;
        if (!init_choice(*c)) {  // failed (and cancelled) the whole job; c released its slot
            a.fork_slots.assign(slots.begin() + long(i) + 1, slots.end());
            return;
        }
        forks_.push_back(std::move(c));
    }
}

}  // namespace frost::serve
