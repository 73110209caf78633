#!/usr/bin/env bash
# Edit latency of the working tree beside a base revision, measured in the same run.
#
#   crates/keel-tools/benches/edit_latency_vs.sh [BASE] [ROUNDS]
#
# Builds benches/edit_latency.rs (release) at BASE (default: main; the bench file is copied
# into a temporary git worktree, since it uses only API older than it) and at the working
# tree, then runs the two binaries alternately ROUNDS times (default 5) and prints, per case,
# the median of the rounds' medians and the ratio new / base.
set -euo pipefail
base=${1:-main}
rounds=${2:-5}
repo=$(git rev-parse --show-toplevel)
# One target directory: the registry dependencies are built once for both trees.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"
mkdir -p "$CARGO_TARGET_DIR"
work=$(mktemp -d "$CARGO_TARGET_DIR/edit-latency.XXXXXX")
cleanup() { git -C "$repo" worktree remove --force "$work/base" >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT
git -C "$repo" worktree add --quiet --detach "$work/base" "$base"
cp "$repo/crates/keel-tools/benches/edit_latency.rs" "$work/base/crates/keel-tools/benches/"
grep -q 'name = "edit_latency"' "$work/base/crates/keel-tools/Cargo.toml" ||
    printf '\n[[bench]]\nname = "edit_latency"\nharness = false\n' >>"$work/base/crates/keel-tools/Cargo.toml"
exe() {
    (cd "$1" && cargo bench --quiet -p keel-tools --bench edit_latency --no-run --message-format=json) |
        jq -r 'select(.executable != null and .target.name == "edit_latency") | .executable' | tail -1
}
# Both trees build to the same file name (cargo hashes path packages relative to their
# workspace root), so each binary is copied out before the other is built.
cp "$(exe "$work/base")" "$work/base_bin"
cp "$(exe "$repo")" "$work/new_bin"
base_bin="$work/base_bin"
new_bin="$work/new_bin"
for _ in $(seq "$rounds"); do
    "$base_bin" | sed 's/^/base\t/'
    "$new_bin" | sed 's/^/new\t/'
done >"$work/samples"
echo "edit latency on a 10,000-line file, median of $rounds rounds (each a median of 21 runs)"
echo "base: $base ($(git -C "$repo" rev-parse --short "$base")), new: working tree ($(git -C "$repo" rev-parse --short HEAD)$(git -C "$repo" diff --quiet || echo '+changes'))"
printf '%-12s %10s %10s %8s\n' case base_us new_us new/base
for case in $(awk -F'\t' '{print $2}' "$work/samples" | sort -u); do
    med() { awk -F'\t' -v w="$1" -v c="$case" '$1 == w && $2 == c {print $3}' "$work/samples" | sort -g |
        awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
    b=$(med base)
    n=$(med new)
    printf '%-12s %10.1f %10.1f %7.2fx\n' "$case" "$b" "$n" "$(echo "$n / $b" | bc -l)"
done
