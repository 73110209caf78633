#!/usr/bin/env python3
"""Two `keel` binaries side by side (issue 33: the engine before and after a refactor).

Interleaved runs, medians:
  * launch -> first model request: spawn `keel run --json` with the scripted provider on a fresh
    copy of examples/demo-repo until its first `turn_started` event (emitted right before the
    request is sent);
  * harness overhead per model call: a scripted session of N turns (each one cheap
    `update_plan` call) minus a 1-turn session, divided by N-1: what the loop, its hooks, the
    event store and the tool path add per model request (the scripted provider answers at once).

  * `keel --version`: the process alone (parse the command line, print, exit).

  * peak RSS: the largest `ru_maxrss` of the first-request run (a whole 4-turn demo session).

Each figure is given as median and p90; the per-call one also as the median and p90 of the
runs' own (long - short) / (N-1), so one slow run shows.

Usage: side_by_side.py BASELINE_KEEL CANDIDATE_KEEL [MORE_KEEL...] [RUNS] [TURNS] [--home=MODE]
(every argument that is a number is RUNS, then TURNS; the others are binaries, all interleaved).
MODE is where each run's KEEL_HOME is:
  shared      one home for every run of the round (the default; a home grows with every run:
              each run records the workspaces its commands may write);
  fresh       a new, empty home per run (a first launch);
  records=N   a new home per run holding the record of N workspaces earlier sessions' commands
              could write (`command-writable-dirs`: a user who ran Keel in N projects).
Run it under /work/wt/quiet.sh on a shared machine; build the binaries first (release).
"""
import os, shutil, statistics, subprocess, sys, tempfile, time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "../../.."))
DEMO = os.path.join(ROOT, "examples/demo-repo")


def script(turns):
    lines = ["turns:"]
    for i in range(turns - 1):
        lines.append(
            "  - tool_calls: [{name: update_plan, arguments: {steps: [{step: \"step %d\", status: in_progress}]}}]" % i
        )
    lines.append("  - text: \"Done.\"")
    return "\n".join(lines) + "\n"


def env(home):
    e = {"PATH": os.environ.get("PATH", ""), "HOME": home, "KEEL_HOME": os.path.join(home, "data"),
         "KEEL_SHELL__LINT__ENABLED": "false", "KEEL_VERIFY__ENABLED": "false", "NO_COLOR": "1"}
    return e


HOME_MODE = "shared"


def home(tmp, i):
    """The HOME of run `i` (KEEL_HOME is its `data`), made as --home asks."""
    if HOME_MODE == "shared":
        return os.path.join(tmp, "home")
    h = os.path.join(tmp, "home%d" % i)
    shutil.rmtree(h, ignore_errors=True)
    data = os.path.join(h, "data")
    os.makedirs(data, mode=0o700)
    if HOME_MODE.startswith("records="):
        dirs = []
        for k in range(int(HOME_MODE.split("=", 1)[1])):
            d = os.path.join(tmp, "projects", "p%d" % k, "src")
            os.makedirs(d, exist_ok=True)
            dirs.append(os.path.realpath(d))
        with open(os.path.join(data, "command-writable-dirs"), "w") as f:
            f.write("".join(d + "\n" for d in dirs))
    return h


