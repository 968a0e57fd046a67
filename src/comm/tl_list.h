/*
 * tl_list.h - the one list of comm transports now lives in util/tl_list.h (below comm/, so
 * that util/ and dfx/ include it without naming a header of comm/). This name stays only for
 * the transports' own files under transport/ that include it; new code includes
 * "util/tl_list.h".
 */
#ifndef PX_COMM_TL_LIST_H
#define PX_COMM_TL_LIST_H

#include "util/tl_list.h"

#endif
