"""The JSON a response carries, shaped as the OpenAI API's, plus SpecChat's own `specchat` field
(which clients ignore), and the stop-string cutter."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

from app.engine.protocol import GenerationStats, SpeculationSettings


@dataclass(frozen=True, slots=True)
class Answer:
    """What a finished request tells its client."""

    text: str
    finish_reason: str  # "stop" or "length"
    stats: GenerationStats | None
    speculation: SpeculationSettings
    plain_tokens_per_second: float | None

    @property
    def speedup(self) -> float | None:
        plain = self.plain_tokens_per_second
        if self.stats is None or not plain or self.stats.tokens_per_second <= 0:
            return None
        return self.stats.tokens_per_second / plain

    def usage(self) -> dict[str, int]:
        prompt = self.stats.prompt_tokens if self.stats else 0
        tokens = self.stats.tokens if self.stats else 0
        return {"prompt_tokens": prompt, "completion_tokens": tokens, "total_tokens": prompt + tokens}

    def specchat(self) -> dict[str, Any]:
        s = self.stats
        speedup = self.speedup
        return {
            "draft_tokens_accepted": s.accepted if s else 0,
            "proposed": s.proposed if s else 0,
            "tokens_per_second": round(s.tokens_per_second, 2) if s else 0.0,
            "speedup_vs_plain": None if speedup is None else round(speedup, 3),
            "speculation": self.speculation.mode.value,
            "k": self.speculation.k if self.speculation.mode.value == "fixed" else None,
            "reused_prompt_tokens": s.reused_tokens if s else 0,
            "prefill_seconds": round(s.prefill_seconds, 4) if s else 0.0,
        }


class Shape:
    """One request's envelope: its id, its time, its model, chat or raw completion."""

    def __init__(self, chat: bool, model: str) -> None:
        self.chat, self.model = chat, model
        self.id = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:24]
        self.created = int(time.time())

    def _envelope(self, obj: str) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": obj,
            "created": self.created,
            "model": self.model,
            "system_fingerprint": None,
        }

    def whole(self, answer: Answer) -> dict[str, Any]:
        if self.chat:
            choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": answer.text}}
        else:
            choice = {"index": 0, "text": answer.text}
        choice.update(finish_reason=answer.finish_reason, logprobs=None)
        obj = "chat.completion" if self.chat else "text_completion"
        return {
            **self._envelope(obj),
            "choices": [choice],
            "usage": answer.usage(),
            "specchat": answer.specchat(),
        }

    def chunk(
        self, text: str | None, finish_reason: str | None = None, *, first: bool = False
    ) -> dict[str, Any]:
        if self.chat:
            delta: dict[str, Any] = {"role": "assistant", "content": ""} if first else {}
            if text:
                delta["content"] = text
            choice: dict[str, Any] = {"index": 0, "delta": delta}
        else:
            choice = {"index": 0, "text": text or ""}
        choice.update(finish_reason=finish_reason, logprobs=None)
        obj = "chat.completion.chunk" if self.chat else "text_completion"
        return {**self._envelope(obj), "choices": [choice]}

    def last_chunk(self, answer: Answer) -> dict[str, Any]:
        """The chunk that ends the answer: its finish reason, usage and SpecChat's figures
        (usage always, not only when `stream_options.include_usage` asks for it)."""
        return {
            **self.chunk(None, answer.finish_reason),
            "usage": answer.usage(),
            "specchat": answer.specchat(),
        }

    def usage_chunk(self, answer: Answer) -> dict[str, Any]:
        """OpenAI's `include_usage` chunk: no choices, only the usage."""
        obj = "chat.completion.chunk" if self.chat else "text_completion"
        return {**self._envelope(obj), "choices": [], "usage": answer.usage(), "specchat": answer.specchat()}


class StopCutter:
    """Cuts the streamed text at the first stop string; holds back the last characters that
    could still begin one, so nothing past a stop string is ever sent."""

    def __init__(self, stops: tuple[str, ...]) -> None:
        self.stops = stops
        self.hold = max((len(s) for s in stops), default=1) - 1
        self.held = ""
        self.stopped = False

    def feed(self, text: str) -> str:
        """The text that can be sent now; sets `stopped` once a stop string appears."""
        if not self.stops:
            return text
        buffer = self.held + text
        hits = [buffer.find(s) for s in self.stops if s in buffer]
        if hits:
            self.held, self.stopped = "", True
            return buffer[: min(hits)]
        split = max(len(buffer) - self.hold, 0)
        self.held = buffer[split:]
        return buffer[:split]

    def flush(self) -> str:
        out, self.held = self.held, ""
        return out
