"""Speed model of a main model sharded across 2-4 Macs (tensor parallel), with and without a draft.

Pure arithmetic, no MLX: it says before anyone buys cables whether sharding a 70B main over
several Macs is faster than one Mac, and whether speculation pays more there. The sharding is the
one mlx-lm's `model.shard(group)` does for llama/qwen2: q/k/v and gate/up projections split by
output rows, o_proj and down_proj by input columns, each of those two ending in one all_sum of the
hidden state, so a pass makes 2 x layers all-reduces of hidden x tokens elements. Embedding and
lm_head stay whole on every rank. Decode reads every weight once per pass, so compute is memory
bandwidth bound; a verify pass over k+1 tokens reads the same weights and costs a little more.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass

GB = 1e9


@dataclass(frozen=True)
class ModelShape:
    """What a pass reads and what it sends: weights in GB, activations in bytes per element."""

    name: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    layer_gb: float  # transformer layers: split across ranks
    head_gb: float  # lm_head: whole on every rank and read every pass
    embed_gb: float  # embedding: whole on every rank, only looked up (memory, not time)
    overhead_ms: float  # per-pass launch/sync cost that no bandwidth removes
    act_bytes: int = 2  # float16/bfloat16 activations

    def kv_bytes_per_token(self) -> int:
        return 2 * self.layers * self.kv_heads * self.head_dim * self.act_bytes

    def splits_evenly(self, n_hosts: int) -> bool:
        """mlx-lm's shard splits heads and rows into equal parts; other counts fail to load."""
        return self.heads % n_hosts == 0 and self.kv_heads % n_hosts == 0


@dataclass(frozen=True)
class Mac:
    name: str
    bandwidth_gbs: float  # peak unified-memory bandwidth, Apple's figure
    memory_gb: float


@dataclass(frozen=True)
class Link:
    """One hop of the ring: time for a small message one way, and the streaming rate."""

    name: str
    latency_us: float
    bandwidth_gbs: float


@dataclass(frozen=True)
class Assumptions:
    efficiency: float = 0.75  # share of peak bandwidth a decode pass reaches
    verify_growth: float = 0.05  # each extra token in a pass adds this share of the weight read
    usable_memory: float = 0.75  # share of RAM macOS lets the GPU wire by default
    context: int = 8192  # tokens of KV cache to budget for


# Llama-3-70B at 4 bits (4.5 bits a weight with group scales): 68.5B layer, 1.05B head, 1.05B embed
LLAMA_70B_4BIT = ModelShape(
    name="Llama-3-70B 4-bit",
    hidden=8192,
    layers=80,
    heads=64,
    kv_heads=8,
    head_dim=128,
    layer_gb=38.5,
    head_gb=0.59,
    embed_gb=0.59,
    overhead_ms=2.0,
)
# Llama-3.2-1B at 4 bits, tied embedding: read whole on one Mac per draft step
LLAMA_1B_4BIT = ModelShape(
    name="Llama-3.2-1B 4-bit",
    hidden=2048,
    layers=16,
    heads=32,
    kv_heads=8,
    head_dim=64,
    layer_gb=0.55,
    head_gb=0.15,
    embed_gb=0.0,
    overhead_ms=1.0,
)

MACS = {
    "m2-ultra-192": Mac("M2 Ultra 192 GB", 800.0, 192.0),
    "m4-max-128": Mac("M4 Max 128 GB", 546.0, 128.0),
    "m4-max-36": Mac("M4 Max 36 GB", 410.0, 36.0),
    "m4-pro-64": Mac("M4 Pro 64 GB", 273.0, 64.0),
}

# Assumed, not measured: TCP ring over 10 GbE and over Thunderbolt 5 IP, and JACCL's RDMA over TB5
LINKS = (
    Link("10GbE TCP", 75.0, 1.25),
    Link("TB5 TCP", 35.0, 10.0),
    Link("TB5 RDMA", 8.0, 10.0),
)


