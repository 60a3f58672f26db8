// Checks shared by the tree helpers and the KV commit (both take qo_indptr and kv_len).
#pragma once

#include <cstdint>
#include <span>

#include "treeverify/status.h"

namespace treeverify::detail {

// kv_len has one entry per request and each is at least the request's tree size T_b.
// qo_indptr must already be a valid CSR array.
Status validate_kv_len(std::span<const int32_t> qo_indptr, std::span<const int32_t> kv_len);

}  // namespace treeverify::detail
