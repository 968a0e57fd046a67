/*
 * cmd_doctor_dfx.c - the DFX part of `plexus doctor`: the transport each collector would
 * use and every refusal with its reason.
 *
 * It calls the selection code a run uses (px_dfx_plan, src/dfx/transport/select.c) on the
 * probed facts, for every collector (or those of --dfx / PLEXUS_DFX) under the allow-list of
 * --dfx-transport / PLEXUS_DFX_TRANSPORT, sized for this configuration's cores; it never
 * re-derives a policy. When the allow-list leaves nothing, the run's error is shown too.
 */
#include "cli.h"

#include <string.h>

#include "caps/caps_internal.h"
#include "dfx/transport/transport.h"

/* Plans c's collectors (all when DFX is off); returns the plan's status, message kept. */
static px_status doctor_dfx_plan(const px_caps *caps, const px_config *c, uint32_t *colls,
                                 px_dfx_choice ch[PX_DFX_NCOLLECTORS], char *err, size_t n)
{
    int cores = c->cores > 0 ? c->cores : (int)px_caps_get(caps, PX_FACT_ONLINE_CPUS);
    px_status st;

    *colls = (c->dfx & PX_DFX_ALL) ? (c->dfx & PX_DFX_ALL) : PX_DFX_ALL;
    st = px_dfx_plan(caps, c, *colls, (cores > 0 ? cores : 1) + 1, ch);
    snprintf(err, n, "%s", st == PX_OK ? "" : px_last_error());
    return st;
}

/* Prints the "dfx transports" section of the text report. */
void doctor_dfx_print(const px_caps *caps, const px_config *c)
{
    px_dfx_choice ch[PX_DFX_NCOLLECTORS];
    char err[CLI_WHY_MAX];
    uint32_t colls;
    px_status st = doctor_dfx_plan(caps, c, &colls, ch, err, sizeof(err));

    printf("\ndfx transports (allow-list %s; selection code of the run):\n",
           c->dfx_transport[0] ? c->dfx_transport : "auto");
    for (int i = 0; i < PX_DFX_NCOLLECTORS; i++) {
        const px_dfx_transport *t = px_dfx_transport_get(ch[i].transport);

        if (!(colls & (1u << i)))
            continue;
        printf("  %-12s via %s\n", px_dfx_collector_name(i), t ? t->name : "nothing");
        for (int r = 0; r < ch[i].nrefused; r++)
            printf("  %-12s   refused %s: %s\n", "", ch[i].refused[r].name,
                   ch[i].refused[r].reason);
    }
    if (st != PX_OK)
        printf("  a run would fail before launch: %s\n", err);
}

/* Writes one collector's {"transport": ..., "refused": [...]}. */
static px_status doctor_dfx_json_one(const px_dfx_choice *ch, FILE *f)
{
    const px_dfx_transport *t = px_dfx_transport_get(ch->transport);
    px_status st = PX_OK;

    fprintf(f, "{\"transport\": %s%s%s, \"refused\": [", t ? "\"" : "", t ? t->name : "null",
            t ? "\"" : "");
    for (int r = 0; r < ch->nrefused && st == PX_OK; r++) {
        fprintf(f, "%s{\"name\": \"%s\", \"reason\": ", r ? ", " : "", ch->refused[r].name);
        st = px_caps_json_string(f, ch->refused[r].reason);
        fputc('}', f);
    }
    fputs("]}", f);
    return st;
}

/* Writes the "dfx" member of doctor's "paths" object (no key). Returns PX_OK or PX_EIO. */
px_status doctor_dfx_json(const px_caps *caps, const px_config *c, FILE *f)
{
    px_dfx_choice ch[PX_DFX_NCOLLECTORS];
    char err[CLI_WHY_MAX];
    uint32_t colls;
    px_status st = doctor_dfx_plan(caps, c, &colls, ch, err, sizeof(err)), wst;
    int first = 1;

    fprintf(f, "{\"allow\": \"%s\", \"ok\": %s, \"error\": ",
            c->dfx_transport[0] ? c->dfx_transport : "auto", st == PX_OK ? "true" : "false");
    wst = px_caps_json_string(f, err);
    fputs(", \"collectors\": {", f);
    for (int i = 0; i < PX_DFX_NCOLLECTORS && wst == PX_OK; i++) {
        if (!(colls & (1u << i)))
            continue;
        fprintf(f, "%s\n      \"%s\": ", first ? "" : ",", px_dfx_collector_name(i));
        wst = doctor_dfx_json_one(&ch[i], f);
        first = 0;
    }
    fputs("\n    }}", f);
    return wst;
}
