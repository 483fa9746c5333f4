"""A scripted, loopback-only fake of the OpenAI HTTP API, good enough to drive the real ``openai`` SDK.

Stdlib only (``http.server`` in a thread), so any virtualenv can import it: the fixture generators
under ``tests/fixtures/generators/`` run it inside their own framework venvs.

Speaks:

* ``POST /v1/chat/completions`` — non-streaming and streaming (SSE ``chat.completion.chunk`` +
  ``[DONE]``, with a usage chunk when ``stream_options.include_usage`` is set);
* ``POST /v1/responses`` — non-streaming and streaming (``response.created`` …
  ``response.completed`` typed events, as the SDK's ``ResponseStreamEvent`` union expects).

Script: a list of turns, consumed in order by successive requests (whatever the endpoint).
A turn is either

* a ``str``: the final assistant text, or
* a list of ``(name, args_dict)`` tuples: tool calls (several = parallel calls in one response).

Example::

    script = [[("get_weather", {"city": "Paris"})], "It is sunny in Paris."]
    with FakeOpenAI(script) as srv:
        client = openai.OpenAI(base_url=srv.base_url, api_key="test")
        ...
    srv.requests  # [{"path": "/v1/chat/completions", "body": {...}}, ...]

Call ids are deterministic: ``call_<turn>_<index>`` (``fc_<turn>_<index>`` item ids for the
Responses API), so fixtures regenerate identically apart from timestamps and span ids.
A request after the script is exhausted gets HTTP 400 (not retried by the SDK) and is counted in
``srv.errors``.

From another language (the Node fixture generators), run it as a process::

    python3 tests/support/fake_openai.py serve [--model M]    # prints its base URL on one line, then serves

and drive it over HTTP: ``POST /__script`` with ``{"script": [...]}`` (a turn of tool calls is a list of
``[name, args]`` pairs) replaces the script and forgets earlier requests; ``GET /__requests`` returns
``{"requests": [...], "errors": [...], "remaining": n}``. It stops when its stdin closes.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeOpenAI", "ToolCallTurn", "Turn"]

ToolCallTurn = Sequence[tuple[str, dict[str, Any]]]
Turn = str | ToolCallTurn

_CREATED = 1_760_000_000


def _usage_numbers(body: dict[str, Any], output: str) -> tuple[int, int]:
    prompt = max(1, len(json.dumps(body.get("messages") or body.get("input") or "")) // 4)
    completion = max(1, len(output) // 4)
    return prompt, completion


class FakeOpenAI:
    """Scripted fake OpenAI server on 127.0.0.1 (free port). Use as a context manager."""

    def __init__(self, script: Sequence[Turn], *, model: str | None = None) -> None:
        self.script: list[Turn] = list(script)
        self.model = model
        self.requests: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self._next = 0
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle

    @property
    def port(self) -> int:
        assert self._server is not None, "server not started"
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def remaining(self) -> int:
        """Turns not yet served."""
        return len(self.script) - self._next

    def start(self) -> FakeOpenAI:
        handler = _make_handler(self)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-openai", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ script

    def load(self, script: Sequence[Turn]) -> None:
        """Replace the script and forget the requests and errors seen so far."""
        with self._lock:
            self.script = list(script)
            self.requests = []
            self.errors = []
            self._next = 0

    def _take(self, path: str, body: dict[str, Any]) -> tuple[int, Turn | None]:
        with self._lock:
            self.requests.append({"path": path, "body": body})
            if self._next >= len(self.script):
                self.errors.append(f"script exhausted at request {len(self.requests)} ({path})")
                return -1, None
            idx = self._next
            self._next += 1
            return idx, self.script[idx]

    # ------------------------------------------------------------------ chat completions

    def _chat_completion(self, idx: int, turn: Turn, body: dict[str, Any]) -> dict[str, Any]:
        model = self.model or body.get("model") or "gpt-4o-mini"
        message: dict[str, Any] = {"role": "assistant", "content": None, "refusal": None}
        if isinstance(turn, str):
            message["content"] = turn
            finish = "stop"
            out = turn
        else:
            message["tool_calls"] = [
                {"id": f"call_{idx}_{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
                for i, (name, args) in enumerate(turn)
            ]
            finish = "tool_calls"
            out = json.dumps(message["tool_calls"])
        prompt, completion = _usage_numbers(body, out)
        return {
            "id": f"chatcmpl-fake{idx}",
            "object": "chat.completion",
            "created": _CREATED + idx,
            "model": model,
            "system_fingerprint": "fp_fake",
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
        }

    def _chat_chunks(self, idx: int, turn: Turn, body: dict[str, Any]) -> list[dict[str, Any]]:
        full = self._chat_completion(idx, turn, body)
        base = {
            "id": full["id"],
            "object": "chat.completion.chunk",
            "created": full["created"],
            "model": full["model"],
            "system_fingerprint": "fp_fake",
        }

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]}

        chunks = [chunk({"role": "assistant", "content": "" if isinstance(turn, str) else None})]
        if isinstance(turn, str):
            words = turn.split(" ")
            for i, w in enumerate(words):
                chunks.append(chunk({"content": w if i == 0 else " " + w}))
        else:
            for i, call in enumerate(full["choices"][0]["message"]["tool_calls"]):
                args = call["function"]["arguments"]
                chunks.append(
                    chunk(
                        {
                            "tool_calls": [
                                {
                                    "index": i,
                                    "id": call["id"],
                                    "type": "function",
                                    "function": {"name": call["function"]["name"], "arguments": ""},
                                }
                            ]
                        }
                    )
                )
                half = len(args) // 2
                for piece in (args[:half], args[half:]):
                    chunks.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}))
        chunks.append(chunk({}, full["choices"][0]["finish_reason"]))
        if (body.get("stream_options") or {}).get("include_usage"):
            chunks.append({**base, "choices": [], "usage": full["usage"]})
        return chunks

    # ------------------------------------------------------------------ responses

    def _response_items(self, idx: int, turn: Turn) -> list[dict[str, Any]]:
        if isinstance(turn, str):
            return [
                {
                    "type": "message",
                    "id": f"msg_{idx}",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": turn, "annotations": [], "logprobs": []}],
                }
            ]
        return [
            {
                "type": "function_call",
                "id": f"fc_{idx}_{i}",
                "call_id": f"call_{idx}_{i}",
                "name": name,
                "arguments": json.dumps(args),
                "status": "completed",
            }
            for i, (name, args) in enumerate(turn)
        ]

    def _response(
        self,
        idx: int,
        turn: Turn | None,
        body: dict[str, Any],
        *,
        status: str = "completed",
        items: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        model = self.model or body.get("model") or "gpt-4o-mini"
        output = items if items is not None else self._response_items(idx, turn) if turn is not None else []
        prompt, completion = _usage_numbers(body, json.dumps(output))
        resp: dict[str, Any] = {
            "id": f"resp_fake{idx}",
            "object": "response",
            "created_at": _CREATED + idx,
            "status": status,
            "error": None,
            "incomplete_details": None,
            "instructions": body.get("instructions"),
            "max_output_tokens": body.get("max_output_tokens"),
            "model": model,
            "output": output,
            "parallel_tool_calls": body.get("parallel_tool_calls", True) is not False,
            "previous_response_id": body.get("previous_response_id"),
            "reasoning": {"effort": None, "summary": None},
            "store": bool(body.get("store", True)),
            "temperature": body.get("temperature", 1.0),
            "text": {"format": {"type": "text"}},
            "tool_choice": body.get("tool_choice", "auto"),
            "tools": body.get("tools") or [],
            "top_p": body.get("top_p", 1.0),
            "truncation": body.get("truncation") or "disabled",
            "usage": None,
            "user": None,
            "metadata": body.get("metadata") or {},
        }
        if status == "completed":
            resp["usage"] = {
                "input_tokens": prompt,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": completion,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": prompt + completion,
            }
        return resp

    def _response_events(self, idx: int, turn: Turn, body: dict[str, Any]) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []

        def emit(kind: str, **fields: Any) -> None:
            events.append({"type": kind, "sequence_number": len(events), **fields})

        emit("response.created", response=self._response(idx, None, body, status="in_progress", items=[]))
        emit("response.in_progress", response=self._response(idx, None, body, status="in_progress", items=[]))
        items = self._response_items(idx, turn)
        for n, item in enumerate(items):
            if item["type"] == "message":
                emit(
                    "response.output_item.added", output_index=n, item={**item, "status": "in_progress", "content": []}
                )
                part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
                emit("response.content_part.added", item_id=item["id"], output_index=n, content_index=0, part=part)
                text = item["content"][0]["text"]
                for i, w in enumerate(text.split(" ")):
                    emit(
                        "response.output_text.delta",
                        item_id=item["id"],
                        output_index=n,
                        content_index=0,
                        delta=w if i == 0 else " " + w,
                        logprobs=[],
                    )
                emit(
                    "response.output_text.done",
                    item_id=item["id"],
                    output_index=n,
                    content_index=0,
                    text=text,
                    logprobs=[],
                )
                emit(
                    "response.content_part.done",
                    item_id=item["id"],
                    output_index=n,
                    content_index=0,
                    part={**part, "text": text},
                )
            else:
                emit(
                    "response.output_item.added",
                    output_index=n,
                    item={**item, "arguments": "", "status": "in_progress"},
                )
                args = item["arguments"]
                half = len(args) // 2
                for piece in (args[:half], args[half:]):
                    emit("response.function_call_arguments.delta", item_id=item["id"], output_index=n, delta=piece)
                emit(
                    "response.function_call_arguments.done",
                    item_id=item["id"],
                    output_index=n,
                    arguments=args,
                    name=item["name"],
                )
            emit("response.output_item.done", output_index=n, item=item)
        emit("response.completed", response=self._response(idx, turn, body, items=items))
        return events


def _make_handler(fake: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send_json(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("x-request-id", f"req_fake{len(fake.requests)}")
            self.end_headers()
            self.wfile.write(data)

        def _send_sse(self, frames: list[bytes]) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            for frame in frames:
                self.wfile.write(frame)
                self.wfile.flush()

        def do_GET(self) -> None:
            if self.path == "/__requests":
                with fake._lock:
                    state = {"requests": fake.requests, "errors": fake.errors, "remaining": fake.remaining}
                self._send_json(200, state)
            elif self.path.rstrip("/").endswith("/models"):
                self._send_json(
                    200,
                    {
                        "object": "list",
                        "data": [
                            {
                                "id": fake.model or "gpt-4o-mini",
                                "object": "model",
                                "created": _CREATED,
                                "owned_by": "fake",
                            }
                        ],
                    },
                )
            else:
                self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "invalid_request_error"}})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw or b"{}")
            except json.JSONDecodeError:
                self._send_json(400, {"error": {"message": "body is not JSON", "type": "invalid_request_error"}})
                return
            path = self.path.split("?", 1)[0].rstrip("/")
            if path == "/__script":
                fake.load([_turn(t) for t in body.get("script") or []])
                self._send_json(200, {"turns": len(fake.script)})
                return
            if not (path.endswith("/chat/completions") or path.endswith("/responses")):
                self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "invalid_request_error"}})
                return
            idx, turn = fake._take(path, body)
            if turn is None:
                self._send_json(
                    400,
                    {
                        "error": {
                            "message": "FakeOpenAI script exhausted",
                            "type": "invalid_request_error",
                            "code": "script_exhausted",
                        }
                    },
                )
                return
            stream = bool(body.get("stream"))
            if path.endswith("/chat/completions"):
                if stream:
                    frames = [f"data: {json.dumps(c)}\n\n".encode() for c in fake._chat_chunks(idx, turn, body)]
                    frames.append(b"data: [DONE]\n\n")
                    self._send_sse(frames)
                else:
                    self._send_json(200, fake._chat_completion(idx, turn, body))
            else:
                if stream:
                    self._send_sse(
                        [
                            f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode()
                            for e in fake._response_events(idx, turn, body)
                        ]
                    )
                else:
                    self._send_json(200, fake._response(idx, turn, body))

    return Handler


def _turn(raw: Any) -> Turn:
    """A turn sent as JSON: text, or a list of ``[name, args]`` pairs."""
    if isinstance(raw, str):
        return raw
    return [(str(name), dict(args)) for name, args in raw]


def _serve(argv: Sequence[str]) -> None:
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="fake_openai.py serve")
    parser.add_argument("--model", default=None)
    args = parser.parse_args(argv)
    with FakeOpenAI([], model=args.model) as srv:
        print(srv.base_url, flush=True)
        sys.stdin.read()  # until the parent closes our stdin (or exits)


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] == ["serve"]:
        _serve(sys.argv[2:])
    else:  # manual poke: python tests/support/fake_openai.py
        with FakeOpenAI([[("get_weather", {"city": "Paris"})], "Sunny."]) as srv:
            print(srv.base_url)
            time.sleep(0.1)
