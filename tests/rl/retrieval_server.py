#!/usr/bin/env python3
"""A stand-in retrieval service (Search-R1's retrieval_server.py API) for tests/rl/test_search_tool.c and
tools/fixtures/make_search_ref.py: POST /retrieve {"queries": [...], "topk": k, "return_scores": true} answers
{"result": [[{"document": {"id", "contents": "\"Title\"\\ntext"}, "score"}, ...] per query]}, the passages of a small
fixed corpus ranked by the words they share with the query (ties by id). Markers in a query stand for the rare:
  SB_503_ONCE  the first request with this exact body answers 503
  SB_404       404 Not Found
  SB_EMPTY     {"result": []}        SB_EMPTY_OBJ  {}
  SB_NOT_JSON  a body that is not JSON
  SB_LIST      a JSON list instead of an object
  SB_BAD_DOC   a passage without document.contents
  SB_SLOW      the answer comes after 0.3 s
usage: retrieval_server.py  (any free port, printed on the first line); $SB_PEAK gets the most requests in
progress at once (stand_in_http.py). Standard library only."""
import json, re, time
from stand_in_http import JsonHandler, in_flight, lock, serve

CORPUS = [
    '"Paris"\nParis is the capital and most populous city of France.',
    '"France"\nFrance is a country in Western Europe; its capital is Paris.',
    '"Eiffel Tower"\nThe Eiffel Tower is a wrought-iron lattice tower in Paris, France.',
    '"Berlin"\nBerlin is the capital and largest city of Germany.',
    '"Mount Everest"\nMount Everest is Earth\'s highest mountain above sea level.',
    '"Python (programming language)"\nPython is a high-level programming language. Its design emphasizes readability.',
    '"Unicode"\nUnicode text: café, naïve, 東京, emoji ✓ and "quotes" with a \\ backslash.',
    '"Single line"',
    '"Tabs"\n\tindented\tline\n\nwith blank line',
]
seen = set()


def words(s):
    return set(re.findall(r"\w+", s.lower()))


def search(q, k):
    qw = words(q)
    ranked = sorted(range(len(CORPUS)), key=lambda i: (-len(qw & words(CORPUS[i])), i))
    return [{"document": {"id": str(i), "contents": CORPUS[i]}, "score": float(len(qw & words(CORPUS[i])))}
            for i in ranked[:k]]


class H(JsonHandler):
    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        req = json.loads(raw)
        qs = req.get("queries") or []
        text = " ".join(str(q) for q in qs)
        with lock:
            first = raw not in seen
            seen.add(raw)
        with in_flight():
            if "SB_SLOW" in text:
                time.sleep(0.3)
            if "SB_503_ONCE" in text and first:
                return self.answer(503, "busy")
            if "SB_404" in text:
                return self.answer(404, "no")
            if "SB_NOT_JSON" in text:
                return self.answer(200, "<html>oops</html>")
            if "SB_LIST" in text:
                return self.answer(200, "[1, 2]")
            if "SB_EMPTY_OBJ" in text:
                return self.answer(200, "{}")
            if "SB_EMPTY" in text:
                return self.answer(200, json.dumps({"result": []}))
            if "SB_BAD_DOC" in text:
                return self.answer(200, json.dumps({"result": [[{"doc": 1}]]}))
            self.answer(200, json.dumps({"result": [search(str(q), int(req.get("topk", 3))) for q in qs]}))


serve(H)
