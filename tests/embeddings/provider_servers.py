"""Local HTTP servers that speak each embedding provider's wire format, strictly.

Each server checks method, path, auth header and request body the way the real API would (unknown body
keys, wrong model, too many inputs and missing auth are refused with the provider's error shape) and
records every request. Tests queue faults (status, headers, body, delay) to be served before normal
answers. Vectors are deterministic hashed bags of words, so texts sharing words are similar and the
search pipeline behaves like it would with a real model.
"""

from __future__ import annotations

import email.parser
import email.policy
import hashlib
import json
import math
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

WORD = re.compile(r"[a-z0-9]+")


def hashed_vector(text: str, dims: int) -> list[float]:
    """Deterministic bag-of-words vector: each word adds a signed unit to two buckets."""
    vec = [0.0] * dims
    for word in WORD.findall(text.lower()):
        digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
        for k in range(2):
            bucket = int.from_bytes(digest[k * 4 : k * 4 + 3], "little") % dims
            vec[bucket] += 1.0 if digest[k * 4 + 3] & 1 else -1.0
    if not any(vec):
        vec[0] = 1.0
    # Unnormalised on purpose (real APIs are not all normalised); scale by 3.
    return [3.0 * x for x in vec]


@dataclass
class Recorded:
    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Fault:
    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    #: Only applies to requests whose path ends with this (None: any).
    path_suffix: str | None = None


