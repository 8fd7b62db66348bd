"""What the tests' stand-in HTTP services share (tests/rl/sandbox_server.py, tests/rl/retrieval_server.py): a quiet
handler answering JSON, the count of requests in progress (the most at once written to $SB_PEAK), and the threaded
server printing its port on the first line. Standard library only."""
import contextlib
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

lock = threading.Lock()
_active, _peak = 0, 0


class JsonHandler(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def answer(self, code, body):
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@contextlib.contextmanager
def in_flight():
    """counts a request in progress while the block runs"""
    global _active, _peak
    with lock:
        _active += 1
        if _active > _peak and os.environ.get("SB_PEAK"):
            _peak = _active
            with open(os.environ["SB_PEAK"], "w") as f:
                f.write(str(_peak))
    try:
        yield
    finally:
        with lock:
            _active -= 1


def serve(handler, port=0):
    srv = ThreadingHTTPServer(("127.0.0.1", port), handler)
    srv.daemon_threads = True
    print(srv.server_address[1], flush=True)
    srv.serve_forever()
