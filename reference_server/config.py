"""The engine's and the HTTP server's configuration (what `llmchaos serve` flags set), whatever the executor."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from reference_server.profile import Limits, Profile, Reasoning

_LIMITS = Limits()


@dataclass
class EngineConfig:
    model_name: str = "llmchaos-sim-8b"
    max_model_len: int = _LIMITS.max_model_len
    max_num_seqs: int = _LIMITS.max_num_seqs
    max_num_batched_tokens: int = _LIMITS.max_num_batched_tokens
    block_size: int = _LIMITS.block_size
    num_blocks: int = _LIMITS.num_blocks
    watermark: float = 0.01
    enable_prefix_caching: bool = _LIMITS.prefix_caching
    max_waiting: int = _LIMITS.max_waiting
    policy: str = "fcfs"  # fcfs | wfq | two-level
    lang_weights: dict[str, float] = field(default_factory=dict)
    fast_max_prompt_tokens: int = 8192
    fast_weight: float = 90.0
    bulk_weight: float = 10.0
    bulk_min_slice_s: float = 0.5
    pacer_tokens_per_s: float = 0.0  # 0: off
    pacer_max_gap_s: float = 0.2
    reasoning: Reasoning = field(default_factory=Reasoning)  # thinking lengths drawn for requests that do not say

    @classmethod
    def of(cls, p: Profile, **more: Any) -> EngineConfig:  # noqa: ANN401 - EngineConfig's own fields
        """The engine `p` describes; `more` sets the fields a profile does not hold."""
        lim = p.limits
        return cls(
            model_name=p.model_name,
            max_model_len=lim.max_model_len,
            max_num_seqs=lim.max_num_seqs,
            max_num_batched_tokens=lim.max_num_batched_tokens,
            block_size=lim.block_size,
            num_blocks=lim.num_blocks,
            enable_prefix_caching=lim.prefix_caching,
            max_waiting=lim.max_waiting,
            policy=p.policy,
            pacer_tokens_per_s=p.pacer_rate,
            pacer_max_gap_s=p.pacer_max_gap,
            reasoning=p.reasoning,
            **more,
        )


@dataclass
class ServerOptions:
    api_key: str | None = None
    admin_token: str | None = None
    admin_allow_remote: bool = False
    max_body_bytes: int = 4 * 1024 * 1024  # a 128K-token prompt, even as \uXXXX escapes, fits several times
    header_timeout_s: float = 10.0  # a request head must be complete this soon after it begins (slowloris)
    max_header_bytes: int = 64 * 1024
    replica: int | None = None  # its index in a cluster (reference_server/cluster): the sim's GPU is its own
    prompt_tokens_details: bool = False  # OpenAI usage: the prompt tokens found in the prefix cache (vLLM's flag)
