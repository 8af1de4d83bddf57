"""The OpenAI-compatible back end against a tiny fake HTTP server on 127.0.0.1.

The fake answers /v1/completions like vLLM: with ``echo`` it returns the prompt tokens, their
``text_offset`` and ``token_logprobs`` (None for the first token). Other modes: a server that
refuses ``max_tokens: 0``, one that returns no logprobs, HTTP 500 and malformed JSON.
"""

from __future__ import annotations

import http.server
import json
import re
import socket
import threading

import numpy as np
import pytest

from saycan_ros.llm import make_backend
from saycan_ros.llm.openai_backend import OpenAIBackend, ServerError

_TOKEN_RE = re.compile(r" ?[A-Za-z0-9]+|\n|[^\sA-Za-z0-9]| ")


def fake_tokens(text: str) -> list[tuple[str, int]]:
    """(token, offset) pairs: words carry their leading space, as in BPE tokenizers."""
    return [(m.group(), m.start()) for m in _TOKEN_RE.finditer(text)]


def fake_logprob(token: str, prev: str) -> float:
    """A deterministic stand-in for a model: depends on the token and its predecessor."""
    return -0.25 * len(token) - 0.01 * (sum(map(ord, prev)) % 7) - 0.1


def expected_score(context: str, option: str) -> float:
    toks = fake_tokens(context + option)
    start, end = len(context), len(context) + len(option)
    return sum(fake_logprob(t, toks[i - 1][0]) for i, (t, off) in enumerate(toks)
               if start <= off < end)


class _Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest output clean
        pass

    def _send(self, code: int, body: bytes):
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        srv = self.server
        payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        srv.requests.append({"path": self.path, "payload": payload,
                             "auth": self.headers.get("Authorization")})
        if self.path != "/v1/completions":
            return self._send(404, b'{"error": "not found"}')
        mode = srv.mode
        if mode == "redirect":            # to another origin, as a hijacked proxy might
            self.send_response(307)
            self.send_header("Location", srv.redirect_to)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        if mode == "echo-headers":        # an error page that shows the request's headers
            body = {"error": {"message": "bad key", "headers": dict(self.headers)}}
            return self._send(401, json.dumps(body).encode())
        if mode == "200-echo-headers":
            return self._send(200, json.dumps({"error": dict(self.headers)}).encode())
        if mode == "500":
            return self._send(500, b'{"error": {"message": "internal boom"}}')
        if mode == "badjson":
            return self._send(200, b"{not json")
        if mode.startswith("needs1") and payload.get("max_tokens") == 0:
            return self._send(400, json.dumps({"object": "error", "message":
                              "max_tokens must be at least 1, got 0."}).encode())
        prompts = payload["prompt"]
        prompts = prompts if isinstance(prompts, list) else [prompts]
        choices = []
        idx = 0
        for prompt in prompts:
            for _ in range(payload.get("n", 1)):
                choices.append(self._choice(prompt, payload, idx, mode))
                idx += 1
        choices.reverse()   # servers may return choices out of order; the index decides
        body = {"id": "cmpl-1", "object": "text_completion", "model": payload["model"],
                "choices": choices,
                "usage": {"prompt_tokens": sum(len(fake_tokens(p)) for p in prompts),
                          "completion_tokens": 3 * len(choices)}}
        self._send(200, json.dumps(body).encode())

    def _choice(self, prompt, payload, idx, mode):
        if payload.get("echo"):
            toks = fake_tokens(prompt)
            text = prompt
            lps = [None] + [fake_logprob(t, toks[i - 1][0]) for i, (t, _) in enumerate(toks)][1:]
            if mode.endswith("bos"):     # a server that echoes a special BOS token with its text
                toks = [("<|begin_of_text|>", 0)] + [(t, o + 17) for t, o in toks]
                lps = [None] + lps
            if payload.get("max_tokens", 16) > 0:       # one generated token after the prompt
                toks.append((" X", toks[-1][1] + len(toks[-1][0])))
                lps.append(-0.5)
                text += " X"
            logprobs = {"tokens": [t for t, _ in toks], "text_offset": [o for _, o in toks],
                        "token_logprobs": lps,
                        "top_logprobs": [None] + [{t: lp} for (t, _), lp in zip(toks[1:], lps[1:])]}
        else:
            text = f" find a sponge{idx}\n2. pick up"   # the server does not apply stops here
            gen = fake_tokens(text)
            logprobs = {"tokens": [t for t, _ in gen], "text_offset": [o for _, o in gen],
                        "token_logprobs": [-0.5] * len(gen), "top_logprobs": None}
        if mode == "nologprobs":
            logprobs = None
        elif mode == "nooffsets":
            logprobs = {"tokens": logprobs["tokens"], "token_logprobs": logprobs["token_logprobs"]}
        return {"index": idx, "text": text, "logprobs": logprobs, "finish_reason": "length"}


