#!/usr/bin/env python3
"""A scripted fake OpenAI-compatible model server (standard library only).

The real Copilot CLI, run with ``COPILOT_OFFLINE=true`` and
``COPILOT_PROVIDER_BASE_URL=<FakeModel.base_url>``, sends its chat completions here.
Each test scripts the answers as a queue of turns::

    model = FakeModel(log_path="model.jsonl").start()
    model.script(
        Turn.tool("ide-get_selection", {}),      # first request: one tool call
        Turn.text("The selection is fine."),      # next request: plain text
    )
    ...
    model.tool_results("ide-get_selection")     # what the CLI sent back to the model
    model.stop()

A turn is consumed by the next "agent" request (one that offers tools); other chat
requests (none seen from CLI 1.0.102, but kept apart to be safe) get
``FakeModel.aux_text``. When the queue is empty the agent request is answered with
``FakeModel.default_text``. Every request (method, path, headers, JSON body) is kept
in memory and appended to a JSONL log.

As a script: ``python3 fake_model.py [--port N] [--log FILE] [--script FILE.json]``
prints ``FAKE_MODEL_URL=http://127.0.0.1:PORT/v1`` and serves until killed
(``POST /_script`` with a JSON list of turns appends to the queue). The
script file is a JSON list of turns: ``{"text": "..."}``,
``{"tool_calls": [{"name": "edit", "arguments": {...}}]}``, optional ``"delay"``
(seconds before the first byte), ``"status"`` (an HTTP error status) and
``"error"`` (its message).
"""

import argparse
import itertools
import json
import os
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["Turn", "FakeModel"]

MODEL_IDS = ("gpt-4.1",)


