// The host's one page walk: where a request's KV position lives in a paged pool
// (docs/DESIGN.md section 3). Every index is int64: a position may be anything below kv_len
// <= 2^31 - 1, so stepping past the last one a page at a time (first + page_size) or a row id
// (a page id times page_size, up to 2^38) would overflow int32. Everything on the host that
// walks a page table (the KV commit and its checks, the CPU backends, the demo's store) goes
// through these functions.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/check.h"
#include "treeverify/status.h"

namespace treeverify::detail {

// Pages that hold `tokens` positions: ceil(tokens / page_size).
inline int64_t pages_for(int64_t tokens, int32_t page_size) {
  return (tokens + page_size - 1) / page_size;
}

// Row of position `pos` in the pool's [num_pages * page_size] rows, for a request whose page
// table entries start at `pages`: row pos % page_size of page pages[pos / page_size].
inline int64_t paged_row(const int32_t* pages, int32_t page_size, int64_t pos) {
  return int64_t{pages[pos / page_size]} * page_size + pos % page_size;
}

// Positions [begin, end) of a request page by page: Status f(first, count, row) for each run
// of positions first .. first + count - 1 that one page holds, in rows row .. row + count - 1;
// the walk stops at the first error f returns, and returns it.
template <class F>
Status for_each_page_run(const int32_t* pages, int32_t page_size, int64_t begin, int64_t end,
                         const F& f) {
  for (int64_t first = begin; first < end;) {
    const int64_t offset = first % page_size;
    const int64_t count = std::min<int64_t>(page_size - offset, end - first);
    TV_RETURN_IF_ERROR(f(first, count, int64_t{pages[first / page_size]} * page_size + offset));
    first += count;
  }
  return Status::Ok();
}

}  // namespace treeverify::detail
