"""The engine's and the HTTP server's configuration (what `llmchaos serve` flags set), whatever the executor."""

from __future__ import annotations

from dataclasses import dataclass, field


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
    pacer_tokens_per_s: float = 0.0  # 0: off
    pacer_max_gap_s: float = 0.2


@dataclass
class ServerOptions:
    api_key: str | None = None
    admin_token: str | None = None
    admin_allow_remote: bool = False
    max_body_bytes: int = 4 * 1024 * 1024  # a 128K-token prompt, even as \uXXXX escapes, fits several times
    header_timeout_s: float = 10.0  # a request head must be complete this soon after it begins (slowloris)
    max_header_bytes: int = 64 * 1024
