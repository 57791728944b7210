"""Benchmark (not a test): an answer through the local API against `python -m app generate`.

    python -m app.devtools.api_vs_cli --main DIR [--draft DIR] [--k 4] [--max-tokens 48] [--repeats 3]

One `python -m app serve` process is started over the pair and kept; each repeat then asks the
same question through the official `openai` client (streamed) and through `generate` (a process of
its own, as a user runs it), alternating, at temperature 0 with the same speculation (a fixed
draft length with a draft, plain without). Each repeat gets its own system line, so neither side
finds the prompt in a cache. It prints, side by side, the decode speed each side reports, the
time to the first token (the API's from the moment the request is sent, so it includes HTTP and
the queue; `generate`'s from the end of its load) and the ratios. Target: the API within 5 % of
`generate`'s decode speed on a real model.
"""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any

from app.devtools.window_vs_cli import Run, cli_answer, comparison_parser

TOLERANCE = 0.05


@dataclass(frozen=True, slots=True)
class ApiRun:
    first_token_s: float
    tokens_per_s: float  # the engine's decode speed, from the answer's `specchat` field
    tokens: int
    client_tokens_per_s: float  # tokens over the time between the first and the last chunk received


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """`python -m app serve` over the pair, in a throwaway data folder, until closed."""

    def __init__(self, main: str, draft: str | None, k: int) -> None:
        self.port = free_port()
        # --no-library: the scan of the user's models for /v1/models would share the CPU with the
        # first answers; it is a one-time cost of starting, not of serving
        command = [
            sys.executable,
            "-m",
            "app",
            "serve",
            "--main",
            main,
            "--port",
            str(self.port),
            "--no-library",
        ]
        command += ["--draft", draft, "--speculation", "fixed", "--k", str(k)] if draft else []
        command += [] if draft else ["--speculation", "off"]
        env = dict(os.environ, SPECCHAT_HOME=tempfile.mkdtemp(prefix="specchat-api-bench-"))
        self.process = subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        assert self.process.stdout is not None
        for line in self.process.stdout:  # the load's progress, then the address
            if "serving" in line:
                break
        else:
            raise SystemExit(f"serve stopped before serving (status {self.process.wait()})")
        from openai import OpenAI

        self.client = OpenAI(base_url=f"http://127.0.0.1:{self.port}/v1", api_key="unused", timeout=1800)
        self.model = self.client.models.list().data[0].id  # the loaded main comes first

    def answer(self, system: str, prompt: str, max_tokens: int) -> ApiRun:
        sent = time.perf_counter()
        stream = self.client.chat.completions.create(
            model=self.model,
            messages=[{"role": "system", "content": system}, {"role": "user", "content": prompt}],
            max_tokens=max_tokens,
            temperature=0,
            stream=True,
        )
        first: float | None = None
        last = sent
        figures: dict[str, Any] = {}
        tokens = 0
        for chunk in stream:
            if chunk.usage is not None:
                tokens = chunk.usage.completion_tokens
            if chunk.choices and chunk.choices[0].delta.content:
                last = time.perf_counter()
                first = first if first is not None else last
            extra = (chunk.model_extra or {}).get("specchat")
            if isinstance(extra, dict):
                figures = extra
        if first is None or not figures:
            raise SystemExit("the server streamed no token or no speculation figures")
        span = last - first
        return ApiRun(
            first - sent, float(figures["tokens_per_second"]), tokens, (tokens - 1) / span if span else 0.0
        )

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()


def main(argv: list[str] | None = None) -> int:
    args = comparison_parser(__doc__).parse_args(argv)
    server = Server(args.main, args.draft, args.k)
    cli: list[Run] = []
    api: list[ApiRun] = []
    try:
        for n in range(args.repeats):
            system = f"You are a helpful assistant. This is question {n + 1}."
            api.append(server.answer(system, args.prompt, args.max_tokens))
            cli.append(cli_answer(args.main, args.draft, args.k, args.max_tokens, args.prompt, system=system))
            print(
                f"run {n + 1}: generate {cli[-1].tokens_per_s:.2f} tok/s, first token {cli[-1].first_token_s:.2f} s"
                f" | API {api[-1].tokens_per_s:.2f} tok/s (client sees {api[-1].client_tokens_per_s:.2f}),"
                f" first token {api[-1].first_token_s:.2f} s"
            )
    finally:
        server.close()
    speed_cli = statistics.median(r.tokens_per_s for r in cli)
    speed_api = statistics.median(r.tokens_per_s for r in api)
    first_cli = statistics.median(r.first_token_s for r in cli)
    first_api = statistics.median(r.first_token_s for r in api)
    ratio = speed_api / speed_cli if speed_cli else 0.0
    print(f"{'':24}{'generate':>12}{'API':>12}{'API/generate':>14}")
    print(f"{'decode tok/s (median)':24}{speed_cli:12.2f}{speed_api:12.2f}{ratio:14.2f}")
    print(f"{'first token s (median)':24}{first_cli:12.2f}{first_api:12.2f}{first_api / first_cli:14.2f}")
    verdict = abs(ratio - 1) <= TOLERANCE
    print(
        f"{'met' if verdict else 'MISSED'}: API decode speed within {TOLERANCE:.0%} of generate's ({ratio:.2f}x)"
    )
    return 0 if verdict else 1


if __name__ == "__main__":
    raise SystemExit(main())