@pytest.fixture()
def server():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    srv.mode = "vllm"
    srv.requests = []
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    srv.base_url = f"http://127.0.0.1:{srv.server_address[1]}/v1"
    yield srv
    srv.shutdown()
    srv.server_close()


def _backend(server, **kw):
    return make_backend({"type": "openai", "base_url": server.base_url, "model": "fake-llm",
                         "timeout_s": 5, **kw})


PREFIX = "Human: Bring me a coke.\nRobot: I would:\n1. find a coke can\n2. done\n\n"
QUERY = "Human: I spilled my drink.\nRobot: I would:\n1."
OPTIONS = [" find a sponge\n", " done\n", " pick up the 7up can\n"]


def test_scores_sum_option_tokens_in_one_batched_request(server, monkeypatch):
    monkeypatch.setenv("FAKE_KEY", "sk-test")
    b = _backend(server, api_key_env="FAKE_KEY")
    scores = b.option_logprobs(PREFIX, QUERY, OPTIONS)
    assert scores.dtype == np.float64 and scores.shape == (3,)
    np.testing.assert_allclose(scores, [expected_score(PREFIX + QUERY, o) for o in OPTIONS])
    assert len(server.requests) == 1
    req = server.requests[0]
    p = req["payload"]
    assert p["prompt"] == [PREFIX + QUERY + o for o in OPTIONS]
    assert p["echo"] is True and p["max_tokens"] == 0 and p["logprobs"] in (0, 1)
    assert req["auth"] == "Bearer sk-test"
    assert b.stats.forward_passes == 1 and b.stats.calls == 1
    assert b.stats.scored_tokens == sum(len(fake_tokens(o)) for o in OPTIONS)


@pytest.mark.parametrize("mode", ["bos", "needs1+bos"])
def test_offsets_counting_a_bos_token_are_realigned(server, mode):
    server.mode = mode
    scores = _backend(server).option_logprobs(PREFIX, QUERY, OPTIONS)
    np.testing.assert_allclose(scores, [expected_score(PREFIX + QUERY, o) for o in OPTIONS])


def test_no_key_no_auth_header(server, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    _backend(server).option_logprobs(PREFIX, QUERY, OPTIONS[:1])
    assert server.requests[0]["auth"] is None


def test_server_refusing_max_tokens_zero_is_retried_with_one(server):
    server.mode = "needs1"
    b = _backend(server)
    scores = b.option_logprobs(PREFIX, QUERY, OPTIONS)
    # the extra generated token after the option is not counted
    np.testing.assert_allclose(scores, [expected_score(PREFIX + QUERY, o) for o in OPTIONS])
    assert [r["payload"]["max_tokens"] for r in server.requests] == [0, 1]
    b.option_logprobs(PREFIX, QUERY, OPTIONS)                 # remembered: no second refusal
    assert [r["payload"]["max_tokens"] for r in server.requests] == [0, 1, 1]


@pytest.mark.parametrize("mode,match", [
    ("nologprobs", r"no logprobs.*echo=true"),
    ("nooffsets", r"without \['text_offset'\]"),
])
def test_missing_prompt_logprobs_is_a_clear_error(server, mode, match):
    server.mode = mode
    with pytest.raises(ServerError, match=match) as exc:
        _backend(server).option_logprobs(PREFIX, QUERY, OPTIONS)
    assert server.base_url in str(exc.value) and "fake-llm" in str(exc.value)


def test_http_500_and_malformed_json_are_clear_errors(server):
    server.mode = "500"
    with pytest.raises(ServerError, match=r"HTTP 500") as error:
        _backend(server).option_logprobs(PREFIX, QUERY, OPTIONS)
    assert "internal boom" not in str(error.value)      # server bodies stay out of messages
    server.mode = "badjson"
    with pytest.raises(ServerError, match="malformed JSON"):
        _backend(server).option_logprobs(PREFIX, QUERY, OPTIONS)
    with pytest.raises(ServerError, match="malformed JSON"):
        _backend(server).generate(PREFIX, QUERY)


def test_unreachable_server():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    b = OpenAIBackend(f"http://127.0.0.1:{port}/v1", "m", timeout_s=2)
    with pytest.raises(ServerError, match="cannot reach"):
        b.option_logprobs(PREFIX, QUERY, OPTIONS)


def test_generate_cuts_at_stop_and_reports_logprobs(server):
    b = _backend(server)
    gens = b.generate(PREFIX, QUERY, max_new_tokens=12, num_samples=2, temperature=0.7, seed=3)
    assert [g.text for g in gens] == [" find a sponge0", " find a sponge1"]
    assert all(g.mean_logprob == pytest.approx(-0.5) and g.num_tokens > 0 for g in gens)
    p = server.requests[0]["payload"]
    assert p["prompt"] == PREFIX + QUERY and p["n"] == 2 and p["stop"] == ["\n"]
    assert p["max_tokens"] == 12 and p["seed"] == 3 and "echo" not in p
    assert b.stats.generated_tokens == 6


def test_config_validation():
    with pytest.raises(ValueError, match="secrets"):
        make_backend({"type": "openai", "base_url": "http://x/v1", "model": "m", "api_key": "k"})
    with pytest.raises(ValueError, match="base_url and model"):
        make_backend({"type": "openai", "model": "m"})
    with pytest.raises(ValueError, match="unknown option"):
        make_backend({"type": "openai", "base_url": "http://x/v1", "model": "m", "tmeout": 3})
    b = OpenAIBackend("http://x/v1", "m")
    with pytest.raises(ValueError):
        b.option_logprobs(PREFIX, QUERY, [])
    with pytest.raises(ValueError):
        b.option_logprobs(PREFIX, QUERY, ["ok", ""])


def test_the_api_key_never_shows_in_errors_reprs_or_logs(server, monkeypatch, caplog):
    """The key comes from the environment only; every failure mode is checked for it."""
    import logging
    secret = "sk-secret-4711-do-not-print"
    monkeypatch.setenv("FAKE_KEY", secret)
    caplog.set_level(logging.DEBUG)
    texts = []
    for mode in ("500", "badjson", "nologprobs"):
        server.mode = mode
        backend = _backend(server, api_key_env="FAKE_KEY")
        texts += [repr(backend), str(vars(backend).get("base_url", ""))]
        with pytest.raises(Exception) as error:
            backend.option_logprobs(PREFIX, QUERY, OPTIONS)
        texts += [str(error.value), repr(error.value)]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ServerError) as error:
        _backend(type("S", (), {"base_url": f"http://127.0.0.1:{port}/v1"}),
                 api_key_env="FAKE_KEY").option_logprobs(PREFIX, QUERY, OPTIONS)
    texts += [str(error.value), caplog.text]
    assert server.requests, "the fake server saw no request: nothing was checked"
    assert all(secret not in t for t in texts)
    with pytest.raises(Exception) as error:     # a key passed in a config is refused, not echoed
        make_backend({"type": "openai", "base_url": "http://x/v1", "model": "m",
                      "api_key": secret})
    assert secret not in str(error.value)


