"""A language model behind an OpenAI-compatible HTTP server (vLLM, llama.cpp server, ...).

Scoring uses the legacy ``/v1/completions`` endpoint with ``echo: true`` and ``logprobs``: the
server returns the log-probability of every prompt token, and the option's score is the sum over
the tokens whose ``text_offset`` falls inside the option part of ``prefix + query + option``. All
options go in ONE request (a list of prompts). ``max_tokens: 0`` is sent first; a server that
rejects it (some need at least 1) is retried once with ``max_tokens: 1`` and remembered (the one
generated token lies after the option and is ignored).

Only the standard library is used (urllib). The API key is read from the environment variable
named by ``api_key_env`` (default ``OPENAI_API_KEY``) and never from the config; without it no
Authorization header is sent (fine for a local vLLM). The key is sent only over https or to a
loopback address, never along a redirect (redirects are not followed), and no message this
module raises holds the key, the URL's credentials or the server's error body (which may echo
the request's headers).
"""

from __future__ import annotations

import json
import math
import os
import ipaddress
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Mapping, Sequence

import numpy as np

from saycan_ros.llm.backend import (
    Generation,
    LanguageBackend,
    check_config_keys,
    cut_at_stop,
    validate_generate_args,
    validate_options,
)


class ServerError(RuntimeError):
    """The server failed, answered malformed data, or lacks a needed feature."""


def _scrub(text: str, key: str | None) -> str:
    """``text`` without the key, whatever a library put into it."""
    return text.replace(key, "<redacted>") if key else text


