#!/usr/bin/env python3
"""A stand-in Sandbox Fusion service for tests/rl/test_sandbox.c and tools/fixtures/make_sandbox_ref.py: POST
/run_code with Sandbox Fusion's request ({"code", "stdin", "language", "run_timeout", ...}) runs the Python code
with the stdin and answers as the service does ({"status": "Success" | "Failed" | "SandboxError",
"compile_result": null, "run_result": {"status", "execution_time", "return_code", "stdout", "stderr"}}). Markers in
the code or the stdin stand for what the real service would do slowly or rarely:
  #SB_504_ONCE    the first request with this exact body answers 504 Gateway Timeout
  #SB_504_ALWAYS  every request answers 504
  #SB_HTTP500     HTTP 500
  #SB_NOT_JSON    200 with a body that is not JSON
  #SB_SANDBOX     status SandboxError
  #SB_TLE         the run timed out (TimeLimitExceeded)
  SB_COMPILE      (in the stdin) a compile error (compile_result Finished with return code 1)
usage: sandbox_server.py [PORT]  (0 or none: any free port; the port is printed on the first line). Each request
is appended to $SB_LOG as one JSON line when it is set; $SB_PEAK gets the most runs in progress at once. Standard
library only."""
import json, os, subprocess, sys, time
from stand_in_http import JsonHandler, in_flight, lock, serve

seen = set()


def run(req):
    code, stdin = req.get("code") or "", req.get("stdin")
    if "#SB_SANDBOX" in code:
        return {"status": "SandboxError", "message": "sandbox down", "compile_result": None, "run_result": None}
    if stdin and "SB_COMPILE" in stdin:
        return {"status": "Failed", "message": "", "compile_result": {"status": "Finished", "execution_time": 0.1,
                "return_code": 1, "stdout": "", "stderr": "error"}, "run_result": None}
    if "#SB_TLE" in code:
        return {"status": "Failed", "message": "", "compile_result": None, "run_result": {
            "status": "TimeLimitExceeded", "execution_time": req.get("run_timeout"), "return_code": None,
            "stdout": "", "stderr": ""}}
    t = time.time()
    try:
        p = subprocess.run([sys.executable, "-c", code], input=stdin or "", capture_output=True, text=True,
                           timeout=float(req.get("run_timeout") or 10))
    except subprocess.TimeoutExpired:
        return {"status": "Failed", "message": "", "compile_result": None, "run_result": {
            "status": "TimeLimitExceeded", "execution_time": time.time() - t, "return_code": None, "stdout": "",
            "stderr": ""}}
    rr = {"status": "Finished", "execution_time": time.time() - t, "return_code": p.returncode, "stdout": p.stdout,
          "stderr": p.stderr}
    return {"status": "Success" if p.returncode == 0 else "Failed", "message": "", "compile_result": None,
            "run_result": rr, "executor_pod_name": None, "files": {}}


class H(JsonHandler):
    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if os.environ.get("SB_LOG"):
            with lock, open(os.environ["SB_LOG"], "a") as f:
                f.write(raw.decode() + "\n")
        req = json.loads(raw)
        code = req.get("code") or ""
        with lock:
            first = raw not in seen
            seen.add(raw)
        if "#SB_504_ALWAYS" in code or ("#SB_504_ONCE" in code and first):
            return self.answer(504, "gateway timeout")
        if "#SB_HTTP500" in code:
            return self.answer(500, "internal error")
        if "#SB_NOT_JSON" in code:
            return self.answer(200, "<html>not json</html>")
        with in_flight():
            out = run(req)
        self.answer(200, json.dumps(out))


serve(H, int(sys.argv[1]) if len(sys.argv) > 1 else 0)
