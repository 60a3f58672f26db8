#!/usr/bin/env bash
# Builds a variant of the `treeverify` tool with one CUDA source compiled with extra flags (an
# experiment's compile-time switch), beside the normal build, for an A/B on the device machine:
#   bench/tools/build_variant.sh OUT SOURCE FLAGS...
#   e.g. bench/tools/build_variant.sh /tmp/tv-exp1 src/cuda/sm90/verify_wgmma.cu -DTV_EXPERIMENT=1
# TV_VARIANT_TARGET=tests/treeverify_gpu_tests links the GPU tests instead of the tool.
# OUT is a stripped binary; gzip it into .devpkg/bin/ (bench/tools/device_package.sh first) and run
# it there by name. The object is compiled with build-dev's own command for SOURCE plus FLAGS,
# put into a copy of libtreeverify.a and linked with build-dev's link command, all outside
# ninja: relinking through ninja rebuilds the object without the flags, and every "variant" of
# an A/B is then the same binary. Check the variant's SASS before timing it (cuobjdump -sass on
# OUT, or bench/tools/sass_opcodes.sh on a cubin).
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 OUT SOURCE [FLAGS...]" >&2; exit 2; }
out=$(realpath -m "$1") src=$(realpath "$2")
shift 2
cd "$(dirname "$0")/../../build-dev"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# build-dev's compile command for SOURCE, with the flags added and the object redirected.
compile=$(python3 - "$src" <<'EOF'
import json, sys
for e in json.load(open("compile_commands.json")):
    if e["file"] == sys.argv[1]:
        print(e["command"])
        break
else:
    sys.exit(f"{sys.argv[1]}: not in build-dev/compile_commands.json")
EOF
)
obj=$(sed -E 's/.* -o ([^ ]+).*/\1/' <<<"$compile")
# shellcheck disable=SC2086  # the command and the flags are word lists
${compile/ -o $obj/ -o $work/$(basename "$obj")} "$@"
cp src/libtreeverify.a "$work/"
ar r "$work/libtreeverify.a" "$work/$(basename "$obj")"
target=${TV_VARIANT_TARGET:-tools/treeverify}
link=$(ninja -t commands "$target" | tail -1 | sed 's/^: && //; s/ && .*$//')
link=${link/ -o $target / -o $out }
# shellcheck disable=SC2086
${link/ src\/libtreeverify.a / $work/libtreeverify.a }
strip "$out"
echo "$out: $(basename "$src") with $*"
