#!/usr/bin/env bash
# Records the functions a small `keel` session runs, for the release binary's code layout
# (crates/keel-cli/hot-symbols.txt, read by build.rs: lld places them together at the start of
# .text, so a run touches few, dense pages of code).
#
#   crates/keel-cli/benches/hot_symbols.sh            # builds, records, rewrites the list
#   KEEL_BIN=/path/keel crates/keel-cli/benches/hot_symbols.sh   # records from that binary
#
# Builds `keel` in release with its symbol table (KEEL_KEEP_SYMBOLS=1: build.rs then leaves out
# its --strip-all; every other crate of the build is the very one `cargo build --release` makes,
# so the names recorded are the names the next release build links), then runs it under
# callgrind (valgrind): `keel --version`, the scripted demo session of benches/startup.rs, and a
# run against a local OpenAI-compatible mock server (Python, one canned reply), the sandbox
# helper included. Every function any of them executed goes into the list, in mangled form, in
# the order callgrind first reports it; ThinLTO's `.llvm.<hash>` suffix, which changes with
# ordinary commits, is written as `.llvm.*` (build.rs matches such functions whatever the hash).
# Then run benches/hot_symbols_refine.py: valgrind 3.19 does not know openat2, landlock, seccomp or
# pidfd_open, so the paths a real run takes are not recorded here (it adds them from page faults).
# Re-run it after a compiler or dependency upgrade, a dependency added to a Keel crate (a
# legacy-mangled name's hash covers its crate's dependencies), or renamed functions:
# names the list has and a build does not are skipped, so a stale list only loses its effect
# (benches/startup_compare.py shows peak RSS). The list's first line is a fingerprint of Cargo.lock
# and `rustc -V` at recording time; a release build with another one warns (build.rs). The next plain `cargo build --release` links
# `keel` again, ordered and stripped.
set -euo pipefail
repo=$(git rev-parse --show-toplevel)
cd "$repo"
for tool in valgrind python3 git; do
    command -v "$tool" >/dev/null || { echo "hot_symbols: needs $tool" >&2; exit 1; }
done
# An older list may order this build: that moves functions, not which ones run.
# KEEL_BIN: a release binary already built with KEEL_KEEP_SYMBOLS=1 (no build here).
if [ -n "${KEEL_BIN:-}" ]; then
    bin=$KEEL_BIN
else
    KEEL_KEEP_SYMBOLS=1 cargo build --release -p keel-cli --quiet
    bin="${CARGO_TARGET_DIR:-$repo/target}/release/keel"
fi
nm "$bin" >/dev/null 2>&1 || { echo "hot_symbols: $bin has no symbol table" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"; kill "${mock:-}" 2>/dev/null || true' EXIT
export KEEL_HOME="$work/home" KEEL_SHELL__LINT__ENABLED=false KEEL_VERIFY__ENABLED=false

cg() { valgrind --tool=callgrind --trace-children=yes --demangle=no --dump-instr=no \
    --callgrind-out-file="$work/cg.%p" "$@" >/dev/null 2>&1 || true; }

cg "$bin" --version
cp -r examples/demo-repo "$work/demo"
cg "$bin" run --json --script examples/demo.yaml --workspace "$work/demo" "add tests"

# A local OpenAI-compatible server: the HTTP client, streaming parser and provider paths.
cat >"$work/mock.py" <<'PY'
import http.server, json, sys
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        body = json.dumps({"data": [{"id": "m"}]}).encode()
        self.send_response(200); self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        chunks = [{"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Done."}}]},
                  {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                   "usage": {"prompt_tokens": 100, "completion_tokens": 2, "total_tokens": 102}}]
        body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
        self.send_response(200); self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body.encode())
srv = http.server.HTTPServer(("127.0.0.1", 0), H)
print(srv.server_address[1], flush=True)
srv.serve_forever()
PY
python3 "$work/mock.py" >"$work/port" &
mock=$!
for _ in $(seq 50); do [ -s "$work/port" ] && break; sleep 0.1; done
cp -r examples/demo-repo "$work/demo2"
cg "$bin" run --json --provider openai --model m --base-url "http://127.0.0.1:$(cat "$work/port")/v1" \
    --workspace "$work/demo2" "say hello"

# Every function executed in a keel process (not git's or python's), first-reported first.
python3 - "$bin" "$work" crates/keel-cli/hot-symbols.txt "$("${RUSTC:-rustc}" -V)" <<'PY'
import glob, os, re, sys
binary, work, out, rustc_version = os.path.realpath(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]

def fingerprint(lock, version):
    """build.rs's `fingerprint`: FNV-1a 64 of Cargo.lock, a newline and `rustc -V`."""
    h = 0xcbf29ce484222325
    for b in lock + b"\n" + version.strip().encode():
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"

seen, order = set(), []
for path in sorted(glob.glob(os.path.join(work, "cg.*")), key=os.path.getmtime):
    text = open(path, errors="replace").read()
    cmd = re.search(r"^cmd:\s+(\S+)", text, re.M)
    if not cmd or os.path.realpath(cmd.group(1)) != binary:
        continue
    # Compressed names: "(id) name" the first time an id appears (in fn= or cfn=), "(id)" after;
    # ob= names the object of the fn= lines that follow.
    names, objs, obj = {}, {}, None
    for line in text.splitlines():
        m = re.match(r"^ob=\((\d+)\)(?: (.*))?$", line)
        if m:
            if m.group(2):
                objs[m.group(1)] = m.group(2)
            obj = objs.get(m.group(1))
            continue
        m = re.match(r"^cob=\((\d+)\)(?: (.*))?$", line)
        if m:
            if m.group(2):
                objs[m.group(1)] = m.group(2)
            continue
        m = re.match(r"^(c?fn)=\((\d+)\)(?: (.*))?$", line)
        if not m:
            continue
        if m.group(3):
            names[m.group(2)] = m.group(3).strip()
        if m.group(1) == "fn" and obj and os.path.realpath(obj) == binary:
            # A recursive call is reported as `name'2`, `name'3` …
            name = re.sub(r"'\d+$", "", names.get(m.group(2), ""))
            # ThinLTO's `.llvm.<hash of the module>` changes whenever the module does: the
            # list marks the function `.llvm.*` instead (build.rs places it by a linker script).
            name = re.sub(r"\.llvm\.\d+$", ".llvm.*", name)
            if name and name not in seen and not name.startswith(("0x", "(")):
                seen.add(name)
                order.append(name)
with open("Cargo.lock", "rb") as f:
    header = "# recorded for: " + fingerprint(f.read(), rustc_version)
with open(out, "w") as f:
    f.write(header + "\n" + "".join(n + "\n" for n in order))
PY
