#!/usr/bin/env bash
# On the device machine: unpacks the compressed .devpkg/ that bench/tools/device_package.sh made
# (a file already unpacked by an earlier call on the same machine is kept).
set -euo pipefail
cd "$(dirname "$0")/../.."
for f in .devpkg/bin/*.gz .devpkg/lib/*.gz; do
  [ -e "$f" ] || continue
  gunzip -f "$f"
done
chmod +x .devpkg/bin/* 2>/dev/null || true