def first_request(keel, tmp, i):
    """Seconds to the first `turn_started`, and the run's peak RSS in KiB."""
    work = os.path.join(tmp, "fr%d" % i)
    shutil.copytree(DEMO, work)
    h = home(tmp, i)
    t = time.perf_counter()
    p = subprocess.Popen([keel, "run", "--json", "--script", os.path.join(ROOT, "examples/demo.yaml"),
                          "--workspace", work, "add tests"], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, env=env(h))
    took = None
    for line in p.stdout:
        if b'"turn_started"' in line:
            took = time.perf_counter() - t
            break
    p.stdout.read()
    _, status, usage = os.wait4(p.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "keel failed"
    shutil.rmtree(work, ignore_errors=True)
    return took, usage.ru_maxrss


def session(keel, tmp, i, script_path):
    work = os.path.join(tmp, "s%d" % i)
    shutil.copytree(DEMO, work)
    h = home(tmp, i)
    t = time.perf_counter()
    r = subprocess.run([keel, "run", "--json", "--script", script_path, "--workspace", work,
                        "--max-iterations", "500", "plan the work"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, env=env(h))
    took = time.perf_counter() - t
    assert r.returncode == 0, "keel failed (%d)" % r.returncode
    shutil.rmtree(work, ignore_errors=True)
    return took


def version(keel):
    t = time.perf_counter()
    subprocess.run([keel, "--version"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t


def p90(v):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(0.9 * (len(v) - 1))))]


def main():
    global HOME_MODE
    for a in sys.argv[1:]:
        if a.startswith("--home="):
            HOME_MODE = a.split("=", 1)[1]
    assert HOME_MODE in ("shared", "fresh") or HOME_MODE.startswith("records="), __doc__
    bins = [a for a in sys.argv[1:] if not a.isdigit() and not a.startswith("--")]
    nums = [int(a) for a in sys.argv[1:] if a.isdigit()]
    assert len(bins) >= 2, __doc__
    base = bins[0]
    runs = nums[0] if len(nums) > 0 else 15
    turns = nums[1] if len(nums) > 1 else 60
    tmp = tempfile.mkdtemp(prefix="keel-sbs-")
    short, long_ = os.path.join(tmp, "short.yaml"), os.path.join(tmp, "long.yaml")
    open(short, "w").write(script(1))
    open(long_, "w").write(script(turns))
    res = {b: {"fr": [], "rss": [], "short": [], "long": [], "version": []} for b in bins}
    n = 0
    for _ in range(runs):
        for b in bins:
            n += 1
            res[b]["version"].append(version(b))
            took, rss = first_request(b, tmp, n)
            res[b]["fr"].append(took)
            res[b]["rss"].append(rss)
            res[b]["short"].append(session(b, tmp, n, short))
            res[b]["long"].append(session(b, tmp, -n, long_))
    shutil.rmtree(tmp, ignore_errors=True)
    print("side by side, median of %d interleaved runs each (%d-turn session for the per-call figure; home: %s)"
          % (runs, turns, HOME_MODE))
    labels = ["baseline "] + ["candidate" if len(bins) == 2 else "cand. %d   " % i for i in range(1, len(bins))]
    for label, b in zip(labels, bins):
        r = res[b]
        fr = statistics.median(r["fr"]) * 1000
        per = (statistics.median(r["long"]) - statistics.median(r["short"])) / (turns - 1) * 1000
        ratio = ""
        if b != base:
            rb = res[base]
            ratio = "   ratio to baseline: first request %.2f, per call %.2f" % (
                fr / (statistics.median(rb["fr"]) * 1000),
                per / ((statistics.median(rb["long"]) - statistics.median(rb["short"])) / (turns - 1) * 1000))
        print("  %s  launch -> first request %7.2f ms   harness per model call %6.3f ms   (%s)%s" % (label, fr, per, b, ratio))
        pairs = [(lg - sh) / (turns - 1) * 1000 for lg, sh in zip(r["long"], r["short"])]
        print("             first request p50/p90 %.2f / %.2f ms   per call (per run) p50/p90 %.3f / %.3f ms"
              "   --version p50/p90 %.2f / %.2f ms" % (
                  fr, p90(r["fr"]) * 1000, statistics.median(pairs), p90(pairs),
                  statistics.median(r["version"]) * 1000, p90(r["version"]) * 1000))
        print("             peak RSS of the demo session median/max %.1f / %.1f MiB" % (
            statistics.median(r["rss"]) / 1024, max(r["rss"]) / 1024))


if __name__ == "__main__":
    main()