def _other_server():
    """A second origin that records what reaches it."""
    other = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    other.mode, other.requests = "vllm", []
    threading.Thread(target=other.serve_forever, daemon=True).start()
    return other


def test_a_redirect_is_not_followed_and_the_key_goes_nowhere_else(server, monkeypatch):
    secret = "sk-redirect-4711"
    monkeypatch.setenv("FAKE_KEY", secret)
    other = _other_server()
    try:
        server.mode = "redirect"
        server.redirect_to = f"http://localhost:{other.server_address[1]}/v1/completions"
        with pytest.raises(ServerError, match="HTTP 307.*redirect: not followed") as error:
            _backend(server, api_key_env="FAKE_KEY").option_logprobs(PREFIX, QUERY, OPTIONS)
        assert server.requests[0]["auth"] == f"Bearer {secret}"     # the server was asked once
        assert other.requests == []                                  # nothing followed it
        assert secret not in str(error.value)
    finally:
        other.shutdown()
        other.server_close()


@pytest.mark.parametrize("mode", ["echo-headers", "200-echo-headers"])
def test_an_error_body_that_echoes_the_headers_does_not_leak_the_key(
        server, monkeypatch, mode):
    secret = "sk-echo-4711"
    monkeypatch.setenv("FAKE_KEY", secret)
    server.mode = mode
    with pytest.raises(ServerError) as error:
        _backend(server, api_key_env="FAKE_KEY").option_logprobs(PREFIX, QUERY, OPTIONS)
    assert server.requests[0]["auth"] == f"Bearer {secret}"         # the key was in the echo
    assert secret not in str(error.value) and secret not in repr(error.value)


def test_the_key_is_sent_only_over_https_or_loopback(monkeypatch):
    monkeypatch.setenv("FAKE_KEY", "sk-clear-4711")
    backend = OpenAIBackend("http://192.0.2.10:8000/v1", "m", api_key_env="FAKE_KEY",
                            timeout_s=0.5)
    with pytest.raises(ServerError, match="refusing to send the API key .* in clear") as error:
        backend.option_logprobs(PREFIX, QUERY, OPTIONS)
    assert "sk-clear-4711" not in str(error.value)
    assert backend.stats.forward_passes == 0       # refused before anything was sent
    from saycan_ros.llm.openai_backend import is_loopback
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("192.0.2.10") and not is_loopback("example.com")


def test_credentials_in_the_base_url_are_refused_and_never_echoed():
    with pytest.raises(ValueError) as error:
        OpenAIBackend("http://user:hunter2@127.0.0.1:9/v1", "m")
    assert "hunter2" not in str(error.value) and "user:" not in str(error.value)
    assert "http://127.0.0.1:9/v1" in str(error.value)
    from saycan_ros.llm.openai_backend import redact_url
    assert redact_url("https://u:p@h.example:8443/v1") == "https://h.example:8443/v1"
    assert redact_url("http://[::1]:8000/v1") == "http://[::1]:8000/v1"
