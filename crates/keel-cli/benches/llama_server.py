#!/usr/bin/env python3
"""Keel against a real llama.cpp-family server: llama-cpp-python's own OpenAI-compatible server
(`python -m llama_cpp.server`), tiny GGUF models, no request rewriting — beside a baseline
`keel` binary in the same run.

    crates/keel-cli/benches/llama_server.py --keel target/release/keel \
        --baseline /path/to/keel-before --python /path/to/venv/bin/python \
        --model smollm2=/path/SmolLM2-135M-Instruct.Q4_1.gguf:chatml-function-calling \
        --model gemma3=/path/gemma-3-270m-q4_k_m.gguf \
        --runs smollm2:default:10 --runs smollm2:plan_exec:10 --runs gemma3:default:6

A `--model` is NAME=PATH[:CHAT_FORMAT] (no format: the template in the GGUF). Each model gets
its own server (`--n_ctx` 2048, the server's default), started once and shared by both
binaries, whose runs alternate (keel, baseline, keel, …) so load and cache warmth fall on both
alike. Between Keel and the server sits a pass-through proxy that forwards every byte
unchanged and logs each exchange: the request's messages and roles, the status, the reply's
`usage.prompt_tokens` (or, for a stream without usage, the server's own log line
`N prefix-match hit, remaining M prompt tokens`), and the time.

Each binary has its own KEEL_HOME, kept across its runs (what Keel learns about a server is
meant to carry over). Each run gets a fresh copy of a tiny Python repository and a short task.

Per run it prints: how the run ended, wall time, requests, wasted requests (an HTTP error, an
empty reply, or a request sent again with the same messages), tool results sent and how many
the model saw (the server's prompt grew by at least half the result's estimated tokens), the
first request's size (bytes, and the server's prompt tokens), and whether the task's check
passes. Then a summary per binary, model and mode.

Standard library only; needs the venv with `llama-cpp-python[server]` installed.
"""

import argparse
import http.client
import http.server
import json
import os
import re
import shutil
import socket
import socketserver
import subprocess
import sys
import tempfile
import threading
import time

