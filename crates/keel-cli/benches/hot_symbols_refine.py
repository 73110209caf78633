#!/usr/bin/env python3
"""Completes hot-symbols.txt with the functions a real run executes and callgrind never sees.

    KEEL_KEEP_SYMBOLS=1 cargo rustc --release -p keel-cli --bin keel -- -C save-temps \
        --print link-args > link.log        # keeps the link's objects, prints its command
    grep '"cc"' link.log | tail -1 > link-args.txt
    crates/keel-cli/benches/hot_symbols_refine.py link-args.txt [ROUNDS]

benches/hot_symbols.sh records the list under valgrind, whose 3.19 does not know openat2,
landlock, seccomp or pidfd_open: Keel then takes its fallback paths (keel-fs' component walk,
tokio's signal-based child reaping, the sandbox's unsupported branches), so the functions of
the paths a real run takes are missing from the list and land anywhere in .text — each page one
of them touches maps 64 KB of code around it (the kernel's fault-around). This script runs the
startup bench's demo session of the linked binary under `perf record -e page-faults -d` (software
events: no PMU needed), takes every function of the keel process whose code faulted beyond the
listed functions, appends it to the list, writes the layout files exactly as build.rs would
(ordering file + linker script for `.llvm.*` names, at the paths the link command names), runs
the link command again (seconds: the LTO objects are kept) and repeats until nothing new faults
or ROUNDS (default 5) are done. The next release build links with the completed list.
"""

import bisect
import collections
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
LIST = os.path.join(REPO, "crates", "keel-cli", "hot-symbols.txt")


def layout(list_text):
    """build.rs's `layout_files`: the ordering file and the linker script for the list."""
    order, script = [], ["SECTIONS {\n  .text.hot : {\n"]
    for line in (l.strip() for l in list_text.splitlines()):
        if not line or line.startswith("#"):
            continue
        name = line[: -len(".llvm.*")] if line.endswith(".llvm.*") else line
        order.append(name + "\n")
        if line.endswith(".llvm.*") and not any(c in "*?[]\\()\"' ;,{}" for c in name):
            script.append(f"    *(.text.{name}.llvm.* .text.unlikely.{name}.llvm.*)\n")
    script.append("  }\n}\nINSERT BEFORE .text;\n")
    return "".join(order), "".join(script)


def functions(binary):
    syms = []
    out = subprocess.run(["nm", "-S", "--defined-only", binary], capture_output=True, text=True, check=True)
    for f in (l.split() for l in out.stdout.splitlines()):
        if len(f) == 4 and f[2] in "tTwW":
            syms.append((int(f[0], 16), int(f[1], 16), f[3]))
    return sorted(syms)


def faulted(binary, listed):
    """List lines of the functions whose code faulted beyond the listed ones in a demo run."""
    syms = functions(binary)
    starts = [s[0] for s in syms]
    mark = lambda n: re.sub(r"\.llvm\.\d+$", ".llvm.*", n)
    ends = sorted(a + s for a, s, n in syms if mark(n) in listed)
    # The listed functions' span (a name several symbols share may sit elsewhere).
    hot_end = ends[int(len(ends) * 0.995)] if ends else 0
    seg = next(l.split() for l in subprocess.run(["readelf", "-lW", binary], capture_output=True,
               text=True, check=True).stdout.splitlines() if "LOAD" in l and "R E" in l)
    seg_off, seg_vaddr = int(seg[1], 16), int(seg[2], 16)
    tmp = tempfile.mkdtemp(prefix="keel-refine-")
    try:
        work = os.path.join(tmp, "demo")
        shutil.copytree(os.path.join(REPO, "examples", "demo-repo"), work)
        env = dict(os.environ, KEEL_HOME=os.path.join(tmp, "home"),
                   KEEL_SHELL__LINT__ENABLED="false", KEEL_VERIFY__ENABLED="false")
        data = os.path.join(tmp, "pf.data")
        subprocess.run(["perf", "record", "-q", "-e", "page-faults", "-c", "1", "-d", "-o", data,
                        binary, "run", "--json", "--script", os.path.join(REPO, "examples", "demo.yaml"),
                        "--workspace", work, "add tests"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=True)
        script = subprocess.run(["perf", "script", "-i", data, "--show-mmap-events", "-F", "pid,addr"],
                                capture_output=True, text=True, check=True).stdout
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    maps, found = collections.defaultdict(list), {}
    mmap = re.compile(r"MMAP2 (\d+)/\d+: \[0x([0-9a-f]+)\(0x([0-9a-f]+)\) @ (0x[0-9a-f]+|0) .*\]: (\S+) (\S+)")
    for line in script.splitlines():
        m = mmap.search(line)
        if m:
            if "x" in m.group(5) and os.path.realpath(m.group(6)) == binary:
                maps[int(m.group(1))].append((int(m.group(2), 16), int(m.group(3), 16), int(m.group(4), 0)))
            continue
        f = line.split()
        if len(f) != 2 or not maps:
            continue
        pid, addr = int(f[0]), int(f[1], 16)
        if pid != min(maps):  # the keel process, not the sandbox helpers it forks
            continue
        for start, size, off in maps[pid]:
            if start <= addr < start + size:
                v = addr - start + off - seg_off + seg_vaddr
                i = bisect.bisect_right(starts, v) - 1
                if v >= hot_end and i >= 0 and v < syms[i][0] + max(syms[i][1], 1):
                    name = mark(syms[i][2])
                    if name not in listed and name != "_start":
                        found[name] = None
    return list(found)


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    args = shlex.split(open(sys.argv[1]).read().strip())
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    binary = os.path.realpath(args[args.index("-o") + 1])
    order_path = next(a.split("=", 1)[1] for a in args if "--symbol-ordering-file=" in a)
    script_path = next(a[len("-Wl,-T,"):] for a in args if a.startswith("-Wl,-T,"))
    for r in range(rounds):
        text = open(LIST).read()
        listed = {l.strip() for l in text.splitlines() if l.strip() and not l.startswith("#")}
        new = faulted(binary, listed)
        print(f"round {r + 1}: {len(new)} functions faulted beyond the list", flush=True)
        if not new:
            break
        text = text + "".join(n + "\n" for n in new)
        open(LIST, "w").write(text)
        order, script = layout(text)
        open(order_path, "w").write(order)
        open(script_path, "w").write(script)
        subprocess.run(args, check=True)


if __name__ == "__main__":
    main()
