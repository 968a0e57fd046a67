/*
 * select.c - the rule of select.h: which transports accept a pair of chips, and which one is
 * taken.
 */
#include "comm/select.h"

#include <stdio.h>

const char *comm_tl_name(int tl)
{
    return tl == PX_COMM_TL_DIRECT ? "direct" : tl == PX_COMM_TL_STAGED ? "staged" : "none";
}

/* direct: each chip maps the other's window: peer mapping effective, both in one group. */
static int comm_accept_direct(const px_caps *caps, const char *prof, int ca, int cb, char *why,
                              size_t n)
{
    int64_t group = px_caps_get(caps, PX_FACT_PEER_MAP_GROUP);

    if (px_caps_get(caps, PX_FACT_PEER_MAP_EFFECTIVE) == 0) {
        snprintf(why, n, "%s in profile %s",
                 px_caps_get(caps, PX_FACT_PEER_MAP) ? "peer_map=1 but memfd=0" : "peer_map=0",
                 prof);
        return 0;
    }
    if (group > 0 && ca / group != cb / group) {
        snprintf(why, n, "peer_map_group=%lld in profile %s: chips %d and %d are not in one "
                 "group", (long long)group, prof, ca, cb);
        return 0;
    }
    snprintf(why, n, "peer_map=1 in profile %s", prof);
    return 1;
}

/* staged: host memory both chips map (a memfd); the chips of one worker share the host. */
static int comm_accept_staged(const px_caps *caps, const char *prof, char *why, size_t n)
{
    if (px_caps_get(caps, PX_FACT_MEMFD) == 0) {
        snprintf(why, n, "memfd=0 on this host: no shared staging memory");
        return 0;
    }
    snprintf(why, n, "same host, host staging memory (memfd=1)");
    return 1;
}

void comm_choose(const px_caps *caps, const char *profile, int forced, int need_peer_ptr,
                 int ca, int cb, comm_choice *out)
{
    const char *prof = profile != NULL ? profile : "?";

    out->tl = PX_COMM_TL_NONE;
    out->accepts[PX_COMM_TL_NONE] = 0;
    snprintf(out->why[PX_COMM_TL_NONE], COMM_WHY_MAX, "no transport");
    out->accepts[PX_COMM_TL_DIRECT] =
        comm_accept_direct(caps, prof, ca, cb, out->why[PX_COMM_TL_DIRECT], COMM_WHY_MAX);
    out->accepts[PX_COMM_TL_STAGED] =
        comm_accept_staged(caps, prof, out->why[PX_COMM_TL_STAGED], COMM_WHY_MAX);
    if (need_peer_ptr && out->accepts[PX_COMM_TL_STAGED]) {
        out->accepts[PX_COMM_TL_STAGED] = 0;
        snprintf(out->why[PX_COMM_TL_STAGED], COMM_WHY_MAX, "the domain needs peer pointers "
                 "(need_peer_ptr) and staged maps no peer window");
    }
    for (int t = PX_COMM_TL_DIRECT; t < PX_COMM_TL_COUNT && out->tl == PX_COMM_TL_NONE; t++)
        if (out->accepts[t] && (forced == PX_COMM_TL_AUTO || forced == t))
            out->tl = t;
    out->reason[0] = '\0';
    if (out->tl == PX_COMM_TL_NONE)
        return;
    if (forced != PX_COMM_TL_AUTO) {
        size_t len = (size_t)snprintf(out->reason, COMM_WHY_MAX, "forced by "
                                      "PLEXUS_COMM_TRANSPORT=%s", comm_tl_name(forced));

        for (int t = PX_COMM_TL_DIRECT; t < out->tl && len < COMM_WHY_MAX; t++)
            len += (size_t)snprintf(out->reason + len, COMM_WHY_MAX - len, "; %s %s", comm_tl_name(t),
                                    out->accepts[t] ? "would work too" : "refused");
        return;
    }
    if (out->tl == PX_COMM_TL_DIRECT) {
        snprintf(out->reason, COMM_WHY_MAX, "%s", out->why[PX_COMM_TL_DIRECT]);
        return;
    }
    /* a later transport: the reason is why the earlier ones refused */
    snprintf(out->reason, COMM_WHY_MAX, "%s", out->why[PX_COMM_TL_DIRECT]);
}

const char *comm_choice_reason(const comm_choice *ch)
{
    return ch->reason;
}

const char *comm_choice_error(const comm_choice *ch, int forced, int need_peer_ptr, char *buf,
                              size_t n)
{
    size_t len;
    int alt = 0;

    if (forced != PX_COMM_TL_AUTO)
        len = (size_t)snprintf(buf, n, "forced %s (PLEXUS_COMM_TRANSPORT) refused: %s",
                               comm_tl_name(forced), ch->why[forced]);
    else
        len = (size_t)snprintf(buf, n, "direct refused (%s), staged refused (%s)",
                               ch->why[PX_COMM_TL_DIRECT], ch->why[PX_COMM_TL_STAGED]);
    for (int t = PX_COMM_TL_DIRECT; t < PX_COMM_TL_COUNT && len < n; t++) {
        if (!ch->accepts[t] || t == forced)
            continue;
        len += (size_t)snprintf(buf + len, n - len, "%s %s would work (%s)",
                                alt++ ? "; and" : "; the alternative:", comm_tl_name(t),
                                ch->why[t]);
    }
    if (len < n && alt > 0)
        snprintf(buf + len, n - len, "; set PLEXUS_COMM_TRANSPORT=auto (or --comm-transport "
                 "auto)");
    else if (len < n && need_peer_ptr)
        snprintf(buf + len, n - len, "; a domain whose kernels need peer pointers runs only "
                 "where every pair of members can map each other's memory: choose such "
                 "chips, or drop need_peer_ptr and use put/get");
    else if (len < n)
        snprintf(buf + len, n - len, "; no path between these chips exists on this host");
    return buf;
}
