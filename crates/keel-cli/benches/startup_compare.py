#!/usr/bin/env python3
"""Start-up and footprint of two `keel` binaries side by side, in one run: `keel --version`,
launch → first model request, a whole scripted demo session, and the peak RSS of that session —
the figures of benches/startup.rs, for binaries built elsewhere (a release build and a baseline
binary; `cargo bench` would compile a third copy of everything in its own profile).

    crates/keel-cli/benches/startup_compare.py target/release/keel /path/to/keel-before [RUNS]

Runs alternate between the binaries (A, B, A, B …) so load falls on both alike; `true` is timed
in the same run as the floor. The session is the startup bench's: `keel run --json --script
examples/demo.yaml` on a fresh copy of examples/demo-repo, the auto-check and lint off (they
would measure rustc). Launch → first request is the time to the first `turn_started` event,
emitted right before the request is sent. Peak RSS is the child's own `ru_maxrss` (wait4), the
median and the largest over the runs. Standard library only.
"""

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def spawn(args, env=None, first_line=None):
    """Runs args; returns (seconds to exit, seconds to the first stdout line containing
    first_line or None, peak RSS in KiB)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    first = None
    for line in p.stdout:
        if first is None and first_line is not None and first_line in line:
            first = time.perf_counter() - t0
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(args[:3])} … exited {p.returncode}")
    return wall, first, usage.ru_maxrss


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    bins = {"keel": os.path.abspath(sys.argv[1]), "baseline": os.path.abspath(sys.argv[2])}
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 20
    tmp = tempfile.mkdtemp(prefix="keel-startup-")
    demo = os.path.join(REPO, "examples", "demo.yaml")
    res = {k: {"version": [], "first": [], "whole": [], "rss": []} for k in bins}
    floor = []
    try:
        for i in range(runs):
            floor.append(spawn(["true"])[0])
            for who, binary in bins.items():
                res[who]["version"].append(spawn([binary, "--version"])[0])
                work = os.path.join(tmp, f"{who}-{i}")
                shutil.copytree(os.path.join(REPO, "examples", "demo-repo"), work)
                env = dict(
                    os.environ,
                    KEEL_HOME=os.path.join(tmp, f"home-{who}"),
                    KEEL_SHELL__LINT__ENABLED="false",
                    KEEL_VERIFY__ENABLED="false",
                )
                args = [binary, "run", "--json", "--script", demo, "--workspace", work, "add tests"]
                wall, first, rss = spawn(args, env=env, first_line=b'"turn_started"')
                res[who]["whole"].append(wall)
                res[who]["first"].append(first)
                res[who]["rss"].append(rss)
                shutil.rmtree(work, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ms = lambda v: f"{statistics.median(v) * 1000:8.2f} ms"
    print(f"keel start-up and footprint, median of {runs} runs each, alternating "
          f"(floor: spawning `true` {statistics.median(floor) * 1000:.2f} ms)")
    print(f"  {'':32} {'keel':>12} {'baseline':>12}   target")
    print(f"  {'keel --version':32} {ms(res['keel']['version']):>12} {ms(res['baseline']['version']):>12}   ≤ 5 ms")
    print(f"  {'launch → first model request':32} {ms(res['keel']['first']):>12} {ms(res['baseline']['first']):>12}   ≤ 20 ms")
    print(f"  {'whole 4-turn scripted session':32} {ms(res['keel']['whole']):>12} {ms(res['baseline']['whole']):>12}")
    mib = lambda v: f"{statistics.median(v) / 1024:6.1f} / {max(v) / 1024:4.1f}"
    print(f"  {'peak RSS, MiB (median / max)':32} {mib(res['keel']['rss']):>12} {mib(res['baseline']['rss']):>12}   ≤ 20 MiB")
    for who, binary in bins.items():
        print(f"  {who}: {binary} ({os.path.getsize(binary) / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
