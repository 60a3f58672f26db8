// treeverify: MLA tree-verify attention for speculative decoding. The whole public API.
#pragma once

#include "treeverify/ddtree.h"
#include "treeverify/half.h"
#include "treeverify/merge.h"
#include "treeverify/status.h"
#include "treeverify/system.h"
#include "treeverify/tree.h"
#include "treeverify/tuning.h"  // overrides for tests and benchmarks
#include "treeverify/types.h"
#include "treeverify/verify.h"