def redact_url(url: str) -> str:
    """``url`` without its ``user:password@`` part (what messages and logs may show)."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return "<unparsable url>"
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


def is_loopback(host: str | None) -> bool:
    if not host:
        return False
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect becomes an HTTPError: the request (and its key) goes nowhere else."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


class OpenAIBackend(LanguageBackend):
    """Scores and generates through an OpenAI-compatible ``/v1/completions`` endpoint."""

    CONFIG_KEYS = ("base_url", "model", "api_key_env", "timeout_s", "name", "scoring_max_tokens")
    _SECRET_KEYS = ("api_key", "key", "token", "api_token", "authorization")

    def __init__(self, base_url: str, model: str, *, api_key_env: str = "OPENAI_API_KEY",
                 timeout_s: float = 60.0, name: str | None = None,
                 scoring_max_tokens: int | None = None) -> None:
        super().__init__(name or model)
        if not base_url:
            raise ValueError("openai back end: base_url is required (e.g. http://localhost:8000/v1)")
        if not model:
            raise ValueError("openai back end: model is required")
        self.base_url = base_url.rstrip("/")
        parts = urllib.parse.urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"openai back end: base_url must be http(s)://host[:port]/..., got "
                             f"{redact_url(self.base_url)!r}")
        if parts.username is not None or parts.password is not None:
            raise ValueError(f"openai back end: base_url {redact_url(self.base_url)!r} carries "
                             "credentials; put the key in the environment variable named by "
                             "api_key_env instead")
        self._secure = parts.scheme == "https" or is_loopback(parts.hostname)
        self.model = model
        self.api_key_env = api_key_env
        self.timeout_s = float(timeout_s)
        # None: try 0, fall back to 1 if the server refuses 0
        self._scoring_max_tokens = scoring_max_tokens

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> "OpenAIBackend":
        secrets = [k for k in config if str(k).lower() in cls._SECRET_KEYS]
        if secrets:
            raise ValueError(
                f"openai back end: do not put secrets in the config ({secrets}); set the "
                f"environment variable named by api_key_env (default OPENAI_API_KEY) instead")
        cfg = check_config_keys(config, cls.CONFIG_KEYS, "openai")
        if "base_url" not in cfg or "model" not in cfg:
            raise ValueError("openai back end: config needs base_url and model")
        return cls(**cfg)

    # ------------------------------------------------------------------ HTTP
    @property
    def _url(self) -> str:
        return f"{self.base_url}/completions"

    def _post(self, payload: dict) -> dict:
        data = json.dumps(payload).encode()
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        if key:
            if not self._secure:
                raise ServerError(f"refusing to send the API key (${self.api_key_env}) in clear "
                                  f"to {self._url}: use https, or a loopback address")
            headers["Authorization"] = f"Bearer {key}"
        req = urllib.request.Request(self._url, data=data, headers=headers, method="POST")
        self.stats.forward_passes += 1
        try:
            with _OPENER.open(req, timeout=self.timeout_s) as resp:
                body = resp.read()
        except urllib.error.HTTPError as exc:
            # The body stays out of the message (a server may echo the request's headers);
            # only the max_tokens retry looks into it.
            detail = exc.read()[:500].decode(errors="replace")
            moved = " (a redirect: not followed)" if 300 <= exc.code < 400 else ""
            err = ServerError(f"{self._url} (model {self.model!r}) answered HTTP {exc.code} "
                              f"{_scrub(str(exc.reason), key)}{moved}")
            err.status = exc.code  # type: ignore[attr-defined]
            err.detail = detail    # type: ignore[attr-defined]
            raise err from None
        except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ServerError(f"cannot reach {self._url}: {_scrub(str(reason), key)}") from None
        try:
            out = json.loads(body)
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise ServerError(f"{self._url} returned malformed JSON ({len(body)} bytes)") from None
        if not isinstance(out, dict):
            raise ServerError(f"{self._url} returned JSON of type {type(out).__name__}, "
                              "expected an object")
        if "error" in out and "choices" not in out:
            raise ServerError(f"{self._url} returned an error (its body is not shown: see the "
                              "server's log)")
        return out

    def _choices(self, out: dict, n_expected: int) -> list[dict]:
        choices = out.get("choices")
        if not isinstance(choices, list) or len(choices) != n_expected:
            got = len(choices) if isinstance(choices, list) else type(choices).__name__
            raise ServerError(f"{self._url} returned {got} choices, expected {n_expected}")
        if all(isinstance(c, dict) and isinstance(c.get("index"), int) for c in choices):
            choices = sorted(choices, key=lambda c: c["index"])
        return choices

    # ------------------------------------------------------------------ scoring
    def option_logprobs(self, prefix: str, query: str, options: Sequence[str]) -> np.ndarray:
        opts = validate_options(options)
        context = prefix + query
        if not context:
            raise ValueError("prefix and query are both empty: the first option token has "
                             "no context to be scored from")
        start = len(context)
        with self._timed():
            prompts = [context + o for o in opts]
            out = self._score_request(prompts)
            choices = self._choices(out, len(prompts))
            scores = np.empty(len(opts), dtype=np.float64)
            for i, (choice, opt) in enumerate(zip(choices, opts)):
                scores[i], n_tok = self._sum_option(choice, len(prompts[i]), start,
                                                    start + len(opt), i)
                self.stats.scored_tokens += n_tok
            usage = out.get("usage") or {}
            self.stats.prompt_tokens += int(usage.get("prompt_tokens") or 0)
        return scores

    def _score_request(self, prompts: list[str]) -> dict:
        payload = {"model": self.model, "prompt": prompts, "echo": True, "logprobs": 1,
                   "temperature": 0.0}
        if self._scoring_max_tokens is not None:
            return self._post({**payload, "max_tokens": self._scoring_max_tokens})
        try:
            out = self._post({**payload, "max_tokens": 0})
        except ServerError as exc:
            status = getattr(exc, "status", None)
            if status in (400, 422) and "max_tokens" in str(getattr(exc, "detail", "")).lower():
                out = self._post({**payload, "max_tokens": 1})
                self._scoring_max_tokens = 1
                return out
            raise
        self._scoring_max_tokens = 0
        return out

    def _sum_option(self, choice: dict, prompt_len: int, start: int, end: int,
                    i: int) -> tuple[float, int]:
        """Sum the logprobs of the echoed tokens that start inside ``[start, end)`` of the prompt.

        Some servers count special tokens (a BOS such as ``<|begin_of_text|>``) in
        ``text_offset``; the offsets are therefore aligned on the END of the echoed prompt,
        which is where the option ends.
        """
        lp = choice.get("logprobs")
        where = f"{self._url} (model {self.model!r})"
        if not isinstance(lp, dict):
            raise ServerError(
                f"{where} returned no logprobs for prompt {i} (choice['logprobs'] is "
                f"{lp!r}): the server must support echo=true with logprobs on /v1/completions "
                "to score options")
        offsets, token_lps = lp.get("text_offset"), lp.get("token_logprobs")
        missing = [k for k, v in (("text_offset", offsets), ("token_logprobs", token_lps))
                   if not isinstance(v, list)]
        if missing:
            raise ServerError(f"{where} returned logprobs without {missing} for prompt {i}: "
                              "prompt (echo) log-probabilities are required to score options")
        if len(offsets) != len(token_lps) or not offsets:
            raise ServerError(f"{where}: text_offset and token_logprobs are empty or differ in "
                              f"length for prompt {i}")
        tokens = lp.get("tokens")
        if self._scoring_max_tokens:                  # the last token was generated
            prompt_end = offsets[-1]
        elif isinstance(tokens, list) and len(tokens) == len(offsets) and isinstance(
                tokens[-1], str):
            prompt_end = offsets[-1] + len(tokens[-1])
        else:
            prompt_end = prompt_len
        shift = prompt_end - prompt_len
        if not 0 <= shift <= 64:
            raise ServerError(f"{where}: echoed text offsets of prompt {i} do not match the "
                              f"prompt (it ends at {prompt_end}, the prompt has {prompt_len} "
                              "characters)")
        total, n = 0.0, 0
        for off, tlp in zip(offsets, token_lps):
            if start + shift <= off < end + shift:
                if tlp is None:
                    raise ServerError(f"{where} returned no log-probability for an option token "
                                      f"of prompt {i} (token_logprobs has null)")
                total += float(tlp)
                n += 1
        if n == 0:
            raise ServerError(
                f"{where}: no prompt token starts inside option {i} (characters {start}-{end}); "
                "the echoed prompt log-probabilities are missing or misaligned")
        if not math.isfinite(total):
            raise ServerError(f"{where} returned a non-finite log-probability for option {i}")
        return total, n

    # ------------------------------------------------------------------ generation
    def generate(self, prefix: str, query: str, *, max_new_tokens: int = 24,
                 stop: Sequence[str] = ("\n",), num_samples: int = 1, temperature: float = 0.0,
                 seed: int | None = None) -> list[Generation]:
        validate_generate_args(max_new_tokens, num_samples, temperature)
        stop = [s for s in stop if s]
        payload: dict[str, Any] = {"model": self.model, "prompt": prefix + query,
                                   "max_tokens": int(max_new_tokens),
                                   "temperature": float(temperature), "n": int(num_samples),
                                   "logprobs": 1}
        if stop:
            payload["stop"] = stop[:4]     # the OpenAI API accepts at most 4
        if seed is not None:
            payload["seed"] = int(seed)
        with self._timed():
            out = self._post(payload)
            results = []
            for choice in self._choices(out, num_samples):
                text = choice.get("text")
                if not isinstance(text, str):
                    raise ServerError(f"{self._url} returned a choice without text")
                text, _ = cut_at_stop(text, stop)
                lp = choice.get("logprobs")
                toks = lp.get("token_logprobs") if isinstance(lp, dict) else None
                vals = [float(x) for x in toks or [] if x is not None]
                n_tok = len(toks) if toks is not None else 0
                mean = float(np.mean(vals)) if vals else float("nan")
                results.append(Generation(text, mean, n_tok))
            usage = out.get("usage") or {}
            gen = usage.get("completion_tokens")
            self.stats.generated_tokens += int(gen) if gen is not None else sum(
                r.num_tokens for r in results)
            self.stats.prompt_tokens += int(usage.get("prompt_tokens") or 0)
        return results
