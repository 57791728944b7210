"""Seconds from a Stop to the worker being idle, with a real model:
`python -m lab.stop_latency --main PATH [--draft PATH]`.

The worker takes a Stop at the decode loop's safe points: between rounds, and between prefill
chunks, which are sized to take well under a second (`decoding/chunking.py`). This asks for an
answer after a long prompt and presses Stop while the prompt is read, then asks again and
presses Stop while the answer is decoded, then submits a new load while an answer is decoded
(which must stop it). Each is timed from the Stop (or the load) to the answer's last message
and to the worker having nothing left to do.
"""

from __future__ import annotations

import argparse
import queue
import statistics
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from app.engine.blas import ensure_blas

if TYPE_CHECKING:
    from app.engine.protocol import WorkerMessage
    from app.engine.worker import EngineWorker


class Timed:
    """A worker and its messages, read from the thread that drives it."""

    def __init__(self, worker: Callable[[Callable[[WorkerMessage], None]], EngineWorker]) -> None:
        self.inbox: queue.Queue[WorkerMessage] = queue.Queue()
        self.worker = worker(self.inbox.put)
        self.worker.start()

    def until(self, request: int, done: Callable[[Any], bool], timeout: float = 600.0) -> Any:
        while True:
            message = self.inbox.get(timeout=timeout)
            if message.request == request and done(message.event):
                return message.event

    def idle_after(self, start: float, timeout: float = 600.0) -> float:
        while not self.worker.idle:
            if time.perf_counter() - start > timeout:
                raise TimeoutError("the worker did not go idle")
            time.sleep(0.002)
        return time.perf_counter() - start


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.stop_latency", description=__doc__)
    parser.add_argument("--main", required=True, help="the main model's folder")
    parser.add_argument("--draft", default=None, help="a draft model's folder (none: plain and lookup)")
    parser.add_argument("--prompt-words", type=int, default=1200, help="length of the long prompt")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    ensure_blas()  # before MLX is imported: only then can MLX's CPU build use it (10 times faster here)
    from app.engine.features.baselines import FILLER
    from app.engine.protocol import (
        EngineError,
        Generate,
        GenerationFinished,
        LoadPair,
        PairLoaded,
        PrefillProgress,
        SpeculationMode,
        SpeculationSettings,
        TokenEvent,
    )
    from app.engine.worker import EngineWorker

    def finished(event: object) -> bool:
        return isinstance(event, GenerationFinished) or (
            isinstance(event, EngineError) and event.kind != "notice"
        )

    timed = Timed(EngineWorker)
    try:
        start = time.perf_counter()
        load = timed.worker.submit(LoadPair(args.main, args.draft))
        loaded = timed.until(load, lambda e: isinstance(e, (PairLoaded, EngineError)))
        if not isinstance(loaded, PairLoaded):
            raise SystemExit(f"could not load: {loaded}")
        print(f"loaded in {time.perf_counter() - start:.1f} s")
        words = FILLER.split()
        long_text = " ".join((words * (args.prompt_words // len(words) + 1))[: args.prompt_words])
        speculation = SpeculationSettings(SpeculationMode.ADAPTIVE if args.draft else SpeculationMode.LOOKUP)
        rows: dict[str, list[tuple[float, float]]] = {"prompt": [], "answer": [], "load": []}
        for turn in range(args.repeat):
            # a different opening each time, so no turn reuses the last one's cache
            long_ask = Generate(
                ({"role": "user", "content": f"Note {turn}. Summarize: {long_text}"},),
                speculation=speculation,
                max_tokens=400,
            )
            request = timed.worker.submit(long_ask)
            timed.until(request, lambda e: isinstance(e, PrefillProgress) and e.done > 0)
            time.sleep(0.2)  # a Stop lands anywhere in a chunk
            stop = time.perf_counter()
            timed.worker.cancel(request)
            timed.until(request, finished)
            rows["prompt"].append((time.perf_counter() - stop, timed.idle_after(stop)))

            ask = Generate(
                ({"role": "user", "content": f"Story {turn}: write a long story about a lighthouse."},),
                speculation=speculation,
                max_tokens=2000,
            )
            for row in ("answer", "load"):
                request = timed.worker.submit(ask)
                seen = 0
                while seen < 12:
                    seen += isinstance(timed.until(request, lambda _e: True), TokenEvent)
                stop = time.perf_counter()
                if row == "answer":
                    timed.worker.cancel(request)
                else:
                    reload = timed.worker.submit(LoadPair(args.main, args.draft))
                timed.until(request, finished)
                ended = time.perf_counter() - stop
                if row == "load":  # idle once the new load is done: timed to its start instead
                    timed.until(reload, lambda e: isinstance(e, (PairLoaded, EngineError)))
                    rows[row].append((ended, ended))
                else:
                    rows[row].append((ended, timed.idle_after(stop)))
        names = {
            "prompt": "Stop while reading the prompt",
            "answer": "Stop while answering",
            "load": "a new load while answering",
        }
        print(f"{'':<32}{'to the last message (s)':>26}{'to idle (s)':>14}")
        for key, values in rows.items():
            last = [v[0] for v in values]
            idle = [v[1] for v in values]
            print(
                f"{names[key]:<32}{f'median {statistics.median(last):.2f}, max {max(last):.2f}':>26}"
                f"{f'max {max(idle):.2f}':>14}"
            )
    finally:
        timed.worker.shutdown(timeout=60)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