def compute_ms(main: ModelShape, mac: Mac, n_hosts: int, tokens: int, a: Assumptions) -> float:
    """Time one rank spends reading its weights for a pass over `tokens` tokens."""
    read_gb = main.layer_gb / n_hosts + main.head_gb
    bandwidth_ms = read_gb / (mac.bandwidth_gbs * a.efficiency) * 1e3
    return bandwidth_ms * (1.0 + a.verify_growth * (tokens - 1)) + main.overhead_ms


def all_reduce_ms(n_hosts: int, nbytes: float, link: Link) -> float:
    """Ring all-reduce: reduce-scatter then all-gather, 2(N-1) hops of 1/N of the data each."""
    if n_hosts == 1:
        return 0.0
    hops = 2 * (n_hosts - 1)
    latency = hops * link.latency_us * 1e-3
    transfer = hops / n_hosts * nbytes / (link.bandwidth_gbs * GB) * 1e3
    return latency + transfer


def comm_ms(main: ModelShape, n_hosts: int, tokens: int, link: Link) -> float:
    """Two all_sums per layer (after o_proj and after down_proj) of the pass's hidden states."""
    nbytes = main.hidden * tokens * main.act_bytes
    return 2 * main.layers * all_reduce_ms(n_hosts, nbytes, link)


def pass_ms(main: ModelShape, mac: Mac, n_hosts: int, tokens: int, link: Link, a: Assumptions) -> float:
    return compute_ms(main, mac, n_hosts, tokens, a) + comm_ms(main, n_hosts, tokens, link)


def draft_step_ms(draft: ModelShape, mac: Mac, a: Assumptions) -> float:
    """The draft runs unsharded (every rank drafts the same tokens, so none waits on a broadcast)."""
    return compute_ms(draft, mac, 1, 1, a)


def expected_tokens(acceptance: float, k: int) -> float:
    """Tokens a round yields when each drafted token is accepted with probability `acceptance`."""
    if acceptance >= 1.0:
        return float(k + 1)
    return (1.0 - acceptance ** (k + 1)) / (1.0 - acceptance)


def speculative_tok_s(verify_ms: float, draft_ms: float, acceptance: float, k: int) -> float:
    """A round costs k draft steps plus one verify pass over k+1 tokens."""
    return expected_tokens(acceptance, k) / ((k * draft_ms + verify_ms) / 1e3)


def fits(main: ModelShape, mac: Mac, n_hosts: int, a: Assumptions, draft: ModelShape | None) -> bool:
    """Each rank holds its share of the layers, the whole head and embedding, its KV share, the draft."""
    kv_gb = main.kv_bytes_per_token() * a.context / n_hosts / GB
    need = main.layer_gb / n_hosts + main.head_gb + main.embed_gb + kv_gb
    if draft is not None:
        need += draft.layer_gb + draft.head_gb + draft.embed_gb
    return need <= mac.memory_gb * a.usable_memory


@dataclass(frozen=True)
class Row:
    mac: str
    n_hosts: int
    link: str
    fits: bool
    splits: bool
    plain_pass_ms: float
    comm_share: float  # of a plain pass
    plain_tok_s: float
    best_k: int
    spec_tok_s: float
    speedup: float
    verify_comm_share: float  # of the best k's verify pass


def evaluate(
    main: ModelShape,
    draft: ModelShape,
    mac: Mac,
    n_hosts: int,
    link: Link,
    acceptance: float,
    a: Assumptions,
    max_k: int = 10,
) -> Row:
    plain = pass_ms(main, mac, n_hosts, 1, link, a)
    plain_comm = comm_ms(main, n_hosts, 1, link)
    draft_ms = draft_step_ms(draft, mac, a)
    best_k, best = 0, 1e3 / plain
    for k in range(1, max_k + 1):
        verify = pass_ms(main, mac, n_hosts, k + 1, link, a)
        rate = speculative_tok_s(verify, draft_ms, acceptance, k)
        if rate > best:
            best_k, best = k, rate
    verify_tokens = best_k + 1
    verify_share = comm_ms(main, n_hosts, verify_tokens, link) / pass_ms(
        main, mac, n_hosts, verify_tokens, link, a
    )
    return Row(
        mac=mac.name,
        n_hosts=n_hosts,
        link=link.name if n_hosts > 1 else "-",
        fits=fits(main, mac, n_hosts, a, draft),
        splits=main.splits_evenly(n_hosts),
        plain_pass_ms=plain,
        comm_share=plain_comm / plain,
        plain_tok_s=1e3 / plain,
        best_k=best_k,
        spec_tok_s=best,
        speedup=best * plain / 1e3,
        verify_comm_share=verify_share,
    )


