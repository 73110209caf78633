#!/usr/bin/env python3
"""Two `keel` binaries side by side (issue 33: the engine before and after a refactor).

Interleaved runs, medians:
  * launch -> first model request: spawn `keel run --json` with the scripted provider on a fresh
    copy of examples/demo-repo until its first `turn_started` event (emitted right before the
    request is sent);
  * harness overhead per model call: a scripted session of N turns (each one cheap
    `update_plan` call) minus a 1-turn session, divided by N-1: what the loop, its hooks, the
    event store and the tool path add per model request (the scripted provider answers at once).

Usage: side_by_side.py BASELINE_KEEL CANDIDATE_KEEL [RUNS] [TURNS]
Run it under /work/wt/quiet.sh on a shared machine; build both binaries first (release).
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


def first_request(keel, tmp, i):
    work = os.path.join(tmp, "fr%d" % i)
    shutil.copytree(DEMO, work)
    t = time.perf_counter()
    p = subprocess.Popen([keel, "run", "--json", "--script", os.path.join(ROOT, "examples/demo.yaml"),
                          "--workspace", work, "add tests"], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, env=env(os.path.join(tmp, "home")))
    took = None
    for line in p.stdout:
        if b'"turn_started"' in line:
            took = time.perf_counter() - t
            break
    p.stdout.read()
    assert p.wait() == 0, "keel failed"
    return took


def session(keel, tmp, i, script_path):
    work = os.path.join(tmp, "s%d" % i)
    shutil.copytree(DEMO, work)
    t = time.perf_counter()
    r = subprocess.run([keel, "run", "--json", "--script", script_path, "--workspace", work,
                        "--max-iterations", "500", "plan the work"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, env=env(os.path.join(tmp, "home")))
    assert r.returncode == 0, "keel failed (%d)" % r.returncode
    return time.perf_counter() - t


def main():
    base, cand = sys.argv[1], sys.argv[2]
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 15
    turns = int(sys.argv[4]) if len(sys.argv) > 4 else 60
    tmp = tempfile.mkdtemp(prefix="keel-sbs-")
    short, long_ = os.path.join(tmp, "short.yaml"), os.path.join(tmp, "long.yaml")
    open(short, "w").write(script(1))
    open(long_, "w").write(script(turns))
    res = {b: {"fr": [], "short": [], "long": []} for b in (base, cand)}
    n = 0
    for _ in range(runs):
        for b in (base, cand):
            n += 1
            res[b]["fr"].append(first_request(b, tmp, n))
            res[b]["short"].append(session(b, tmp, n, short))
            res[b]["long"].append(session(b, tmp, -n, long_))
    shutil.rmtree(tmp, ignore_errors=True)
    print("side by side, median of %d interleaved runs each (%d-turn session for the per-call figure)" % (runs, turns))
    for label, b in (("baseline ", base), ("candidate", cand)):
        fr = statistics.median(res[b]["fr"]) * 1000
        per = (statistics.median(res[b]["long"]) - statistics.median(res[b]["short"])) / (turns - 1) * 1000
        print("  %s  launch -> first request %7.2f ms   harness per model call %6.3f ms   (%s)" % (label, fr, per, b))


if __name__ == "__main__":
    main()
