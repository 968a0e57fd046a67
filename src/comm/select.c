/*
 * select.c - the rule of select.h: which transports accept a pair of chips, and which one is
 * taken.
 */
#include "comm/select.h"

#include <stdarg.h>
#include <stdio.h>

/* The contracts by id, from the one list. */
#define COMM_TL_ROW_(id, name, tl) [id] = &tl,
static const px_comm_tl *const comm_tls[PX_COMM_TL_COUNT] = {PX_COMM_TL_MAP(COMM_TL_ROW_)};
#undef COMM_TL_ROW_

const px_comm_tl *comm_tl_of(int id)
{
    return id > 0 && id < PX_COMM_TL_COUNT ? comm_tls[id] : NULL;
}

/* Fills ch->reason for the chosen ch->tl under forced (comm_choice_reason's rule). */
static void comm_choice_explain(comm_choice *ch, int forced)
{
    const char *why = ch->why[ch->tl];

    for (int t = PX_COMM_TL_DIRECT; t < ch->tl; t++) {
        if (!ch->accepts[t]) {
            why = ch->why[t]; /* the first refusal the rule fell past */
            break;
        }
        if (forced == ch->tl) {
            snprintf(ch->reason, COMM_WHY_MAX, "forced by PLEXUS_COMM_TRANSPORT=%s (%s would "
                     "work: %.*s)", comm_tl_name(forced), comm_tl_name(t), COMM_WHY_MAX - 64,
                     ch->why[t]); /* the precision: the reason may be cut, never overrun */
            return;
        }
    }
    snprintf(ch->reason, COMM_WHY_MAX, "%s", why);
}

void comm_choose(const px_caps *caps, int forced, int need_peer_ptr, int ca, int cb,
                 comm_choice *out)
{
    comm_choose_at(caps, NULL, forced, need_peer_ptr, ca, cb, out);
}

void comm_choose_at(const px_caps *caps, const comm_site *site, int forced, int need_peer_ptr,
                    int ca, int cb, comm_choice *out)
{
    comm_pair_facts f = {.caps = caps, .ca = ca, .cb = cb, .site = site};

    out->tl = PX_COMM_TL_NONE;
    out->accepts[PX_COMM_TL_NONE] = 0;
    snprintf(out->why[PX_COMM_TL_NONE], COMM_WHY_MAX, "no transport");
    for (int t = 1; t < PX_COMM_TL_COUNT; t++) {
        out->accepts[t] = comm_tls[t]->accept(&f, out->why[t], COMM_WHY_MAX);
        if (need_peer_ptr && comm_tls[t]->peer_ptr == NULL) {
            /* whatever else it lacks, it never gives peer pointers */
            out->accepts[t] = 0;
            snprintf(out->why[t], COMM_WHY_MAX, "the domain needs peer pointers "
                     "(need_peer_ptr) and %s maps no peer window", comm_tls[t]->name);
        }
    }
    for (int t = PX_COMM_TL_DIRECT; t < PX_COMM_TL_COUNT && out->tl == PX_COMM_TL_NONE; t++)
        if (out->accepts[t] && (forced == PX_COMM_TL_AUTO || forced == t))
            out->tl = t;
    comm_choice_explain(out, forced);
}

const char *comm_choice_reason(const comm_choice *ch)
{
    return ch->reason;
}

/* Appends to buf (n bytes, *len used) and keeps *len within n on truncation. */
static void comm_cat(char *buf, size_t n, size_t *len, const char *fmt, ...)
{
    va_list ap;
    int k;

    if (*len >= n)
        return;
    va_start(ap, fmt);
    k = vsnprintf(buf + *len, n - *len, fmt, ap);
    va_end(ap);
    *len = k < 0 ? n : *len + (size_t)k < n ? *len + (size_t)k : n;
}

const char *comm_choice_error(const comm_choice *ch, int forced, int need_peer_ptr, char *buf,
                              size_t n)
{
    size_t len = 0;
    int alt = 0, refused = 0;

    buf[0] = '\0';
    if (forced != PX_COMM_TL_AUTO)
        comm_cat(buf, n, &len, "forced %s (PLEXUS_COMM_TRANSPORT=%s) refused: %s",
                 comm_tl_name(forced), comm_tl_name(forced), ch->why[forced]);
    for (int t = PX_COMM_TL_DIRECT; t < PX_COMM_TL_COUNT; t++)
        if (t != forced && !ch->accepts[t])
            comm_cat(buf, n, &len, "%s%s refused (%s)", forced != PX_COMM_TL_AUTO ? "; " :
                     refused++ ? ", " : "", comm_tl_name(t), ch->why[t]);
    for (int t = PX_COMM_TL_DIRECT; t < PX_COMM_TL_COUNT; t++)
        if (t != forced && ch->accepts[t])
            comm_cat(buf, n, &len, "%s %s would work (%s)", alt++ ? "; and" :
                     "; the alternative:", comm_tl_name(t), ch->why[t]);
    if (alt > 0)
        comm_cat(buf, n, &len, "; set PLEXUS_COMM_TRANSPORT=auto (or --comm-transport auto)");
    else if (need_peer_ptr)
        comm_cat(buf, n, &len, "; a domain whose kernels need peer pointers runs only where "
                 "every pair of members can map each other's memory: choose such chips, or "
                 "drop need_peer_ptr and use put/get");
    else
        comm_cat(buf, n, &len, "; no path between these chips exists on this host");
    return buf;
}

int comm_tl_self(void)
{
    return PX_COMM_TL_DIRECT;
}

int comm_tl_like(int in_place, int proxied)
{
    for (int t = 1; t < PX_COMM_TL_COUNT; t++)
        if (!comm_tls[t]->in_place == !in_place && !comm_tls[t]->proxied == !proxied)
            return t;
    return PX_COMM_TL_NONE;
}
