/*
 * select.h - the one rule that picks the transport of a pair of ranks (DESIGN 3.2, 3.5).
 *
 * Transports are tried in the order of the one list (tl_list.h: direct, then staged); each
 * says through its contract's accept() whether it may carry the pair, and the first that
 * accepts wins unless PLEXUS_COMM_TRANSPORT forces one. Every transport's verdict keeps its
 * reason, so the logs, errors, `plexus doctor --comm` and dfx.json all say the same words.
 * The parent applies the rule once per pair to the facts of the host (every chip of a
 * level-3 worker runs on it with the same profile) and sends the table to the members, so no
 * two ranks can disagree; a direct mapping that then fails on a chip is the fallback's
 * business (domain_setup.c), not this rule's.
 */
#ifndef PX_COMM_SELECT_H
#define PX_COMM_SELECT_H

#include <plexus/caps.h>

#include "comm/comm.h"
#include "util/tl_list.h"

#define COMM_WHY_MAX 192

/* "direct", "staged" ("none" for PX_COMM_TL_NONE, "auto" is not a transport). */
static inline const char *comm_tl_name(int tl)
{
    return px_comm_tl_name(tl);
}

/* The contract of transport id (NULL for PX_COMM_TL_NONE or an unknown id). */
const px_comm_tl *comm_tl_of(int id);

typedef struct comm_choice {
    int tl;                                /* the chosen transport, or PX_COMM_TL_NONE */
    int accepts[PX_COMM_TL_COUNT];         /* 1 where transport t would accept the pair */
    char why[PX_COMM_TL_COUNT][COMM_WHY_MAX]; /* per transport: why it accepts or refuses */
    char reason[COMM_WHY_MAX];             /* why tl: the refusal that made the rule fall
                                            * past an earlier transport, the force, or tl's
                                            * own why (comm_choice_reason) */
} comm_choice;

/*
 * Applies the rule to chips ca and cb under the facts caps (the profile's name, for the words,
 * is caps' device_profile) with forced (PX_COMM_TL_AUTO or a transport) and need_peer_ptr (the
 * domain's kernels dereference peers' windows: only direct will do). Fills *out; out->tl is
 * PX_COMM_TL_NONE when nothing may be used, and comm_choice_error then says why.
 */
void comm_choose(const px_caps *caps, int forced, int need_peer_ptr, int ca, int cb,
                 comm_choice *out);

/* The same with the pair's site (comm.h: hosts and MPI; NULL as comm_choose). */
void comm_choose_at(const px_caps *caps, const comm_site *site, int forced, int need_peer_ptr,
                    int ca, int cb, comm_choice *out);

/*
 * Returns why the pair uses ch->tl, the words of the log line: where an earlier transport
 * refused, that refusal ("peer_map=0 in profile a2a3-pcie" for staged); where a force passed
 * over one that accepts, the force ("forced by PLEXUS_COMM_TRANSPORT=staged"); else the
 * chosen transport's own why ("peer_map=1 in profile default"). "no transport" for none.
 */
const char *comm_choice_reason(const comm_choice *ch);

/*
 * When out->tl is PX_COMM_TL_NONE: writes what failed, every other refusal and the
 * alternatives into buf and returns buf: "forced direct (PLEXUS_COMM_TRANSPORT=direct)
 * refused: peer_map=0 in profile a2a3-pcie; the alternative: staged would work (same host,
 * host staging memory (memfd=1)); set PLEXUS_COMM_TRANSPORT=auto (or --comm-transport auto)",
 * or under auto "direct refused (...), staged refused (...); no path between these chips
 * exists on this host".
 */
const char *comm_choice_error(const comm_choice *ch, int forced, int need_peer_ptr, char *buf,
                              size_t n);

/* The self-pair rule: the transport of a rank with itself (its own window, through loads and
 * stores, as direct reaches a peer's), also the summary of a domain of one rank. */
int comm_tl_self(void);

/* The first transport of the list, in its order, that reads a peer's bytes in place (or not:
 * in_place 0) and is served by the MPI proxy (or not: proxied 0); PX_COMM_TL_NONE when none
 * is so. For a table that must keep a property of every pair without naming a transport. */
int comm_tl_like(int in_place, int proxied);

#endif