REPO_FILES = {
    "calc.py": "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n",
    "README.md": "# calc\n\nTwo small arithmetic helpers.\n",
}
# plan_exec reaches delivery only after a passing check: its workspace has a test to pass.
MODE_FILES = {
    "plan_exec": {
        "test_calc.py": "import calc\n\n\ndef test_add():\n    assert calc.add(2, 3) == 5\n",
    },
}
TASKS = {
    # mode -> (task, check command run in the workspace afterwards)
    "default": (
        "add a function answer() to calc.py that returns 42",
        "python3 -c 'import calc; assert calc.answer() == 42'",
    ),
    "plan_exec": (
        "fix the bug in calc.py: add(2, 3) must return 5",
        "python3 -c 'import calc; assert calc.add(2, 3) == 5'",
    ),
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Log:
    """Exchanges seen by the proxy, in order."""

    def __init__(self):
        self.lock = threading.Lock()
        self.items = []

    def add(self, item):
        with self.lock:
            self.items.append(item)

    def since(self, n):
        with self.lock:
            return list(self.items[n:])

    def __len__(self):
        with self.lock:
            return len(self.items)


def proxy(upstream, log, port=0):
    """A threaded pass-through HTTP proxy to 127.0.0.1:upstream["port"] (a restarted server
    gets a new port behind the same proxy address); returns its port."""

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def relay(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            t0 = time.time()
            conn = http.client.HTTPConnection("127.0.0.1", upstream["port"], timeout=1800)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host",)}
            try:
                conn.request(self.command, self.path, body=body, headers=headers)
                resp = conn.getresponse()
            except OSError as e:
                self.send_error(502, str(e))
                log.add({"path": self.path, "status": 502, "error": str(e), "t0": t0})
                return
            self.send_response_only(resp.status, resp.reason)
            chunked = False
            for k, v in resp.getheaders():
                if k.lower() == "transfer-encoding" and "chunked" in v.lower():
                    chunked = True
                    continue
                if k.lower() in ("connection", "content-length"):
                    continue
                self.send_header(k, v)
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Connection", "close")
            self.end_headers()
            got = bytearray()
            while True:
                chunk = resp.read1(65536) if hasattr(resp, "read1") else resp.read(65536)
                if not chunk:
                    break
                got += chunk
                try:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    self.wfile.flush()
                except OSError:
                    break
            try:
                self.wfile.write(b"0\r\n\r\n")
            except OSError:
                pass
            self.close_connection = True
            log.add(
                {
                    "path": self.path,
                    "request": body.decode("utf-8", "replace"),
                    "status": resp.status,
                    "response": bytes(got).decode("utf-8", "replace"),
                    "t0": t0,
                    "secs": time.time() - t0,
                }
            )

        do_POST = relay
        do_GET = relay

    class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
        daemon_threads = True

    srv = Server(("127.0.0.1", port), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv.server_address[1]


def estimate(text):
    """Keel's own estimate: bytes / 4."""
    return len(text.encode()) // 4


def reply_summary(response):
    """(content, tool_calls, prompt_tokens, finish) of a JSON or SSE chat completion."""
    content, calls, prompt, finish = "", 0, None, None
    response = response.strip()
    chunks = []
    if response.startswith("{"):
        try:
            chunks = [json.loads(response)]
        except ValueError:
            chunks = []
    else:
        for line in response.splitlines():
            if line.startswith("data:") and line[5:].strip() not in ("", "[DONE]"):
                try:
                    chunks.append(json.loads(line[5:]))
                except ValueError:
                    pass
    for c in chunks:
        usage = c.get("usage") or {}
        if usage.get("prompt_tokens") is not None:
            prompt = usage["prompt_tokens"]
        for ch in c.get("choices") or []:
            m = ch.get("message") or ch.get("delta") or {}
            content += m.get("content") or ""
            calls += len(m.get("tool_calls") or [])
            finish = ch.get("finish_reason") or finish
    return content, calls, prompt, finish


def server_prompt_counts(log_path, start):
    """The prompt sizes the server's log reports from byte `start` on, in order
    (`Llama.generate: N prefix-match hit, remaining M prompt tokens to eval`)."""
    try:
        with open(log_path, "rb") as f:
            f.seek(start)
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return []
    out = []
    for m in re.finditer(r"(\d+) prefix-match hit, remaining (\d+) prompt tokens", text):
        out.append(int(m.group(1)) + int(m.group(2)))
    return out


def analyse(exchanges, server_counts):
    chats = [e for e in exchanges if e["path"].endswith("/chat/completions")]
    rows = []
    counts = iter(server_counts)
    for e in chats:
        try:
            req = json.loads(e["request"])
        except ValueError:
            req = {}
        msgs = req.get("messages") or []
        content, calls, prompt, finish = reply_summary(e.get("response", ""))
        if prompt is None and e["status"] == 200:
            prompt = next(counts, None)
        elif e["status"] == 200:
            next(counts, None)
        rows.append(
            {
                "status": e["status"],
                "messages": msgs,
                "stream": bool(req.get("stream")),
                "bytes": len(e["request"].encode()),
                "prompt": prompt,
                "empty": e["status"] == 200 and not content.strip() and calls == 0,
                "finish": finish,
                "secs": e.get("secs", 0.0),
                # Keel's smallest reply (256): a request that fit its estimate only without
                # the safety tenth, sent for the server to judge (keel-llm, 9a53f28).
                "floor": bool(req.get("tools")) and req.get("max_tokens") == 256,
            }
        )
    wasted = 0
    for i, r in enumerate(rows):
        resent = i + 1 < len(rows) and rows[i + 1]["messages"] == r["messages"]
        if r["status"] != 200 or r["empty"] or resent:
            wasted += 1
    # Tool results: a request that adds one (role tool, or Keel's user-message form of it)
    # after the previous request; seen when the server's prompt grew by at least half of it.
    sent = seen = 0
    for prev, cur in zip(rows, rows[1:]):
        if prev["prompt"] is None or cur["prompt"] is None:
            continue
        added = cur["messages"][len(prev["messages"]) :]
        results = [
            m
            for m in added
            if m.get("role") == "tool"
            or (m.get("role") == "user" and "[result of tool call" in str(m.get("content", "")))
        ]
        if not results or cur["messages"][: len(prev["messages"])] != prev["messages"]:
            continue
        size = sum(estimate(json.dumps(m.get("content", ""))) for m in results)
        sent += 1
        if cur["prompt"] - prev["prompt"] >= size / 2:
            seen += 1
    first = rows[0] if rows else None
    return {
        "requests": len(rows),
        "wasted": wasted,
        "errors": sum(1 for r in rows if r["status"] != 200),
        "tool_results_sent": sent,
        "tool_results_seen": seen,
        "first_bytes": first["bytes"] if first else 0,
        "first_prompt": first["prompt"] if first else None,
        "max_prompt": max((r["prompt"] or 0 for r in rows), default=0),
        "floor_sent": sum(1 for r in rows if r["floor"]),
        "floor_refused": sum(1 for r in rows if r["floor"] and r["status"] != 200),
    }


def run_once(binary, home, port, model_name, mode, max_iter, timeout, server_log, keep):
    task, check = TASKS[mode]
    work = tempfile.mkdtemp(prefix="keel-llama-")
    for name, text in {**REPO_FILES, **MODE_FILES.get(mode, {})}.items():
        with open(os.path.join(work, name), "w") as f:
            f.write(text)
    subprocess.run(["git", "init", "-q"], cwd=work, check=True)
    subprocess.run(["git", "add", "."], cwd=work, check=True)
    subprocess.run(
        ["git", "-c", "user.email=b@x", "-c", "user.name=b", "commit", "-qm", "init"],
        cwd=work,
        check=True,
    )
    args = [
        binary, "run", "--json", "--provider", "llamacpp", "--model", model_name,
        "--base-url", f"http://127.0.0.1:{port}/v1", "--max-iterations", str(max_iter),
        "--workspace", work,
    ]
    if mode != "default":
        args += ["--mode", mode]
    args.append(task)
    env = dict(os.environ, KEEL_HOME=home, KEEL_APPROVAL__POLICY="never")
    log_start = os.path.getsize(server_log) if os.path.exists(server_log) else 0
    t0 = time.time()
    try:
        p = subprocess.run(args, env=env, capture_output=True, text=True, timeout=timeout)
        out, err, code = p.stdout, p.stderr, p.returncode
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err, code = "timeout", None
    wall = time.time() - t0
    if keep:
        with open(keep, "w") as f:
            f.write(out)
    end, reason = "timeout" if code is None else f"exit {code}", ""
    notices = []
    # Calls, repairs and malformed calls, from Keel's own events: a repaired call has one or
    # more `tool_repaired` events; a call Keel could not repair gets an error result saying so.
    calls, repaired, malformed, protocol = 0, set(), 0, 0
    # Repeated reads the loop guard answered with their earlier result instead of running.
    answered = 0
    # plan_exec: the phases reached, and whether delivery came after a change and a passing
    # test run (the last one before it).
    phases, changed, passing, delivery_ok = [], False, None, None
    names = {}
    for line in out.splitlines():
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if ev.get("type") == "tool_call":
            calls += 1
            names[ev.get("call_id") or ev.get("id")] = ev.get("name")
        if ev.get("type") == "tool_result" and not ev.get("is_error"):
            if ev.get("name") in ("edit_file", "create_file", "apply_patch", "write_file"):
                changed = True
        if ev.get("type") == "tool_result" and ev.get("name") == "run_tests":
            passing = not ev.get("is_error")
        if ev.get("type") == "phase_changed":
            phases.append(ev.get("phase"))
            if ev.get("phase") == "delivery":
                delivery_ok = changed and bool(passing)
        if ev.get("type") == "tool_repaired":
            repaired.add(ev.get("call_id"))
        if ev.get("type") == "tool_result" and str(ev.get("content", "")).startswith(
            "[keel: not run again"
        ):
            answered += 1
        if ev.get("type") == "tool_result" and ev.get("is_error") and str(
            ev.get("content", "")
        ).startswith("the arguments are not valid JSON"):
            malformed += 1
        if ev.get("type") == "error" and ev.get("error_code"):
            # session_finished says failed; the error before it says why.
            reason = ev["error_code"]
            if ev["error_code"] == "llm_failure":
                protocol += 1
        if ev.get("type") == "blocker" and ev.get("source"):
            reason = ev["source"]  # e.g. "budget": the iteration cap
        if ev.get("type") == "session_finished":
            end = ev.get("status", end)
            reason = ev.get("reason") or ev.get("error") or reason
            if isinstance(reason, dict):
                reason = reason.get("kind") or json.dumps(reason)
        if ev.get("type") in ("model_notice", "notice"):
            notices.append(ev.get("text") or ev.get("message") or "")
    ok = subprocess.run(check, shell=True, cwd=work, capture_output=True).returncode == 0
    shutil.rmtree(work, ignore_errors=True)
    return {
        "end": end,
        "reason": str(reason)[:60],
        "exit": code,
        "wall": wall,
        "check": ok,
        "notices": notices,
        "calls": calls,
        "repaired": len(repaired),
        "malformed_errors": malformed,
        "repeats_answered": answered,
        "protocol_errors": protocol,
        "phases": phases,
        "delivery_ok": delivery_ok,
        "stderr_tail": err.strip().splitlines()[-1][:160] if err.strip() else "",
        "log_start": log_start,
    }


# --pid-file: the running server's PID is listed there while it runs (a shared machine's
# measurement script pauses the processes listed in such a file).
PID_FILE = None


def note_pid(pid, running):
    if not PID_FILE:
        return
    try:
        with open(PID_FILE) as f:
            lines = [l for l in f.read().split() if l != str(pid)]
    except OSError:
        lines = []
    if running:
        lines.append(str(pid))
    with open(PID_FILE, "w") as f:
        f.write("".join(l + "\n" for l in lines))


def stop_server(proc):
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    note_pid(proc.pid, False)


def start_server(python, path, chat_format, log_path, threads):
    port = free_port()
    args = [python, "-m", "llama_cpp.server", "--model", path, "--host", "127.0.0.1",
            "--port", str(port), "--n_ctx", "2048",
            "--n_threads", str(threads), "--n_threads_batch", str(threads)]
    if chat_format:
        args += ["--chat_format", chat_format]
    # Appended to: a restarted server's lines follow the old ones (runs read it by offset).
    log = open(log_path, "ab")
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    note_pid(proc.pid, True)
    deadline = time.time() + 300
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited ({proc.returncode}); see {log_path}")
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/v1/models")
            if c.getresponse().status == 200:
                return proc, port
        except OSError:
            time.sleep(1)
    proc.kill()
    note_pid(proc.pid, False)
    raise SystemExit(f"the server did not start in 300 s; see {log_path}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--keel", required=True)
    ap.add_argument("--baseline", required=True)
    ap.add_argument("--python", required=True)
    ap.add_argument("--model", action="append", required=True, help="NAME=PATH[:CHAT_FORMAT]")
    ap.add_argument("--runs", action="append", required=True, help="MODEL:MODE:N")
    ap.add_argument("--max-iterations", type=int, default=8)
    ap.add_argument("--timeout", type=int, default=900, help="seconds per run")
    ap.add_argument("--out", default="llama_server_results.jsonl")
    ap.add_argument("--keep", help="a directory for each run's events and proxy log")
    ap.add_argument(
        "--threads", type=int, default=1,
        help="the server's inference threads, generation and prompt (default 1: the server "
        "evaluates prompts on every core by default, and on a loaded machine those threads wait "
        "on each other; 7 prompt tokens took 97 s with 2 threads, 0.08 s with 1)",
    )
    ap.add_argument(
        "--baseline-runs", type=int, default=None,
        help="at most this many baseline runs per --runs (default: as many as keel's)",
    )
    ap.add_argument(
        "--homes",
        help="keep each binary's KEEL_HOME here (home-keel, home-base) instead of a scratch "
        "directory, so what Keel learned about the server carries over to a later bench run; "
        "use with --proxy-port (what Keel learns is keyed by the base URL)",
    )
    ap.add_argument("--proxy-port", type=int, default=0, help="the proxy's port (default: any)")
    ap.add_argument(
        "--pid-file",
        help="list the server's PID in this file while it runs (one a line; removed when it stops)",
    )
    a = ap.parse_args()
    global PID_FILE
    PID_FILE = a.pid_file
    models = {}
    for m in a.model:
        name, rest = m.split("=", 1)
        path, _, fmt = rest.partition(":")
        models[name] = (path, fmt or None)
    scratch = tempfile.mkdtemp(prefix="keel-llama-bench-")
    where = a.homes or scratch
    homes = {"keel": os.path.join(where, "home-keel"), "baseline": os.path.join(where, "home-base")}
    binaries = {"keel": os.path.abspath(a.keel), "baseline": os.path.abspath(a.baseline)}
    results = []
    out = open(a.out, "a")
    # One proxy, one address, for every --runs: what Keel learns is keyed by the base URL, so
    # plan_exec runs after default ones start with what those learned (and --proxy-port is
    # bound once).
    upstream, log = {"port": None}, Log()
    port = proxy(upstream, log, a.proxy_port)
    for spec in a.runs:
        model, mode, n = spec.split(":")
        path, fmt = models[model]
        server_log = os.path.join(scratch, f"server-{model}.log")
        proc, upstream["port"] = start_server(a.python, path, fmt, server_log, a.threads)
        print(f"== {model} ({os.path.basename(path)}, chat format {fmt or 'from the GGUF'}), mode {mode}, {n} runs per binary", flush=True)
        try:
            for i in range(int(n)):
                for who in ("keel", "baseline"):
                    if who == "baseline" and a.baseline_runs is not None and i >= a.baseline_runs:
                        continue
                    if who == "baseline" and not os.path.exists(binaries[who]):
                        # A baseline still being built joins the alternation once it exists.
                        print(f"  baseline #{i+1:<2} skipped: {binaries[who]} does not exist yet", flush=True)
                        continue
                    before = len(log)
                    keep = None
                    if a.keep:
                        os.makedirs(a.keep, exist_ok=True)
                        keep = os.path.join(a.keep, f"{model}-{mode}-{who}-{i + 1}")
                    r = run_once(binaries[who], homes[who], port, model, mode,
                                 a.max_iterations, a.timeout, server_log, keep and keep + ".events.jsonl")
                    time.sleep(0.2)
                    exchanges = log.since(before)
                    if keep:
                        with open(keep + ".exchanges.json", "w") as f:
                            json.dump(exchanges, f, indent=1)
                    stats = analyse(exchanges, server_prompt_counts(server_log, r.pop("log_start")))
                    r.update(stats, binary=who, model=model, mode=mode, run=i + 1)
                    results.append(r)
                    out.write(json.dumps(r) + "\n")
                    out.flush()
                    if r["end"] == "timeout":
                        # The server goes on generating for the request Keel was killed in
                        # (a whole reply is not cancelled when its client leaves), and the next
                        # run would wait behind it: start it again, same proxy address.
                        stop_server(proc)
                        proc, upstream["port"] = start_server(
                            a.python, path, fmt, server_log, a.threads)
                    print(
                        f"  {who:<8} #{i+1:<2} {r['end']:<16} {r['reason'][:28]:<28} {r['wall']:6.0f} s"
                        f"  req {r['requests']:>2} wasted {r['wasted']:>2} err {r['errors']}"
                        f" proto {r['protocol_errors']}  calls {r['calls']:>2} repaired {r['repaired']}"
                        f" malformed {r['malformed_errors']} repeats answered {r['repeats_answered']}"
                        f"  floor {r['floor_sent']}/{r['floor_refused']} refused"
                        f"  tool results seen {r['tool_results_seen']}/{r['tool_results_sent']}"
                        f"  first {r['first_bytes']} B/{r['first_prompt']} tok  check {'pass' if r['check'] else 'fail'}"
                        + (f"  phases {'>'.join(r['phases']) or '-'}"
                           + ("" if r["delivery_ok"] is None else
                              f" delivery {'after a change + passing check' if r['delivery_ok'] else 'WITHOUT a change + passing check'}")
                           if mode != "default" else ""),
                        flush=True,
                    )
        finally:
            stop_server(proc)
    print("\n== summary (per binary, model, mode)")
    keys = sorted({(r["model"], r["mode"], r["binary"]) for r in results})
    for model, mode, who in keys:
        rs = [r for r in results if (r["model"], r["mode"], r["binary"]) == (model, mode, who)]
        ends = {}
        for r in rs:
            k = r["end"] if not r["reason"] else f"{r['end']}:{r['reason']}"
            ends[k] = ends.get(k, 0) + 1
        walls = sorted(r["wall"] for r in rs)
        print(
            f"  {model:<8} {mode:<9} {who:<8} runs {len(rs)}  ends {ends}\n"
            f"      requests {sum(r['requests'] for r in rs)}, wasted {sum(r['wasted'] for r in rs)},"
            f" HTTP errors {sum(r['errors'] for r in rs)},"
            f" protocol errors (llm_failure) {sum(r['protocol_errors'] for r in rs)};"
            f" calls {sum(r['calls'] for r in rs)}, repaired {sum(r['repaired'] for r in rs)},"
            f" malformed returned as errors {sum(r['malformed_errors'] for r in rs)};"
            f" repeats answered {sum(r['repeats_answered'] for r in rs)};"
            f" sent with the smallest reply (256) {sum(r['floor_sent'] for r in rs)},"
            f" of them refused by the server {sum(r['floor_refused'] for r in rs)};"
            f" tool results seen {sum(r['tool_results_seen'] for r in rs)} of {sum(r['tool_results_sent'] for r in rs)};"
            f" first request {sorted(r['first_bytes'] for r in rs)[len(rs)//2]} B,"
            f" {sorted((r['first_prompt'] or 0) for r in rs)[len(rs)//2]} prompt tokens (median);"
            f" wall median {walls[len(walls)//2]:.0f} s, total {sum(walls):.0f} s;"
            f" check passed {sum(1 for r in rs if r['check'])}/{len(rs)}"
        )
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
