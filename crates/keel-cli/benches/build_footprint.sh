#!/usr/bin/env bash
# The release build of `keel` (what `cargo install --path crates/keel-cli` compiles): its wall
# time and binary size, and what dominates each — beside a baseline measured in the same run.
#
#   crates/keel-cli/benches/build_footprint.sh [BASELINE_BINARY] [--no-build]
#
# - Build time: `cargo build --release -p keel-cli --timings` from a clean package set (the
#   registry dependencies included, like `cargo install`), in CARGO_TARGET_DIR (default:
#   target/footprint, removed afterwards unless KEEP=1). The slowest units come from cargo's
#   timing report. Baseline: the same machine building a one-file hello-world in release, in
#   the same run (the machine's speed and load right now).
# - Binary size: the stripped binary, its sections (`size -A`), and the largest crates by the
#   code and data their symbols take (`nm --size-sort` on an unstripped build of the same
#   code). Baseline: BASELINE_BINARY (e.g. the main branch's `keel`), when given.
# --no-build analyses an earlier build in CARGO_TARGET_DIR.
set -euo pipefail
repo=$(git rev-parse --show-toplevel)
baseline_bin=""
build=1
for a in "$@"; do
    case "$a" in
    --no-build) build=0 ;;
    *) baseline_bin=$a ;;
    esac
done
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target/footprint}"
# Symbols stay in for the attribution (build.rs leaves out its --strip-all; every crate is built
# exactly as `cargo install` builds it); the size reported is the stripped copy's.
export KEEL_KEEP_SYMBOLS=1
for tool in nm size strip python3; do
    command -v "$tool" >/dev/null || { echo "build_footprint: needs $tool" >&2; exit 1; }
done
work=$(mktemp -d)
cleanup() {
    rm -rf "$work"
    if [ "$build" = 1 ] && [ "${KEEP:-0}" != 1 ]; then rm -rf "$CARGO_TARGET_DIR"; fi
}
trap cleanup EXIT

secs() { python3 -c 'import sys,time; print(f"{time.time()-float(sys.argv[1]):.1f}")' "$1"; }

if [ "$build" = 1 ]; then
    # Baseline: hello world, release, same machine, same minute.
    mkdir -p "$work/hello/src"
    printf '[package]\nname = "hello"\nversion = "0.1.0"\nedition = "2021"\n[workspace]\n' >"$work/hello/Cargo.toml"
    echo 'fn main() { println!("hello"); }' >"$work/hello/src/main.rs"
    t=$(date +%s.%N)
    (cd "$work/hello" && CARGO_TARGET_DIR="$work/hello/target" cargo build --release --quiet)
    hello_s=$(secs "$t")
    t=$(date +%s.%N)
    (cd "$repo" && cargo build --release -p keel-cli --timings --quiet)
    keel_s=$(secs "$t")
    echo "release build of keel          ${keel_s} s    baseline: hello world ${hello_s} s (same machine, same run; $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg))"
fi

bin="$CARGO_TARGET_DIR/release/keel"
[ -x "$bin" ] || { echo "build_footprint: no $bin (build first, or drop --no-build)" >&2; exit 1; }
strip -o "$work/keel.stripped" "$bin"
size_mb() { python3 -c 'import os,sys; print(f"{os.path.getsize(sys.argv[1])/1e6:.1f}")' "$1"; }
line="binary size (stripped)         $(size_mb "$work/keel.stripped") MB"
if [ -n "$baseline_bin" ] && [ -f "$baseline_bin" ]; then
    line="$line    baseline: $(size_mb "$baseline_bin") MB ($baseline_bin)"
fi
echo "$line"

echo
echo "sections of the binary (MB):"
size -A "$work/keel.stripped" | awk '$1 ~ /^\./ && $2 > 500000 { printf "  %-22s %6.1f\n", $1, $2/1e6 }'

echo
echo "largest crates by symbol size (code + data, MB; nm --size-sort):"
nm --print-size --size-sort --demangle=rust "$bin" 2>/dev/null | python3 -c '
import re, sys, collections
by = collections.Counter()
for line in sys.stdin:
    parts = line.split(None, 3)
    if len(parts) < 4:
        continue
    size, kind, name = int(parts[1], 16), parts[2], parts[3].strip()
    # `<T as keel_llm::X>::f` counts for the trait impl'"'"'s crate; plain paths for their first segment.
    m = re.match(r"<?(?:&|\*const |\*mut |dyn |mut )*([A-Za-z_][A-Za-z0-9_]*)::", name)
    crate = m.group(1) if m else ("C/static (tree-sitter grammars, sqlite, ring)" if kind in "dDrRtT" else "other")
    by[crate] += size
total = sum(by.values())
for crate, size in by.most_common(15):
    print(f"  {crate:<46} {size/1e6:6.1f}  {100*size/total:4.1f}%")
label = "all symbols"
print(f"  {label:<46} {total/1e6:6.1f}")
'

timing=$(ls -t "$CARGO_TARGET_DIR"/cargo-timings/cargo-timing-*.html 2>/dev/null | head -1 || true)
if [ -n "$timing" ]; then
    echo
    echo "slowest units of the build (s; cargo --timings: $timing):"
    python3 - "$timing" <<'EOF'
import json, re, sys
text = open(sys.argv[1]).read()
m = re.search(r"const UNIT_DATA = (\[.*?\]);\n", text, re.S)
units = json.loads(m.group(1)) if m else []
units.sort(key=lambda u: -u.get("duration", 0))
total = sum(u.get("duration", 0) for u in units)
for u in units[:15]:
    print(f"  {u['name'] + ' ' + u.get('target', '').strip():<46} {u['duration']:7.1f}")
print(f"  {'all units, summed (2 run at once)':<46} {total:7.1f}")
EOF
fi