class Reply(Exception):
    """Raised by a handler to answer with an error."""

    def __init__(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        super().__init__(f"{status}: {body}")
        self.status = status
        self.body = body
        self.headers = headers or {}


class ProviderServer:
    """Base: subclasses implement ``handle(method, path, headers, body) -> (status, body, headers)``."""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self.violations: list[str] = []  # protocol violations the client committed
        self.faults: deque[Fault] = deque()
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _serve(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                parts = urlsplit(self.path)
                record = Recorded(self.command, parts.path, parts.query, {k.lower(): v for k, v in self.headers.items()}, body)
                with server._lock:
                    server.requests.append(record)
                    fault = None
                    for i, candidate in enumerate(server.faults):
                        if candidate.path_suffix is None or parts.path.endswith(candidate.path_suffix):
                            fault = candidate
                            del server.faults[i]
                            break
                if fault is not None:
                    if fault.delay:
                        time.sleep(fault.delay)
                    if fault.status == 0:  # delay only, then answer normally
                        fault = None
                if fault is not None:
                    self._send(fault.status, fault.body, fault.headers)
                    return
                try:
                    status, payload, headers = server.handle(record)
                except Reply as reply:
                    status, payload, headers = reply.status, reply.body, reply.headers
                except Exception as exc:  # a bug in the fake: make it loud
                    server.violations.append(f"server error: {exc!r}")
                    status, payload, headers = 500, {"error": {"message": repr(exc)}}, {}
                self._send(status, payload, headers)

            def _send(self, status: int, payload: Any, headers: dict[str, str]) -> None:
                if isinstance(payload, (bytes, str)):
                    data = payload.encode() if isinstance(payload, str) else payload
                    ctype = headers.pop("content-type", "application/octet-stream")
                else:
                    data = json.dumps(payload).encode()
                    ctype = "application/json"
                try:
                    self.send_response(status)
                    self.send_header("content-type", ctype)
                    self.send_header("content-length", str(len(data)))
                    for key, value in headers.items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

            do_GET = do_POST = do_DELETE = _serve

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> ProviderServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def queue(self, *faults: Fault) -> None:
        with self._lock:
            self.faults.extend(faults)

    def embed_requests(self) -> list[Recorded]:
        return [r for r in self.requests if self.is_embed_request(r)]

    def is_embed_request(self, record: Recorded) -> bool:
        return record.method == "POST"

    def texts_embedded(self) -> int:
        raise NotImplementedError

    def violate(self, message: str, status: int, body: Any) -> Reply:
        self.violations.append(message)
        return Reply(status, body)

    def handle(self, record: Recorded) -> tuple[int, Any, dict[str, str]]:
        raise NotImplementedError


def _require_json(server: ProviderServer, record: Recorded, error: Callable[[str], Any]) -> dict[str, Any]:
    if not record.headers.get("content-type", "").startswith("application/json"):
        raise server.violate("content-type is not application/json", 415, error("content-type must be application/json"))
    try:
        body = json.loads(record.body)
    except ValueError:
        raise server.violate("body is not JSON", 400, error("invalid JSON body")) from None
    if not isinstance(body, dict):
        raise server.violate("body is not an object", 400, error("body must be an object"))
    return body


# -- OpenAI (and OpenAI-compatible) --------------------------------------------------------------

OPENAI_DIMS = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072, "text-embedding-ada-002": 1536}


def openai_error(message: str, type_: str = "invalid_request_error", code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


class OpenAIServer(ProviderServer):
    """``/v1/embeddings`` plus the Batch API (``/v1/files``, ``/v1/batches``)."""

    def __init__(
        self,
        api_key: str | None = "sk-test-openai",
        *,
        prefix: str = "/v1",
        models: dict[str, int] | None = None,
        max_inputs: int = 2048,
        batch_polls_before_done: int = 2,
    ) -> None:
        self.api_key = api_key
        self.prefix = prefix
        self.models = models if models is not None else dict(OPENAI_DIMS)
        self.max_inputs = max_inputs
        self.files: dict[str, tuple[str, bytes]] = {}  # id -> (purpose, content)
        self.batches: dict[str, dict[str, Any]] = {}
        self.batch_polls_before_done = batch_polls_before_done
        self.batch_fail_ids: set[int] = set()  # custom_ids answered with an error line
        self.batch_final_status = "completed"
        self._n = 0
        super().__init__()

    @property
    def base_url(self) -> str:
        return self.origin + self.prefix

    def is_embed_request(self, record: Recorded) -> bool:
        return record.method == "POST" and record.path == f"{self.prefix}/embeddings"

    def texts_embedded(self) -> int:
        return sum(len(r.json()["input"]) for r in self.embed_requests())

    def _next_id(self, kind: str) -> str:
        with self._lock:
            self._n += 1
            return f"{kind}-{self._n:04d}"

    def _auth(self, record: Recorded) -> None:
        if self.api_key is None:
            if "authorization" in record.headers:
                raise self.violate("sent Authorization to a keyless server", 400, openai_error("unexpected credentials"))
            return
        if record.headers.get("authorization") != f"Bearer {self.api_key}":
            raise self.violate(
                f"bad Authorization header {record.headers.get('authorization')!r}",
                401,
                openai_error("Incorrect API key provided.", "invalid_request_error", "invalid_api_key"),
            )

    def embed(self, body: dict[str, Any]) -> dict[str, Any]:
        allowed = {"model", "input", "encoding_format", "dimensions", "user"}
        extra = set(body) - allowed
        if extra:
            raise self.violate(f"unknown body keys {sorted(extra)}", 400, openai_error(f"Unrecognized request arguments: {sorted(extra)}"))
        model = body.get("model")
        if model not in self.models:
            raise self.violate(f"unknown model {model!r}", 404, openai_error(f"The model `{model}` does not exist", code="model_not_found"))
        inputs = body.get("input")
        if isinstance(inputs, str):
            inputs = [inputs]
        if not isinstance(inputs, list) or not inputs or not all(isinstance(t, str) and t for t in inputs):
            raise self.violate("input is not a non-empty list of non-empty strings", 400, openai_error("'input' is invalid"))
        if len(inputs) > self.max_inputs:
            raise self.violate(
                f"{len(inputs)} inputs > {self.max_inputs}", 400, openai_error(f"Too many inputs. The max number of inputs is {self.max_inputs}.")
            )
        if body.get("encoding_format", "float") != "float":
            raise self.violate("asked for base64", 400, openai_error("this fake only serves floats"))
        dims = self.models[model]
        if "dimensions" in body:
            if not isinstance(body["dimensions"], int) or not 1 <= body["dimensions"] <= dims:
                raise self.violate("bad dimensions", 400, openai_error("invalid dimensions"))
            dims = body["dimensions"]
        data = [{"object": "embedding", "index": i, "embedding": hashed_vector(t, dims)} for i, t in enumerate(inputs)]
        tokens = sum(len(t.split()) for t in inputs)
        return {"object": "list", "data": data, "model": model, "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}

    def handle(self, record: Recorded) -> tuple[int, Any, dict[str, str]]:
        self._auth(record)
        p = self.prefix
        if record.method == "POST" and record.path == f"{p}/embeddings":
            return 200, self.embed(_require_json(self, record, openai_error)), {}
        if record.method == "POST" and record.path == f"{p}/files":
            return self._upload(record)
        if record.method == "POST" and record.path == f"{p}/batches":
            return self._create_batch(_require_json(self, record, openai_error))
        m = re.fullmatch(rf"{p}/batches/([\w-]+)", record.path)
        if record.method == "GET" and m:
            return self._poll(m.group(1))
        m = re.fullmatch(rf"{p}/batches/([\w-]+)/cancel", record.path)
        if record.method == "POST" and m:
            batch = self.batches[m.group(1)]
            batch["status"] = "cancelled"
            return 200, batch, {}
        m = re.fullmatch(rf"{p}/files/([\w-]+)/content", record.path)
        if record.method == "GET" and m:
            if m.group(1) not in self.files:
                raise Reply(404, openai_error("No such File object"))
            return 200, self.files[m.group(1)][1], {"content-type": "application/octet-stream"}
        m = re.fullmatch(rf"{p}/files/([\w-]+)", record.path)
        if record.method == "DELETE" and m:
            existed = self.files.pop(m.group(1), None) is not None
            return 200, {"id": m.group(1), "object": "file", "deleted": existed}, {}
        raise self.violate(f"unexpected {record.method} {record.path}", 404, openai_error("Invalid URL"))

    # Batch API --------------------------------------------------------------------------------
    def _upload(self, record: Recorded) -> tuple[int, Any, dict[str, str]]:
        ctype = record.headers.get("content-type", "")
        if not ctype.startswith("multipart/form-data"):
            raise self.violate("upload is not multipart/form-data", 400, openai_error("expected multipart"))
        parts = _parse_multipart(ctype, record.body)
        if parts.get("purpose", (None, b""))[1] != b"batch":
            raise self.violate(f"purpose is {parts.get('purpose')}", 400, openai_error("purpose must be batch"))
        if "file" not in parts:
            raise self.violate("no file part", 400, openai_error("file is required"))
        filename, content = parts["file"]
        for line in content.decode().splitlines():
            item = json.loads(line)
            if set(item) != {"custom_id", "method", "url", "body"} or item["method"] != "POST" or item["url"] != "/v1/embeddings":
                raise self.violate(f"bad batch line {item}", 400, openai_error("invalid batch line"))
        file_id = self._next_id("file")
        self.files[file_id] = ("batch", content)
        return 200, {"id": file_id, "object": "file", "bytes": len(content), "created_at": 1, "filename": filename or "upload",
                     "purpose": "batch", "status": "processed"}, {}

    def _create_batch(self, body: dict[str, Any]) -> tuple[int, Any, dict[str, str]]:
        if body.get("endpoint") != "/v1/embeddings" or body.get("completion_window") != "24h":
            raise self.violate(f"bad batch create {body}", 400, openai_error("invalid batch"))
        if body.get("input_file_id") not in self.files:
            raise self.violate("unknown input file", 400, openai_error("input file not found"))
        batch_id = self._next_id("batch")
        batch = {
            "id": batch_id, "object": "batch", "endpoint": "/v1/embeddings", "errors": None,
            "input_file_id": body["input_file_id"], "completion_window": "24h", "status": "validating",
            "output_file_id": None, "error_file_id": None, "created_at": 1,
            "request_counts": {"total": 0, "completed": 0, "failed": 0}, "metadata": body.get("metadata"),
            "_polls": 0,
        }
        self.batches[batch_id] = batch
        return 200, _public(batch), {}

    def _poll(self, batch_id: str) -> tuple[int, Any, dict[str, str]]:
        batch = self.batches.get(batch_id)
        if batch is None:
            raise Reply(404, openai_error("No such batch"))
        if batch["status"] in ("validating", "in_progress"):
            batch["_polls"] += 1
            if batch["_polls"] < self.batch_polls_before_done:
                batch["status"] = "in_progress"
            elif self.batch_final_status != "completed":
                batch["status"] = self.batch_final_status
                if self.batch_final_status == "failed":
                    batch["errors"] = {"object": "list", "data": [{"code": "invalid_request", "message": "the fake failed this batch"}]}
            else:
                self._complete(batch)
        return 200, _public(batch), {}

    def _complete(self, batch: dict[str, Any]) -> None:
        lines_out, lines_err = [], []
        content = self.files[batch["input_file_id"]][1]
        for line in content.decode().splitlines():
            item = json.loads(line)
            cid = item["custom_id"]
            if int(cid) in self.batch_fail_ids:
                lines_err.append({"id": f"req-{cid}", "custom_id": cid, "response": {"status_code": 400, "request_id": "r",
                                  "body": openai_error("bad input")}, "error": None})
                continue
            body = self.embed(item["body"])
            lines_out.append({"id": f"req-{cid}", "custom_id": cid, "response": {"status_code": 200, "request_id": f"r{cid}", "body": body}, "error": None})
        # The real API writes lines in any order.
        lines_out.reverse()
        out_id = self._next_id("file")
        self.files[out_id] = ("batch_output", ("\n".join(json.dumps(l) for l in lines_out) + "\n").encode())
        batch["output_file_id"] = out_id
        if lines_err:
            err_id = self._next_id("file")
            self.files[err_id] = ("batch_output", ("\n".join(json.dumps(l) for l in lines_err) + "\n").encode())
            batch["error_file_id"] = err_id
        batch["status"] = "completed"
        n = len(lines_out) + len(lines_err)
        batch["request_counts"] = {"total": n, "completed": len(lines_out), "failed": len(lines_err)}


def _public(batch: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in batch.items() if not k.startswith("_")}


def _parse_multipart(content_type: str, body: bytes) -> dict[str, tuple[str | None, bytes]]:
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + body
    )
    parts: dict[str, tuple[str | None, bytes]] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        parts[str(name)] = (part.get_filename(), part.get_payload(decode=True) or b"")
    return parts


# -- Gemini ------------------------------------------------------------------------------------


def google_error(code: int, message: str, status: str, details: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message, "status": status}
    if details:
        error["details"] = details
    return {"error": error}


class GeminiServer(ProviderServer):
    def __init__(self, api_key: str = "gm-test-key", *, max_requests: int = 100) -> None:
        self.api_key = api_key
        self.max_requests = max_requests
        self.models = {"gemini-embedding-001": 3072}
        super().__init__()

    @property
    def base_url(self) -> str:
        return self.origin + "/v1beta"

    def texts_embedded(self) -> int:
        total = 0
        for r in self.embed_requests():
            total += len(r.json()["requests"]) if r.path.endswith(":batchEmbedContents") else 1
        return total

    def _vector(self, request: dict[str, Any], expected_model: str) -> list[float]:
        allowed = {"model", "content", "taskType", "title", "outputDimensionality"}
        if set(request) - allowed:
            raise self.violate(f"unknown keys {set(request) - allowed}", 400, google_error(400, "Invalid JSON payload received. Unknown name", "INVALID_ARGUMENT"))
        if request.get("model") != expected_model:
            raise self.violate(f"request model {request.get('model')!r} != {expected_model}", 400,
                               google_error(400, "model in request does not match the URL", "INVALID_ARGUMENT"))
        task = request.get("taskType")
        if task not in (None, "RETRIEVAL_QUERY", "RETRIEVAL_DOCUMENT", "SEMANTIC_SIMILARITY", "CLASSIFICATION", "CLUSTERING",
                        "QUESTION_ANSWERING", "FACT_VERIFICATION", "CODE_RETRIEVAL_QUERY"):
            raise self.violate(f"bad taskType {task}", 400, google_error(400, "Invalid value at 'task_type'", "INVALID_ARGUMENT"))
        parts = (request.get("content") or {}).get("parts")
        if not isinstance(parts, list) or len(parts) != 1 or not isinstance(parts[0].get("text"), str):
            raise self.violate("bad content", 400, google_error(400, "content.parts must hold text", "INVALID_ARGUMENT"))
        dims = request.get("outputDimensionality", 3072)
        return hashed_vector(parts[0]["text"], dims)

    def handle(self, record: Recorded) -> tuple[int, Any, dict[str, str]]:
        if record.headers.get("x-goog-api-key") != self.api_key:
            raise self.violate("bad or missing x-goog-api-key", 400 if "x-goog-api-key" in record.headers else 403,
                               google_error(400, "API key not valid. Please pass a valid API key.", "INVALID_ARGUMENT"))
        if "key=" in record.query:
            raise self.violate("API key in the URL", 400, google_error(400, "key in URL", "INVALID_ARGUMENT"))
        m = re.fullmatch(r"/v1beta/models/([\w.-]+):(embedContent|batchEmbedContents)", record.path)
        if record.method != "POST" or not m:
            raise self.violate(f"unexpected {record.method} {record.path}", 404, google_error(404, "Not found", "NOT_FOUND"))
        model, method = m.groups()
        if model not in self.models:
            raise Reply(404, google_error(404, f"models/{model} is not found for API version v1beta", "NOT_FOUND"))
        body = _require_json(self, record, lambda msg: google_error(400, msg, "INVALID_ARGUMENT"))
        if method == "embedContent":
            return 200, {"embedding": {"values": self._vector(body, f"models/{model}")}}, {}
        if set(body) != {"requests"} or not isinstance(body["requests"], list) or not body["requests"]:
            raise self.violate("batch body must be {requests: [...]}", 400, google_error(400, "requests required", "INVALID_ARGUMENT"))
        if len(body["requests"]) > self.max_requests:
            raise self.violate(f"{len(body['requests'])} requests > {self.max_requests}", 400,
                               google_error(400, f"at most {self.max_requests} requests can be in one batch", "INVALID_ARGUMENT"))
        return 200, {"embeddings": [{"values": self._vector(r, f"models/{model}")} for r in body["requests"]]}, {}


# -- Voyage ------------------------------------------------------------------------------------


class _V1InputServer(ProviderServer):
    """Servers at ``/v1`` taking ``{"input": [...]}`` with a bearer key (Voyage, Mistral)."""

    def __init__(self, api_key: str, *, max_inputs: int) -> None:
        self.api_key = api_key
        self.max_inputs = max_inputs
        super().__init__()

    @property
    def base_url(self) -> str:
        return self.origin + "/v1"

    def texts_embedded(self) -> int:
        return sum(len(r.json()["input"]) for r in self.embed_requests())


class VoyageServer(_V1InputServer):
    def __init__(self, api_key: str = "pa-test-voyage", *, max_inputs: int = 1000) -> None:
        super().__init__(api_key, max_inputs=max_inputs)

    def handle(self, record: Recorded) -> tuple[int, Any, dict[str, str]]:
        err = lambda msg: {"detail": msg}  # noqa: E731
        if record.method != "POST" or record.path != "/v1/embeddings":
            raise self.violate(f"unexpected {record.method} {record.path}", 404, err("Not Found"))
        if record.headers.get("authorization") != f"Bearer {self.api_key}":
            raise self.violate("bad Authorization", 401, err("Provided API key is invalid."))
        body = _require_json(self, record, err)
        allowed = {"input", "model", "input_type", "truncation", "output_dimension", "output_dtype", "encoding_format"}
        if set(body) - allowed:
            raise self.violate(f"unknown keys {set(body) - allowed}", 400, err("Request body has unknown fields"))
        if body.get("model") not in ("voyage-4-large", "voyage-4", "voyage-3.5"):
            raise self.violate(f"model {body.get('model')!r}", 400, err("Model is not supported"))
        if body.get("input_type") not in (None, "query", "document"):
            raise self.violate(f"input_type {body.get('input_type')!r}", 400, err("input_type must be query, document or null"))
        inputs = body.get("input")
        if not isinstance(inputs, list) or not inputs or len(inputs) > self.max_inputs:
            raise self.violate(f"input length {len(inputs) if isinstance(inputs, list) else inputs}", 400,
                               err(f"The batch size limit is {self.max_inputs}."))
        dims = body.get("output_dimension") or 1024
        data = [{"object": "embedding", "embedding": hashed_vector(t, dims), "index": i} for i, t in enumerate(inputs)]
        return 200, {"object": "list", "data": data, "model": body["model"], "usage": {"total_tokens": sum(len(t.split()) for t in inputs)}}, {}


# -- Mistral -----------------------------------------------------------------------------------


def mistral_error(message: str, type_: str = "invalid_request_error") -> dict[str, Any]:
    return {"object": "error", "message": message, "type": type_, "param": None, "code": None}


class MistralServer(_V1InputServer):
    def __init__(self, api_key: str = "ms-test-key", *, max_inputs: int = 256) -> None:
        super().__init__(api_key, max_inputs=max_inputs)

    def handle(self, record: Recorded) -> tuple[int, Any, dict[str, str]]:
        if record.method != "POST" or record.path != "/v1/embeddings":
            raise self.violate(f"unexpected {record.method} {record.path}", 404, mistral_error("Not Found"))
        if record.headers.get("authorization") != f"Bearer {self.api_key}":
            raise self.violate("bad Authorization", 401, {"message": "Unauthorized", "request_id": "x"})
        body = _require_json(self, record, mistral_error)
        allowed = {"model", "input", "output_dimension", "output_dtype", "encoding_format"}
        if set(body) - allowed:
            raise self.violate(f"unknown keys {set(body) - allowed}", 422, mistral_error("Extra inputs are not permitted"))
        if body.get("model") != "mistral-embed":
            raise self.violate(f"model {body.get('model')!r}", 400, mistral_error("Invalid model"))
        inputs = body.get("input")
        if not isinstance(inputs, list) or not inputs:
            raise self.violate("input", 422, mistral_error("input must be a list"))
        if len(inputs) > self.max_inputs:
            raise self.violate(f"{len(inputs)} inputs > {self.max_inputs}", 400, mistral_error("Too many inputs in request, split into more batches."))
        data = [{"object": "embedding", "embedding": hashed_vector(t, 1024), "index": i} for i, t in enumerate(inputs)]
        tokens = sum(len(t.split()) for t in inputs)
        return 200, {"id": "embd-test", "object": "list", "data": data, "model": "mistral-embed",
                     "usage": {"prompt_tokens": tokens, "total_tokens": tokens, "completion_tokens": 0}}, {}


# -- Ollama ------------------------------------------------------------------------------------


class OllamaServer(ProviderServer):
    def __init__(self, models: dict[str, int] | None = None) -> None:
        self.models = models if models is not None else {"nomic-embed-text": 768, "nomic-embed-text:latest": 768}
        super().__init__()

    @property
    def base_url(self) -> str:
        return self.origin

    def texts_embedded(self) -> int:
        return sum(len(r.json()["input"]) for r in self.embed_requests())

    def handle(self, record: Recorded) -> tuple[int, Any, dict[str, str]]:
        if record.method != "POST" or record.path != "/api/embed":
            raise self.violate(f"unexpected {record.method} {record.path}", 404, "404 page not found")
        body = _require_json(self, record, lambda msg: {"error": msg})
        allowed = {"model", "input", "truncate", "options", "keep_alive", "dimensions"}
        if set(body) - allowed:
            raise self.violate(f"unknown keys {set(body) - allowed}", 400, {"error": "unknown fields"})
        model = body.get("model")
        if model not in self.models:
            raise Reply(404, {"error": f'model "{model}" not found, try pulling it first'})
        inputs = body.get("input")
        if isinstance(inputs, str):
            inputs = [inputs]
        if not isinstance(inputs, list) or not inputs:
            raise self.violate("input", 400, {"error": "input is required"})
        dims = body.get("dimensions") or self.models[model]
        return 200, {"model": model, "embeddings": [hashed_vector(t, dims) for t in inputs],
                     "total_duration": 1000, "load_duration": 10, "prompt_eval_count": len(inputs)}, {}


# -- fake clock --------------------------------------------------------------------------------


class FakeClock:
    """Monotonic time that only moves when someone sleeps; records every sleep."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []
        self._lock = threading.Lock()

    def monotonic(self) -> float:
        with self._lock:
            return self.now

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self.sleeps.append(seconds)
            self.now += max(0.0, seconds)


def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))
