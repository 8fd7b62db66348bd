#!/usr/bin/env python3
"""A small MCP server for tests/rl/test_mcp.c, Python's standard library only, speaking the protocol's three
transports: `stdio` (JSON-RPC lines), `http` (streamable HTTP at /mcp; --sse-answers answers POSTs as an event
stream) and `sse` (the HTTP+SSE transport: GET /sse, POST /messages?session_id=...). HTTP modes print their port
first. --token T requires "Authorization: Bearer T". Tools: add, search, fail, raise, slow, die, garbage, meet; tools/list
is paged two tools at a time. Requests are served concurrently (a thread each; over stdio the server's ping to the
client is matched by its id), as the MCP SDK's servers serve them: meet's calls wait for each other (a barrier of `n`
per `key`). MCP_TEST_GREETING (environment) prefixes add's answer."""
import json
import os
import queue
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

GREETING = os.environ.get("MCP_TEST_GREETING", "")
ARGS = sys.argv[1:]
MODE = ARGS[0] if ARGS else "stdio"
TOKEN = ARGS[ARGS.index("--token") + 1] if "--token" in ARGS else None
SSE_ANSWERS = "--sse-answers" in ARGS


def schema(props, required):
    return {"type": "object", "properties": props, "required": required, "title": "Arguments",
            "additionalProperties": False}


TOOLS = [
    {"name": "add", "description": "Add two integers.",
     "inputSchema": schema({"a": {"title": "A", "type": "integer"},
                            "b": {"title": "B", "type": "integer", "default": 0}}, ["a"])},
    {"name": "search", "description": "Search the web.",
     "inputSchema": schema({"query": {"type": "string", "description": "what to look for"},
                            "depth": {"type": "string", "enum": ["basic", "advanced"]}}, ["query"])},
    {"name": "fail", "description": "Answers with an error result.", "inputSchema": {"type": "object", "properties": {}}},
    {"name": "raise", "description": "Answers with a JSON-RPC error.", "inputSchema": {"type": "object", "properties": {}}},
    {"name": "slow", "description": "Takes three seconds.", "inputSchema": {"type": "object", "properties": {}}},
    {"name": "die", "description": "Exits the server (stdio).", "inputSchema": {"type": "object", "properties": {}}},
    {"name": "garbage", "description": "Answers badly (stdio).", "inputSchema": {"type": "object", "properties": {}}},
    {"name": "meet", "description": "Waits for n calls of the same key.",
     "inputSchema": {"type": "object", "properties": {"key": {"type": "string"}, "n": {"type": "integer"}}}},
]
BARRIERS = {}
BARRIERS_LOCK = threading.Lock()


def call(name, args):
    if name == "add":
        return {"content": [{"type": "text", "text": "%s%d+%d=%d" % (GREETING, args["a"], args.get("b", 0),
                                                                    args["a"] + args.get("b", 0))}]}
    if name == "search":
        q = args.get("query", "")
        return {"content": [
            {"type": "text", "text": str({"query": q, "follow_up_questions": None, "results": [
                {"title": "T1 " + q, "url": "https://a.example", "content": "c1"},
                {"title": "T2", "url": "https://b.example", "content": "c2"}]})},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            {"type": "text", "text": "{'results': []} done"}]}
    if name == "fail":
        return {"content": [{"type": "text", "text": "boom"}], "isError": True}
    if name == "slow":
        time.sleep(3)
        return {"content": [{"type": "text", "text": "late"}]}
    if name == "die":
        os._exit(3)
    if name == "meet":
        with BARRIERS_LOCK:
            b = BARRIERS.setdefault(args["key"], threading.Barrier(args["n"], timeout=5))
        b.wait()
        return {"content": [{"type": "text", "text": "met %d" % args["n"]}]}
    raise KeyError(name)


