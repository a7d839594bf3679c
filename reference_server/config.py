"""Engine and server configuration (what `llmchaos serve` flags set)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class CostModel:
    """Step time of the sim executor, calibrated to an 8B model in bf16 on one H100.

    Decode is memory-bound: a fixed weight read per step plus a KV read per context
    token; prefill is compute-bound per prompt token. Gives TTFT ~60-120 ms for
    1-2K-token prompts at low load and ITL ~10-15 ms up to a batch of 64.
    """

    step_overhead_s: float = 0.004
    prefill_per_token_s: float = 0.00006
    decode_base_s: float = 0.010
    decode_per_seq_s: float = 0.00005
    decode_per_ctx_token_s: float = 4e-8
    jitter: float = 0.03  # sigma of a seeded log-normal factor
    max_clock_mhz: float = 1980.0  # H100 SXM boost clock: the factor is max / locked

    @classmethod
    def zero(cls) -> "CostModel":
        return cls(0.0, 0.0, 0.0, 0.0, 0.0, 0.0)


@dataclass
class EngineConfig:
    model_name: str = "llmchaos-sim-8b"
    max_model_len: int = 8192
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 2048
    block_size: int = 16
    num_blocks: int = 8192
    watermark: float = 0.01
    enable_prefix_caching: bool = True
    max_waiting: int = 1024
    policy: str = "fcfs"  # fcfs | wfq | two-level
    lang_weights: dict[str, float] = field(default_factory=dict)
    fast_max_prompt_tokens: int = 8192
    fast_weight: float = 90.0
    bulk_weight: float = 10.0
    bulk_min_slice_s: float = 0.5
    seed: int = 0
    cost: CostModel = field(default_factory=CostModel)
    pacer_tokens_per_s: float = 0.0  # 0: off
    pacer_max_gap_s: float = 0.2
