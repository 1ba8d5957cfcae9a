/* The race check's vector clocks (emu_race_clock.cpp), as emu_race.cpp
 * asks them: within one barrier interval of a block, whether the running
 * thread has seen an access of another thread or agent. */
#ifndef EMU_RACE_CLOCK_H
#define EMU_RACE_CLOCK_H

#include <stdint.h>

#include "emu_internal.h"

namespace race_clock {

/* A clock entry, valid only in its era (a block's barrier interval). */
struct stamp {
    uint32_t era, clk;
};

/* What a thread has seen: its warp's view and, if it acquired something
 * alone since its warp's last sync, its own. */
struct viewer {
    uint32_t era, now;       /* now: the thread's own clock (what its accesses are stamped with) */
    const stamp *warp, *own; /* own: NULL if none */
    /* Whether it has seen the access thread or agent u made at clock clk. */
    bool seen(unsigned u, uint32_t clk) const {
        if (warp[u].era == era && warp[u].clk >= clk) return true;
        return own && own[u].era == era && own[u].clk >= clk;
    }
};

/* The running thread's view, valid until its next sync. */
viewer viewer_of(const emu_race_pos &me);
/* The agent that stands for the bulk loads completing on mbarrier obj (an id above every thread's). */
unsigned agent(const void *obj);
inline bool is_agent(unsigned u) { return u >= 1024; }
} // namespace race_clock

#endif