def table(
    main: ModelShape,
    draft: ModelShape,
    mac: Mac,
    acceptance: float,
    a: Assumptions,
    links: Sequence[Link] = LINKS,
    hosts: Sequence[int] = (1, 2, 3, 4),
) -> list[Row]:
    rows = []
    for n in hosts:
        for link in links if n > 1 else links[:1]:
            rows.append(evaluate(main, draft, mac, n, link, acceptance, a))
    return rows


def format_rows(rows: Sequence[Row]) -> str:
    single = next((r for r in rows if r.n_hosts == 1), None)
    head = (
        f"{'N':>2} {'link':<10} {'fits':<4} {'split':<5} {'pass ms':>7} {'comm':>5} {'plain':>6} "
        f"{'k':>2} {'spec':>6} {'speedup':>7} {'v.comm':>6} {'vs 1 Mac':>8}"
    )
    lines = [head]
    for r in rows:
        more = ""
        if single is not None and r.n_hosts > 1:
            more = "more" if r.speedup > single.speedup + 1e-9 else "less"
        lines.append(
            f"{r.n_hosts:>2} {r.link:<10} {'yes' if r.fits else 'no':<4} "
            f"{'ok' if r.splits else 'no':<5} {r.plain_pass_ms:>7.1f} {r.comm_share:>5.0%} "
            f"{r.plain_tok_s:>6.1f} {r.best_k:>2} {r.spec_tok_s:>6.1f} {r.speedup:>6.2f}x "
            f"{r.verify_comm_share:>6.0%} {more:>8}"
        )
    return "\n".join(lines)


LEGEND = """\
N: Macs in the ring. fits: the shard, head, embedding, KV cache and draft fit the GPU's share of
RAM. split: mlx-lm's shard divides the heads evenly (N=3 does not for 64 heads, 8 KV heads).
pass ms: one plain decode pass. comm: its share spent in all_sums. plain / spec: tokens/s. k: the
best draft length. speedup: spec over plain at the same N. v.comm: comm share of that verify pass.
vs 1 Mac: whether speculation speeds up more than it does on one Mac (of the same kind)."""


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mac", action="append", choices=sorted(MACS), help="repeatable")
    parser.add_argument("--acceptance", type=float, action="append", help="per-token; repeatable")
    parser.add_argument("--efficiency", type=float, default=Assumptions.efficiency)
    parser.add_argument("--verify-growth", type=float, default=Assumptions.verify_growth)
    parser.add_argument("--context", type=int, default=Assumptions.context)
    args = parser.parse_args(argv)
    a = Assumptions(efficiency=args.efficiency, verify_growth=args.verify_growth, context=args.context)
    macs = args.mac or ["m2-ultra-192", "m4-max-36"]
    acceptances = args.acceptance or [0.6, 0.8]
    main_model, draft = LLAMA_70B_4BIT, LLAMA_1B_4BIT
    print(f"main {main_model.name}, draft {draft.name} on every rank; {a}")
    print(
        "links (assumed): "
        + "; ".join(f"{x.name} {x.latency_us:g} us/hop, {x.bandwidth_gbs:g} GB/s" for x in LINKS)
    )
    for name in macs:
        mac = MACS[name]
        for acceptance in acceptances:
            print(f"\n{mac.name}, {mac.bandwidth_gbs:g} GB/s, acceptance {acceptance:g}")
            print(format_rows(table(main_model, draft, mac, acceptance, a)))
    print("\n" + LEGEND)


if __name__ == "__main__":
    main()