class Turn(object):
    """One scripted answer to one agent chat-completion request."""

    def __init__(self, text=None, tool_calls=None, delay=0.0, status=None,
                 error=None, chunk_delay=0.0, finish_reason=None):
        self.text = text
        # tool_calls: list of (name, arguments-dict) or dicts {"name", "arguments", "id"?}
        self.tool_calls = []
        for call in tool_calls or ():
            if isinstance(call, dict):
                name, args, cid = call["name"], call.get("arguments", {}), call.get("id")
            else:
                name, args = call
                cid = None
            self.tool_calls.append({
                "id": cid or "call_" + uuid.uuid4().hex[:24],
                "name": name,
                "arguments": args,
            })
        self.delay = float(delay or 0.0)
        self.status = status
        self.error = error
        self.chunk_delay = float(chunk_delay or 0.0)
        self.finish_reason = finish_reason

    @classmethod
    def text_turn(cls, text, **kw):
        return cls(text=text, **kw)

    # Readable aliases.
    @classmethod
    def say(cls, text, **kw):
        return cls(text=text, **kw)

    @classmethod
    def tool(cls, name, arguments=None, text=None, **kw):
        return cls(text=text, tool_calls=[(name, arguments or {})], **kw)

    @classmethod
    def tools(cls, *calls, **kw):
        return cls(tool_calls=list(calls), **kw)

    @classmethod
    def fail(cls, status=500, error="fake provider failure", **kw):
        return cls(status=status, error=error, **kw)

    @classmethod
    def from_json(cls, obj):
        if isinstance(obj, str):
            return cls(text=obj)
        return cls(text=obj.get("text"), tool_calls=obj.get("tool_calls"),
                   delay=obj.get("delay", 0.0), status=obj.get("status"),
                   error=obj.get("error"), chunk_delay=obj.get("chunk_delay", 0.0))

    def describe(self):
        if self.status:
            return "HTTP %s" % self.status
        if self.tool_calls:
            return "tool calls " + ", ".join(c["name"] for c in self.tool_calls)
        return "text %r" % (self.text or "")[:40]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "FakeModel/1.0"

    def log_message(self, fmt, *args):  # silence stderr
        pass

    # --- plumbing -----------------------------------------------------------------
    @property
    def model(self):
        return self.server.fake_model

    def _read_body(self):
        te = (self.headers.get("Transfer-Encoding") or "").lower()
        if "chunked" in te:
            parts = []
            while True:
                line = self.rfile.readline()
                if not line:
                    break
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    # trailers
                    while True:
                        t = self.rfile.readline()
                        if not t or t in (b"\r\n", b"\n"):
                            break
                    break
                parts.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(parts)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _send_json(self, status, obj, extra_headers=()):
        data = json.dumps(obj).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in extra_headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _record(self, body_bytes):
        body = None
        if body_bytes:
            try:
                body = json.loads(body_bytes.decode("utf-8"))
            except ValueError:
                body = body_bytes.decode("utf-8", "replace")
        return self.model._record(self.command, self.path, dict(self.headers.items()), body)

    # --- methods ---------------------------------------------------------------
    def do_GET(self):
        self._record(b"")
        path = self.path.split("?")[0].rstrip("/")
        if path.endswith("/models"):
            self._send_json(200, {"object": "list", "data": [
                {"id": m, "object": "model", "created": 1700000000, "owned_by": "fake"}
                for m in self.model.model_ids]})
            return
        for m in self.model.model_ids:
            if path.endswith("/models/" + m):
                self._send_json(200, {"id": m, "object": "model",
                                      "created": 1700000000, "owned_by": "fake"})
                return
        self._send_json(404, {"error": {"message": "not found: " + self.path,
                                        "type": "invalid_request_error"}})

    def do_POST(self):
        raw = self._read_body()
        entry = self._record(raw)
        path = self.path.split("?")[0].rstrip("/")
        if path == "/_script":
            # Control endpoint (script mode): append turns, a JSON list.
            turns = entry.get("body") or []
            self.model.script(*(turns if isinstance(turns, list) else [turns]))
            self._send_json(200, {"pending": self.model.pending_turns()})
            return
        if not path.endswith("/chat/completions"):
            self._send_json(404, {"error": {"message": "not found: " + self.path,
                                            "type": "invalid_request_error"}})
            return
        body = entry.get("body") if isinstance(entry.get("body"), dict) else {}
        turn = self.model._next_turn(body, entry)
        entry["turn"] = turn.describe()
        self.model._append_log({"answer_to": entry["seq"], "turn": entry["turn"]})
        if turn.delay:
            # Wait, but give up early when the client goes away or the model stops.
            self.model._stopping.wait(turn.delay)
        if turn.status:
            self._send_json(turn.status, {"error": {
                "message": turn.error or "fake provider error",
                "type": "server_error" if turn.status >= 500 else "invalid_request_error",
                "code": None}})
            return
        if body.get("stream"):
            self._stream(turn, body)
        else:
            self._complete(turn, body)

    def do_DELETE(self):
        self._record(b"")
        self._send_json(405, {"error": {"message": "method not allowed"}})

    # --- answers -----------------------------------------------------------------
    def _base(self, body, obj):
        return {"id": "chatcmpl-" + self.model._resp_id(), "object": obj,
                "created": int(time.time()), "model": body.get("model") or "gpt-4.1",
                "system_fingerprint": "fp_fake"}

    def _usage(self):
        return {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}

    def _complete(self, turn, body):
        msg = {"role": "assistant", "content": turn.text}
        if turn.tool_calls:
            msg["tool_calls"] = [{"id": c["id"], "type": "function", "function": {
                "name": c["name"], "arguments": json.dumps(c["arguments"])}}
                for c in turn.tool_calls]
        resp = self._base(body, "chat.completion")
        resp["choices"] = [{"index": 0, "message": msg, "logprobs": None,
                            "finish_reason": turn.finish_reason or
                            ("tool_calls" if turn.tool_calls else "stop")}]
        resp["usage"] = self._usage()
        self._send_json(200, resp)

    def _stream(self, turn, body):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        base = self._base(body, "chat.completion.chunk")

        def send(delta, finish=None, usage=None):
            chunk = dict(base)
            chunk["choices"] = [{"index": 0, "delta": delta, "logprobs": None,
                                 "finish_reason": finish}]
            if usage is not None:
                chunk["usage"] = usage
            self.wfile.write(b"data: " + json.dumps(chunk).encode("utf-8") + b"\n\n")
            self.wfile.flush()
            if turn.chunk_delay:
                time.sleep(turn.chunk_delay)

        try:
            send({"role": "assistant", "content": ""})
            if turn.text:
                # Several chunks, so that streaming is visible to the client.
                words = turn.text.split(" ")
                for i, w in enumerate(words):
                    send({"content": w + (" " if i < len(words) - 1 else "")})
            for idx, c in enumerate(turn.tool_calls):
                args = json.dumps(c["arguments"])
                half = len(args) // 2
                send({"tool_calls": [{"index": idx, "id": c["id"], "type": "function",
                                      "function": {"name": c["name"], "arguments": ""}}]})
                send({"tool_calls": [{"index": idx, "function": {"arguments": args[:half]}}]})
                send({"tool_calls": [{"index": idx, "function": {"arguments": args[half:]}}]})
            finish = turn.finish_reason or ("tool_calls" if turn.tool_calls else "stop")
            send({}, finish)
            opts = body.get("stream_options") or {}
            if opts.get("include_usage"):
                chunk = dict(base)
                chunk["choices"] = []
                chunk["usage"] = self._usage()
                self.wfile.write(b"data: " + json.dumps(chunk).encode("utf-8") + b"\n\n")
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.model._append_log({"note": "client closed the stream"})


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class FakeModel(object):
    """The fake provider. ``start()`` binds 127.0.0.1 on ``port`` (0 = any free)."""

    def __init__(self, log_path=None, port=0, default_text="OK.", aux_text="Title",
                 model_ids=MODEL_IDS):
        self.log_path = log_path
        self.port = port
        self.default_text = default_text
        self.aux_text = aux_text
        self.model_ids = tuple(model_ids)
        self.requests = []
        self._turns = []
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._seq = itertools.count(1)
        self._ids = itertools.count(1)
        self._stopping = threading.Event()
        self._httpd = None
        self._thread = None

    # --- life cycle ---------------------------------------------------------------
    def start(self):
        self._httpd = _Server(("127.0.0.1", self.port), _Handler)
        self._httpd.fake_model = self
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={"poll_interval": 0.1},
                                        name="fake-model", daemon=True)
        self._thread.start()
        self._append_log({"note": "listening", "url": self.base_url})
        return self

    def stop(self):
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    @property
    def base_url(self):
        return "http://127.0.0.1:%d/v1" % self.port

    # --- scripting ----------------------------------------------------------------
    def script(self, *turns):
        """Append turns (``Turn`` objects, strings or JSON-style dicts) to the queue."""
        with self._cond:
            for t in turns:
                if not isinstance(t, Turn):
                    t = Turn.from_json(t)
                self._turns.append(t)
            self._cond.notify_all()
        return self

    def pending_turns(self):
        with self._lock:
            return len(self._turns)

    @staticmethod
    def is_agent_request(body):
        return bool(body.get("tools"))

    def _next_turn(self, body, entry):
        with self._cond:
            agent = self.is_agent_request(body)
            entry["agent"] = agent
            if agent and self._turns:
                return self._turns.pop(0)
            if agent:
                return Turn(text=self.default_text)
            return Turn(text=self.aux_text)

    def _resp_id(self):
        return "%06d" % next(self._ids)

    # --- recording ----------------------------------------------------------------
    def _record(self, method, path, headers, body):
        entry = {"seq": next(self._seq), "time": time.time(), "method": method,
                 "path": path, "headers": headers, "body": body}
        with self._cond:
            self.requests.append(entry)
            self._cond.notify_all()
        self._append_log(entry)
        return entry

    def _append_log(self, obj):
        if not self.log_path:
            return
        line = json.dumps(obj, ensure_ascii=False) + "\n"
        with self._lock:
            with open(self.log_path, "a", encoding="utf-8") as fh:
                fh.write(line)

    # --- reading back ---------------------------------------------------------------
    def chat_requests(self, agent_only=True):
        with self._lock:
            out = [r for r in self.requests
                   if r["method"] == "POST" and r["path"].rstrip("/").endswith("/chat/completions")
                   and isinstance(r["body"], dict)]
        if agent_only:
            out = [r for r in out if self.is_agent_request(r["body"])]
        return out

    def wait_for(self, predicate, timeout=30.0):
        """Wait until ``predicate(self)`` is true; returns its value or raises."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                self._lock.release()
                try:
                    value = predicate(self)
                finally:
                    self._lock.acquire()
                if value:
                    return value
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("fake model: condition not met in %.0f s" % timeout)
                self._cond.wait(min(left, 0.2))

    def wait_for_chat(self, count=1, timeout=30.0):
        return self.wait_for(lambda m: len(m.chat_requests()) >= count and m.chat_requests(),
                             timeout)

    def offered_tools(self, request=None):
        """Tool names the CLI offered in a chat request (default: the last one)."""
        reqs = self.chat_requests()
        if request is None:
            if not reqs:
                return []
            request = reqs[-1]
        return [t.get("function", {}).get("name") for t in request["body"].get("tools", [])]

    def tool_messages(self):
        """Every ``role: tool`` message of the latest agent request, with the name of the
        tool call it answers: list of dicts {name, tool_call_id, content, arguments}."""
        reqs = self.chat_requests()
        if not reqs:
            return []
        messages = reqs[-1]["body"].get("messages", [])
        calls = {}
        for m in messages:
            for c in m.get("tool_calls") or ():
                calls[c.get("id")] = c.get("function", {})
        out = []
        for m in messages:
            if m.get("role") == "tool":
                fn = calls.get(m.get("tool_call_id"), {})
                out.append({"name": fn.get("name"), "tool_call_id": m.get("tool_call_id"),
                            "arguments": fn.get("arguments"),
                            "content": _content_text(m.get("content"))})
        return out

    def tool_results(self, name=None):
        """Contents (text) of the tool results sent back to the model, optionally only
        those of the tool ``name`` (e.g. ``"ide-get_selection"``)."""
        return [m["content"] for m in self.tool_messages() if name is None or m["name"] == name]

    def user_texts(self, request=None):
        reqs = self.chat_requests()
        if request is None:
            if not reqs:
                return []
            request = reqs[-1]
        return [_content_text(m.get("content")) for m in request["body"].get("messages", [])
                if m.get("role") == "user"]


def _content_text(content):
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return json.dumps(content)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--log", default=None, help="JSONL request log")
    ap.add_argument("--script", default=None, help="JSON list of turns")
    ap.add_argument("--default-text", default="OK.")
    args = ap.parse_args(argv)
    model = FakeModel(log_path=args.log, port=args.port, default_text=args.default_text)
    if args.script:
        with open(args.script, encoding="utf-8") as fh:
            model.script(*json.load(fh))
    model.start()
    print("FAKE_MODEL_URL=%s" % model.base_url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        model.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
