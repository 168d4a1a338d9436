"""Fake model APIs on 127.0.0.1 (standard library only) for the third-party agents that
need a model: Claude Code's ACP adapter speaks the Anthropic Messages API
(`POST /v1/messages`, streamed as server-sent events), gemini-cli the Gemini API
(`POST /v1beta/models/M:streamGenerateContent?alt=sse`).

The model needs no script: it answers from the conversation it is sent. The user's
prompt carries one word after ``fake:``:

* ``fake:hello`` -- a text reply in a few chunks;
* ``fake:slow`` -- a long reply, one chunk every 0.2 s (for up to 30 s), to be cancelled;
* ``fake:tools DIR`` -- four steps, one per request: read ``DIR/hello.txt``, write
  ``DIR/out.txt``, run ``echo from the terminal``, then a text reply with one line per
  tool result (``READ "..."``, ``WRITE "..."``, ``TERMINAL "..."``, each result's first
  200 characters as JSON), so a test sees what each tool gave back to the model.

A request that offers no tools (a title, a summary, a quota probe) is answered with a
short text. Every request is logged (method, path, User-Agent). The tests also make the
fake the agents' HTTP(S) proxy: whatever an agent still sends to the internet arrives as
a `CONNECT HOST:443`, which is logged and refused (404), so nothing leaves the machine
and a test sees each attempt.
"""
from __future__ import annotations

import json
import re
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PROMPT = re.compile(r"fake:(\w+)(?:[ \t]+(\S+))?")
HELLO = ["Hello ", "from the ", "fake model."]
SLOW_CHUNKS, SLOW_INTERVAL = 150, 0.2
WRITTEN = "written by the fake model\n"
TERMINAL_COMMAND = "sh -c 'echo from the terminal'"
#: gemini-cli asks a small model how hard a prompt is (and whose turn is next) in JSON.
ROUTER_ANSWER = {"complexity_reasoning": "a fake", "complexity_score": 1,
                 "reasoning": "a fake", "next_speaker": "user"}


