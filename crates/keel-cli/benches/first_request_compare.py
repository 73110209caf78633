#!/usr/bin/env python3
"""The first request with everything configured, two `keel` binaries side by side.

    python3 crates/keel-cli/benches/first_request_compare.py KEEL BASELINE

The workspace of keel-engine's `first_request_full_stack` test, through the command line: 20
skills, 50 user-memory facts (`keel memory add`), an AGENTS.md, a constitution and an MCP server
(the Python SDK test server, `[mcp.servers.py]` in the user's config file); task "fix the
off-by-one in src/parser.rs". A local OpenAI-compatible mock records every request. Each binary
runs twice, in two directories (the second a git repository on another branch), with its own
KEEL_HOME. Printed per binary: the first request's size (bytes, and tokens by Keel's bytes/4
estimate), its head (system prompt and tool catalog) and first message, the tools offered, and
whether the head is byte-identical across the two runs and across the requests of a run.
"""
import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
MCP_SERVER = os.path.join(REPO, "crates", "keel-mcp", "tests", "servers", "py_server.py")
TASK = "fix the off-by-one in src/parser.rs"
AGENTS_MD = (
    "# Working in this repository\n\n"
    "- Build with `cargo build`; test with `cargo test --workspace`.\n"
    "- Library code returns errors with `thiserror`; no `unwrap()` outside tests.\n"
    "- Keep functions short; name things for what they are.\n"
    "- Public items carry a doc comment.\n"
)
TOPICS = [
    "prefers small commits with imperative subject lines",
    "works on the billing team; invoices live in the billing service",
    "uses fish as the login shell",
    "the staging database is refreshed every Monday",
    "likes tables in explanations",
    "the parser must stay allocation-free on the hot path",
    "reviews happen in the afternoon, Berlin time",
    "CI runs on self-hosted runners with 2 cores",
    "prefers `anyhow` only in binaries",
    "the docs site is built with mdBook",
]


def populate(root, git):
    os.makedirs(os.path.join(root, ".keel"), exist_ok=True)
    with open(os.path.join(root, "AGENTS.md"), "w") as f:
        f.write(AGENTS_MD)
    with open(os.path.join(root, ".keel", "constitution.json"), "w") as f:
        json.dump({"protected_paths": ["migrations/", "LICENSE"], "forbidden_commands": ["git push"],
                   "required_gates": ["cargo test --workspace"],
                   "conventions": ["Errors name the file.", "No unwrap in library code."]}, f)
    for i in range(20):
        d = os.path.join(root, ".keel", "skills", f"skill-{i:02}")
        os.makedirs(d)
        with open(os.path.join(d, "SKILL.md"), "w") as f:
            f.write(f"---\nname: skill-{i:02}\ndescription: Handles task family {i} with care and checks\n---\nBody {i}.\n")
    os.makedirs(os.path.join(root, "src"))
    with open(os.path.join(root, "src", "parser.rs"), "w") as f:
        f.write("pub fn parse(s: &str) -> u32 { s.len() as u32 }\n")
    if git:
        os.makedirs(os.path.join(root, ".git", "refs"))
        with open(os.path.join(root, ".git", "HEAD"), "w") as f:
            f.write("ref: refs/heads/other\n")


class Mock(http.server.BaseHTTPRequestHandler):
    requests = []

    def log_message(self, *a):
        pass

    def do_GET(self):
        self.reply("application/json", json.dumps({"data": [{"id": "m"}]}))

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        Mock.requests.append(body)
        req = json.loads(body)
        text = "Done: nothing needed changing."
        if req.get("stream"):
            chunks = [{"choices": [{"index": 0, "delta": {"role": "assistant", "content": text}}]},
                      {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                       "usage": {"prompt_tokens": 100, "completion_tokens": 5, "total_tokens": 105}}]
            self.reply("text/event-stream",
                       "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n")
        else:
            self.reply("application/json", json.dumps({
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                             "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 100, "completion_tokens": 5, "total_tokens": 105}}))

    def reply(self, kind, body):
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def run(binary, port, git):
    scratch = tempfile.mkdtemp(prefix="keel-first-request-")
    try:
        ws, home = os.path.join(scratch, "ws"), os.path.join(scratch, "home")
        os.makedirs(ws)
        os.makedirs(home)
        populate(ws, git)
        config = os.path.join(home, "config.toml")
        with open(config, "w") as f:
            f.write(f'[verify]\nenabled = false\n\n[mcp.servers.py]\ncommand = "python3"\nargs = [{json.dumps(MCP_SERVER)}]\n')
        env = dict(os.environ, KEEL_HOME=home, KEEL_CONFIG=config, HOME=home, OPENAI_API_KEY="sk-mock")
        for i in range(50):
            subprocess.run([binary, "memory", "add", f"{TOPICS[i % len(TOPICS)]} (note {i})"],
                           env=env, cwd=ws, check=True, capture_output=True)
        Mock.requests = []
        subprocess.run([binary, "run", "--json", "--provider", "openai", "--model", "m",
                        "--base-url", f"http://127.0.0.1:{port}/v1", "--workspace", ws, TASK],
                       env=env, cwd=ws, capture_output=True, timeout=300)
        return [json.loads(b) for b in Mock.requests]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def head(req):
    system = [m for m in req["messages"] if m["role"] == "system"]
    return json.dumps([system, req.get("tools", [])], sort_keys=True)


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Mock)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    port = srv.server_address[1]
    print("| binary | first request | head | first message | tools | head identical (turns, runs) |")
    print("|---|---|---|---|---|---|")
    for name, binary in (("keel", sys.argv[1]), ("baseline", sys.argv[2])):
        a, b = run(binary, port, False), run(binary, port, True)
        if not a or not b:
            print(f"| {name} | no request | | | | |")
            continue
        first = a[0]
        whole = len(json.dumps([first["messages"], first.get("tools", [])]))
        h = len(head(first))
        tools = sorted(t["function"]["name"] for t in first.get("tools", []))
        same_turns = all(head(r) == head(first) for r in a if r.get("tools") is not None)
        same_runs = head(first) == head(b[0])
        print(f"| {name} | {whole:,} B ≈ {whole // 4:,} tok | {h:,} B ≈ {h // 4:,} tok "
              f"| {(whole - h):,} B ≈ {(whole - h) // 4:,} tok | {len(tools)} | "
              f"{'yes' if same_turns else 'no'} ({len(a)} requests), {'yes' if same_runs else 'no'} |")
        print(f"  {name} tools: {', '.join(tools)}", file=sys.stderr)
    srv.shutdown()


if __name__ == "__main__":
    main()
