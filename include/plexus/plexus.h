/*
 * plexus/plexus.h - umbrella header: include this one.
 */
#ifndef PLEXUS_PLEXUS_H
#define PLEXUS_PLEXUS_H

#include <plexus/api.h>
#include <plexus/status.h>
#include <plexus/config.h>
#include <plexus/tensor.h>
#include <plexus/args.h>
#include <plexus/worker.h>
#include <plexus/level3.h>
#include <plexus/comm.h>
#include <plexus/caps.h>
#include <plexus/dfx.h>

#define PX_VERSION_MAJOR 0
#define PX_VERSION_MINOR 1
#define PX_VERSION_PATCH 0
#define PX_VERSION_STRING "0.1.0"

#endif