def plan(prompt, results, tools):
    """The next answer: ("text", [chunks], interval) or ("tool", step, folder)."""
    match = PROMPT.search(prompt or "")
    if not tools or not match:
        return "text", ["Fake title"], 0.0
    word, arg = match.group(1), match.group(2)
    if word == "slow":
        return "text", ["tick %d. " % i for i in range(SLOW_CHUNKS)], SLOW_INTERVAL
    if word == "tools" and arg and len(results) < 3:
        return "tool", ("read", "write", "terminal")[len(results)], arg
    if word == "tools":
        lines = ["%s %s" % (name, json.dumps(text[:200]))
                 for name, text in zip(("READ", "WRITE", "TERMINAL"), results)]
        return "text", ["\n".join(lines)], 0.0
    return "text", HELLO, 0.0


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class FakeModel:
    """One fake API on 127.0.0.1:<free port>, served from a thread; ``stop()`` ends it."""

    def __init__(self):
        self.requests = []  # (method, path, user-agent)
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        handler = type("Handler", (_Handler,), {"model": self})
        self.server = _Server(("127.0.0.1", 0), handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.port

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def stop(self):
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()

    def paths(self):
        with self.lock:
            return [path.split("?")[0] for _, path, _ in self.requests]

    # -- what each API implements
    def answer(self, handler, body):
        raise NotImplementedError


class _Handler(BaseHTTPRequestHandler):
    model = None  # type: FakeModel
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _read_body(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return json.loads(raw.decode("utf-8")) if raw else {}
        except ValueError:
            return {}

    def _handle(self):
        with self.model.lock:
            self.model.requests.append((self.command, self.path, self.headers.get("User-Agent", "")))
        body = self._read_body()
        try:
            self.model.answer(self, body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the agent gave up on the answer (a cancelled turn)

    do_GET = do_POST = do_PUT = do_DELETE = do_CONNECT = _handle

    # -- helpers for the APIs
    def send_json(self, status, obj):
        data = json.dumps(obj).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def start_events(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def event(self, data, name=None):
        head = ("event: %s\n" % name) if name else ""
        self.wfile.write(("%sdata: %s\n\n" % (head, json.dumps(data))).encode("utf-8"))
        self.wfile.flush()

    def pause(self, seconds):
        if seconds and self.model.stopping.wait(seconds):
            raise BrokenPipeError("the fake model is stopping")


def _text_of(content):
    """The text of an Anthropic content value (a string or a list of blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(_text_of(block.get("text", "") if block.get("type") == "text" else
                                block.get("content", "") if block.get("type") == "tool_result" else "")
                       for block in content if isinstance(block, dict))
    return ""


class FakeAnthropic(FakeModel):
    """The Anthropic Messages API as Claude Code uses it (ANTHROPIC_BASE_URL=url)."""

    TOOLS = {
        "read": ("mcp__acp__Read", lambda folder: {"file_path": folder + "/hello.txt"}),
        "write": ("mcp__acp__Write", lambda folder: {"file_path": folder + "/out.txt", "content": WRITTEN}),
        "terminal": ("mcp__acp__Bash", lambda folder: {"command": TERMINAL_COMMAND, "timeout": 60000,
                                                       "description": "Echo a line"}),
    }

    def answer(self, handler, body):
        path = handler.path.split("?")[0]
        if path.endswith("/count_tokens"):
            return handler.send_json(200, {"input_tokens": 100})
        if not path.endswith("/v1/messages"):
            return handler.send_json(404, {"type": "error", "error": {"type": "not_found_error",
                                                                      "message": "not in the fake"}})
        prompt, results = self.conversation(body.get("messages") or [])
        kind, what, arg = plan(prompt, results, body.get("tools"))
        if kind == "tool":
            name, make_input = self.TOOLS[what]
            block = {"type": "tool_use", "id": "toolu_" + uuid.uuid4().hex[:20], "name": name,
                     "input": make_input(arg)}
            self.reply(handler, body, [block], "tool_use", 0.0)
        else:
            self.reply(handler, body, [{"type": "text", "text": chunk} for chunk in what], "end_turn", arg)

    @staticmethod
    def conversation(messages):
        """The prompt (the last user text mentioning fake:) and the tool results after it."""
        prompt, results = "", []
        for message in messages:
            if message.get("role") != "user":
                continue
            content = message.get("content")
            blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
            texts = [b for b in blocks if isinstance(b, dict) and b.get("type") == "text"
                     and PROMPT.search(b.get("text") or "")]
            if texts:
                prompt, results = texts[-1]["text"], []
            results += [_text_of(b.get("content")) for b in blocks
                        if isinstance(b, dict) and b.get("type") == "tool_result"]
        return prompt, results

    def reply(self, handler, body, blocks, stop_reason, interval):
        message = {"id": "msg_" + uuid.uuid4().hex[:20], "type": "message", "role": "assistant",
                   "model": body.get("model", "fake"), "content": [], "stop_reason": None,
                   "stop_sequence": None, "usage": {"input_tokens": 100, "output_tokens": 1}}
        if not body.get("stream"):
            merged = []
            for block in blocks:
                if block["type"] == "text" and merged and merged[-1]["type"] == "text":
                    merged[-1] = dict(merged[-1], text=merged[-1]["text"] + block["text"])
                else:
                    merged.append(block)
            return handler.send_json(200, dict(message, content=merged, stop_reason=stop_reason,
                                               usage={"input_tokens": 100, "output_tokens": 10}))
        handler.start_events()
        handler.event({"type": "message_start", "message": message}, "message_start")
        if blocks and blocks[0]["type"] == "text":  # one text block, streamed in chunks
            handler.event({"type": "content_block_start", "index": 0,
                           "content_block": {"type": "text", "text": ""}}, "content_block_start")
            for block in blocks:
                handler.event({"type": "content_block_delta", "index": 0,
                               "delta": {"type": "text_delta", "text": block["text"]}}, "content_block_delta")
                handler.pause(interval)
            handler.event({"type": "content_block_stop", "index": 0}, "content_block_stop")
        else:
            for index, block in enumerate(blocks):
                handler.event({"type": "content_block_start", "index": index,
                               "content_block": dict(block, input={})}, "content_block_start")
                handler.event({"type": "content_block_delta", "index": index,
                               "delta": {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}},
                              "content_block_delta")
                handler.event({"type": "content_block_stop", "index": index}, "content_block_stop")
        handler.event({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                       "usage": {"output_tokens": 10}}, "message_delta")
        handler.event({"type": "message_stop"}, "message_stop")


class FakeGemini(FakeModel):
    """The Gemini API as gemini-cli uses it (GOOGLE_GEMINI_BASE_URL=url)."""

    TOOLS = {
        "read": ("read_file", lambda folder: {"file_path": folder + "/hello.txt"}),
        "write": ("write_file", lambda folder: {"file_path": folder + "/out.txt", "content": WRITTEN}),
        "terminal": ("run_shell_command", lambda folder: {"command": TERMINAL_COMMAND,
                                                          "description": "Echo a line"}),
    }

    def answer(self, handler, body):
        path = handler.path.split("?")[0]
        if path.endswith(":countTokens"):
            return handler.send_json(200, {"totalTokens": 100})
        if not (path.endswith(":streamGenerateContent") or path.endswith(":generateContent")):
            return handler.send_json(404, {"error": {"code": 404, "message": "not in the fake",
                                                     "status": "NOT_FOUND"}})
        prompt, results = self.conversation(body.get("contents") or [])
        config = body.get("generationConfig") or {}
        if config.get("responseMimeType") == "application/json":  # the model router's question
            kind, what, arg = "text", [json.dumps(ROUTER_ANSWER)], 0.0
        else:
            kind, what, arg = plan(prompt, results, body.get("tools"))
        if kind == "tool":
            name, make_args = self.TOOLS[what]
            chunks = [[{"functionCall": {"name": name, "args": make_args(arg)}}]]
            arg = 0.0
        else:
            chunks = [[{"text": chunk}] for chunk in what]
        if path.endswith(":generateContent"):
            parts = [part for chunk in chunks for part in chunk]
            return handler.send_json(200, self.response(parts, "STOP"))
        handler.start_events()
        for index, parts in enumerate(chunks):
            last = index == len(chunks) - 1
            handler.event(self.response(parts, "STOP" if last else None))
            if not last:
                handler.pause(arg)

    @staticmethod
    def response(parts, finish):
        candidate = {"content": {"role": "model", "parts": parts}, "index": 0}
        if finish:
            candidate["finishReason"] = finish
        return {"candidates": [candidate], "modelVersion": "fake",
                "usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": 10, "totalTokenCount": 110}}

    @staticmethod
    def conversation(contents):
        """The prompt (the last user text mentioning fake:) and the tool results after it."""
        prompt, results = "", []
        for content in contents:
            if content.get("role") != "user":
                continue
            parts = [p for p in content.get("parts") or [] if isinstance(p, dict)]
            texts = [p["text"] for p in parts if isinstance(p.get("text"), str) and PROMPT.search(p["text"])]
            if texts:
                prompt, results = texts[-1], []
            for part in parts:
                response = part.get("functionResponse")
                if isinstance(response, dict):
                    output = (response.get("response") or {})
                    results.append(output.get("output") if isinstance(output.get("output"), str)
                                   else json.dumps(output))
        return prompt, results