def handle(msg):
    """The answer to one message (None for a notification)."""
    if "id" not in msg:
        return None
    mid, method, p = msg["id"], msg.get("method"), msg.get("params") or {}
    if method == "initialize":
        assert p.get("protocolVersion") and p.get("clientInfo", {}).get("name") == "verlc", p
        res = {"protocolVersion": "2025-03-26", "capabilities": {"tools": {}},
               "serverInfo": {"name": "test", "version": "1"}}
    elif method == "tools/list":
        start = int(p.get("cursor", "0"))
        res = {"tools": TOOLS[start:start + 2]}
        if start + 2 < len(TOOLS):
            res["nextCursor"] = str(start + 2)
    elif method == "tools/call" and p.get("name") == "raise":
        return {"jsonrpc": "2.0", "id": mid, "error": {"code": -32000, "message": "tool exploded"}}
    elif method == "tools/call":
        try:
            res = call(p["name"], p.get("arguments") or {})
        except KeyError as e:
            return {"jsonrpc": "2.0", "id": mid, "error": {"code": -32602, "message": "Unknown tool: %s" % e}}
    else:
        return {"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "Method not found"}}
    return {"jsonrpc": "2.0", "id": mid, "result": res}


def stdio():
    lock, pongs = threading.Lock(), {}

    def out(*lines):
        with lock:
            for line in lines:
                print(line, flush=True)

    def serve(msg):
        if "id" in msg and msg.get("method") == "tools/call":  # a log notification and a ping first
            pid = "srv-%s" % msg["id"]
            pongs[pid] = [threading.Event(), None]
            out(json.dumps({"jsonrpc": "2.0", "method": "notifications/message",
                            "params": {"level": "info", "data": "calling"}}),
                json.dumps({"jsonrpc": "2.0", "id": pid, "method": "ping"}))
            pongs[pid][0].wait(10)
            pong = pongs.pop(pid)[1]
            assert pong and pong.get("result") == {}, pong
        if msg.get("method") == "tools/call" and msg["params"]["name"] == "garbage":  # a stray line, then no result
            return out("this line is not JSON", json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": 5}))
        ans = handle(msg)
        if ans is not None:
            out(json.dumps(ans))

    for line in sys.stdin:
        msg = json.loads(line)
        if "method" not in msg and msg.get("id") in pongs:  # the client's answer to a ping
            pongs[msg["id"]][1] = msg
            pongs[msg["id"]][0].set()
            continue
        threading.Thread(target=serve, args=(msg,), daemon=True).start()


class Handler(BaseHTTPRequestHandler):
    sessions = {}  # sse: session id -> queue of outgoing messages
    issued = set()  # http: session ids given out
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def authorized(self):
        if TOKEN and self.headers.get("Authorization") != "Bearer " + TOKEN:
            self.send_response(401)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return False
        return True

    def body(self):
        return json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))

    def reply(self, code, body=b"", ctype="application/json", extra=()):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if MODE != "sse" or not self.path.startswith("/sse") or not self.authorized():
            return self.reply(404) if MODE != "sse" or not self.path.startswith("/sse") else None
        sid = uuid.uuid4().hex
        q = Handler.sessions.setdefault(sid, queue.Queue())
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        self.wfile.write(("event: endpoint\r\ndata: /messages/?session_id=%s\r\n\r\n" % sid).encode())
        self.wfile.flush()
        while True:
            try:
                msg = q.get(timeout=15)
            except queue.Empty:
                self.wfile.write(b": keep-alive\n\n")
                continue
            data = json.dumps(msg)
            self.wfile.write(("event: message\ndata: %s\n\n" % data).encode())
            self.wfile.flush()

    def do_DELETE(self):
        Handler.issued.discard(self.headers.get("mcp-session-id"))
        self.reply(200)

    def do_POST(self):
        if not self.authorized():
            return
        msg = self.body()
        if MODE == "sse":
            sid = self.path.split("session_id=")[-1]
            if sid not in Handler.sessions:
                return self.reply(404)
            self.reply(202, b"Accepted", "text/plain")
            ans = handle(msg)
            if ans is not None:
                Handler.sessions[sid].put(ans)
            return
        extra = []
        if msg.get("method") == "initialize":
            sid = uuid.uuid4().hex
            Handler.issued.add(sid)
            extra.append(("mcp-session-id", sid))
        elif self.headers.get("mcp-session-id") not in Handler.issued:
            return self.reply(400, b'{"error": "missing session"}')
        elif self.headers.get("mcp-protocol-version") != "2025-03-26":
            return self.reply(400, b'{"error": "protocol version header"}')
        ans = handle(msg)
        if ans is None:
            return self.reply(202, extra=extra)
        if SSE_ANSWERS:
            note = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}}
            body = "event: message\r\ndata: %s\r\n\r\n: comment\n\nevent: message\ndata: %s\n\n" % (
                json.dumps(note), json.dumps(ans))
            return self.reply(200, body.encode(), "text/event-stream", extra)
        self.reply(200, json.dumps(ans).encode(), "application/json", extra)


def main():
    if MODE == "stdio":
        return stdio()
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    print(srv.server_address[1], flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
