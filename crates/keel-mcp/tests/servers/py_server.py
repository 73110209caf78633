"""A small MCP server on the official Python SDK (`mcp` 2.x), for Keel's MCP client tests.

    python3 py_server.py [--slow-start SECONDS] [--http PORT]

Without --http it speaks stdio. With --http it serves streamable HTTP on 127.0.0.1:PORT/mcp
and, when MCP_TEST_TOKEN is set, refuses requests without `Authorization: Bearer <token>`.
Tools: echo, fail (reports a tool error), crash (exits the process mid-call), env (reads one
variable of the server's environment). Resource: keel://greeting.
"""

import argparse
import os
import sys
import time

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("keel-test")


@server.tool(description="Returns its text argument unchanged.")
def echo(text: str) -> str:
    return text


@server.tool(description="Always fails with a tool error.")
def fail(reason: str = "no reason") -> str:
    raise ToolError(f"failed on purpose: {reason}")


@server.tool(description="Exits the server process in the middle of the call.")
def crash() -> str:
    sys.stdout.flush()
    os._exit(3)


@server.tool(description="The value of one environment variable of the server, or '<unset>'.")
def env(name: str) -> str:
    return os.environ.get(name, "<unset>")


@server.resource("keel://greeting", name="greeting", mime_type="text/plain")
def greeting() -> str:
    return "hello from the python server"


def serve_http(port: int) -> None:
    import uvicorn

    app = server.streamable_http_app()
    token = os.environ.get("MCP_TEST_TOKEN")

    async def guarded(scope, receive, send):
        if token and scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            if headers.get(b"authorization", b"").decode() != f"Bearer {token}":
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"text/plain")]})
                await send({"type": "http.response.body", "body": b"missing or wrong bearer token"})
                return
        await app(scope, receive, send)

    uvicorn.run(guarded, host="127.0.0.1", port=port, log_level="warning", lifespan="on")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--slow-start", type=float, default=0.0)
    p.add_argument("--http", type=int, default=None)
    a = p.parse_args()
    if a.slow_start:
        time.sleep(a.slow_start)
    if a.http is not None:
        serve_http(a.http)
    else:
        server.run("stdio")


if __name__ == "__main__":
    main()
