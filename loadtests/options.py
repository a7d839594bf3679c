"""llmchaos's options on Locust's command line, and the run's settings read from them."""

from __future__ import annotations

import math
from argparse import Namespace
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from faults import allow
from faults.host.messages import RENEW_S
from faults.session import FaultOptions
from llmchaos import languages, recovery, slo
from llmchaos.errors import UsageError
from llmchaos.headers import REPLICA_HEADER
from llmchaos.units import duration
from loadtests import canaries, distributions, guard, load_profile
from loadtests.adapters import ADAPTERS, Adapter
from loadtests.dataplane.response import Limits
from loadtests.energy import attribute
from loadtests.energy.readings import Source
from loadtests.energy.sampler import source
from loadtests.sessions import SessionOptions

if TYPE_CHECKING:  # importing locust monkey-patches the process (gevent): only its users may
    from configargparse import ArgumentParser
    from locust.env import Environment


TURNS = "4-8"  # turns per conversation when neither --turns nor the profile says


def add_arguments(parser: ArgumentParser) -> None:
    g = parser.add_argument_group("llmchaos")
    g.add_argument("--api", choices=sorted(ADAPTERS), default="openai-chat", help="the target's API")
    g.add_argument("--model", default="llmchaos-sim-8b")
    g.add_argument("--api-key", default=None, env_var="LLMCHAOS_API_KEY")
    g.add_argument("--langs", default="", help="comma-separated language tags (default: all)")
    g.add_argument("--max-tokens", type=int, default=128)
    g.add_argument("--no-stream", action="store_true", help="non-streaming requests")
    g.add_argument(
        "--lang-in-body", action="store_true", help="also send the language as OpenAI metadata / Gemini labels"
    )
    g.add_argument(
        "--include-thoughts",
        action="store_true",
        help="Gemini: ask a thinking model to stream its thoughts (thinkingConfig.includeThoughts), measured apart",
    )
    g.add_argument("--prompt-sizes", default="", help="e.g. short,medium (default: all)")
    g.add_argument(
        "--long-context-tokens",
        type=int,
        default=0,
        help="use generated prompts of this many tokens instead of the corpus prompts",
    )
    g.add_argument(
        "--prefix-tokens",
        type=int,
        default=0,
        help="open every request of a user with its prefix: this many tokens of its language (a shared prompt prefix)",
    )
    g.add_argument(
        "--prefixes",
        type=int,
        default=0,
        help="with --prefix-tokens: this many prefixes per language, shared among its users (default: one each)",
    )
    g.add_argument(
        "--sessions",
        action="store_true",
        help="each user runs conversations, each turn the conversation so far and a new prompt; with --rate, "
        "conversations begun per second",
    )
    g.add_argument(
        "--turns",
        help=f"with --sessions: turns per conversation, N or MIN-MAX (uniform; default {TURNS}), or the profile's",
    )
    g.add_argument(
        "--turn-think",
        help="with --sessions: think time before each later turn, e.g. 2s or 1s-5s (default 0s), or the profile's",
    )
    g.add_argument(
        "--tool-rate",
        type=float,
        help="with --sessions: the share of turns that offer tools (default 0); a tool call is answered with its "
        "result",
    )
    g.add_argument("--seed", type=int, default=0, help="seed for prompt draws and arrivals")
    g.add_argument(
        "--canary-rate",
        type=float,
        default=0.0,
        help="share of each language's requests that are canaries (a known answer, checked: else outcome wrong)",
    )
    g.add_argument("--canaries", default="", help="canary file (YAML; default: the reference server's answers)")
    g.add_argument(
        "--think-time",
        type=float,
        default=0.0,
        help="closed loop: each user waits uniform(0, T) seconds between its requests",
    )
    g.add_argument(
        "--warmup",
        default="0s",
        help="requests started this long after test start are in "
        "phase 'warmup', kept apart from the baseline (spawning, new connections)",
    )
    g.add_argument(
        "--ttft-timeout", type=float, default=300.0, help="seconds to the first content event = ttft_timeout"
    )
    g.add_argument(
        "--stall-limit", type=float, default=30.0, help="seconds between events once content flows = stalled"
    )
    g.add_argument("--request-timeout", type=float, default=600.0, help="seconds to the terminator = timeout")
    g.add_argument("--connect-timeout", type=float, default=5.0, help="seconds to connect = connect_error")
    g.add_argument(
        "--replica-header",
        default=REPLICA_HEADER,
        help="the response header naming the replica that answered (a router's own, e.g. x-envoy-upstream-host)",
    )
    g.add_argument("--rate", type=float, default=0.0, help="open loop: requests/s over all workers")
    g.add_argument("--arrival", choices=["poisson", "gamma", "constant"], default="poisson")
    g.add_argument("--burstiness", type=float, default=1.0, help="gamma shape (1 = Poisson)")
    g.add_argument(
        "--load-profile", default="", help="YAML load profile (stages of users or rate); Locust owns --profile"
    )
    g.add_argument("--shape", choices=["", "step", "ramp", "spike", "soak"], default="")
    g.add_argument("--levels", default="", help="shape levels, e.g. 50,200,500,1000")
    g.add_argument("--stage-duration", default="30s")
    g.add_argument("--slo", default="", help="YAML SLOs per language (default: the registry)")
    g.add_argument("--check-slo", action="store_true", help="exit 1 when an SLO fails")
    g.add_argument(
        "--guard", default="", help="YAML live guard: act when a language's percentile stays over its threshold"
    )
    g.add_argument("--schedule", default="", help="fault schedule (YAML); run by the master, phases tag requests")
    g.add_argument(
        "--k8s-workflow", default="", help="[NAMESPACE/]NAME: phases from that Chaos Mesh Workflow's steps, instead"
    )
    g.add_argument("--fault-journal", default="", help="recovery journal (default: the user's state dir)")
    g.add_argument(
        "--fault-secret-file",
        default="",
        help="the secret shared with the fault hosts (default: LLMCHAOS_FAULT_SECRET in the environment)",
    )
    g.add_argument(
        "--fault-lease",
        type=float,
        default=3.0,
        help="seconds a fault host keeps a window without a renewal (at least two renewals and its --max-lateness)",
    )
    g.add_argument(
        "--fault-host-wait", type=float, default=30.0, help="seconds the master waits for the schedule's fault hosts"
    )
    allow.add_arguments(g)
    g.add_argument("--results-dir", default="", help="write DIR/<run_id>/ results")
    g.add_argument("--requests-sample", type=float, default=1.0, help="fraction of requests in requests.jsonl")
    g.add_argument("--prometheus-port", type=int, default=0, help="serve live metrics (master)")
    g.add_argument("--push-gateway", default="", help="Pushgateway URL (job llmchaos, run_id)")
    g.add_argument("--push-interval", type=float, default=10.0)
    g.add_argument(
        "--energy-from",
        default="",
        help="GPU energy for J/token: a Prometheus URL, a /metrics page (dcgm-exporter's, the reference server's), "
        "or host:NAME (a fault host's NVML)",
    )
    g.add_argument("--energy-selector", default="", help='label selector of the GPUs\' series, e.g. {Hostname="gpu-1"}')
    g.add_argument(
        "--energy-interval",
        type=float,
        default=1.0,
        help="seconds between reads of a /metrics page (and at phase edges)",
    )
    g.add_argument("--price-per-gpu-hour", type=float, default=None, help="USD per GPU-hour, for $/Mtok")
    g.add_argument("--price-per-kwh", type=float, default=None, help="USD per kWh of the GPUs' energy, for $/Mtok")


# Every number among our options: (lowest, highest, whether the lowest itself is allowed); all finite.
RANGES: dict[str, tuple[float, float, bool]] = {
    "max_tokens": (1, math.inf, True),
    "long_context_tokens": (0, math.inf, True),
    "prefix_tokens": (0, math.inf, True),
    "prefixes": (0, math.inf, True),
    "think_time": (0, math.inf, True),
    "ttft_timeout": (0, math.inf, False),
    "stall_limit": (0, math.inf, False),
    "request_timeout": (0, math.inf, False),
    "connect_timeout": (0, math.inf, False),
    "rate": (0, math.inf, True),
    "burstiness": (0, math.inf, False),
    "requests_sample": (0, 1, True),
    "canary_rate": (0, 1, True),
    "prometheus_port": (0, 65535, True),
    "push_interval": (0, math.inf, False),
    "fault_lease": (2 * RENEW_S, 3600, True),  # two renewals: one lost or late must not revert the fault
    "fault_host_wait": (0, 3600, True),
    "energy_interval": (0, 3600, False),
}
PRICES = ("price_per_gpu_hour", "price_per_kwh")  # optional: None, or a number >= 0


def check_number(value: float, low: float, high: float, low_ok: bool, flag: str) -> float:
    """`value` if it is finite and in range, else a UsageError naming `flag`."""
    if math.isfinite(value) and (low < value or (low_ok and value == low)) and value <= high:
        return value
    if high == math.inf:
        rule = f"{'>=' if low_ok else '>'} {low:g}"
    else:
        rule = f"from {low:g} to {high:g}" if low_ok else f"above {low:g} up to {high:g}"
    raise UsageError(f"must be a finite number {rule}, got {value!r}", field=flag)


def parsed_options(env: Environment) -> Namespace:
    """Locust's parsed options, which every run of a locustfile from the command line has."""
    if env.parsed_options is None:
        raise RuntimeError("llmchaos runs under Locust's command line: locust -f loadtests/locustfile.py")
    return env.parsed_options


@dataclass(frozen=True)
class Settings:
    """What the options mean for this run, checked once (UsageError on bad input)."""

    options: Namespace  # Locust's parsed options, ours among them
    adapter: Adapter
    langs: tuple[str, ...]
    slos: slo.Slos
    profile: load_profile.Profile | None
    open_loop: bool
    warmup_s: float
    prompt_sizes: frozenset[str]
    faults: FaultOptions
    limits: Limits
    recovery: recovery.Rule
    guard: guard.Config | None = None
    canaries: canaries.ByLang | None = None  # with --canary-rate: each language's
    energy: Source | None = None  # with --energy-from
    prices: attribute.Prices = field(default_factory=attribute.Prices)
    sessions: SessionOptions | None = None  # with --sessions

    @classmethod
    def read(cls, options: Namespace) -> Settings:
        for name, (low, high, low_ok) in RANGES.items():
            check_number(getattr(options, name), low, high, low_ok, "--" + name.replace("_", "-"))
        for name in PRICES:
            if getattr(options, name) is not None:
                check_number(getattr(options, name), 0, math.inf, True, "--" + name.replace("_", "-"))
        if (
            options.energy_selector or any(getattr(options, n) is not None for n in PRICES)
        ) and not options.energy_from:
            raise UsageError("read only with --energy-from (where the GPUs' energy is read)", field=_given(options))
        if options.prefixes and not options.prefix_tokens:
            raise UsageError("read only with --prefix-tokens (the prefixes' length)", field="--prefixes")
        if options.canaries and not options.canary_rate:
            raise UsageError("read only with --canary-rate (the share of requests)", field="--canaries")
        prof = _profile(options)
        open_loop = options.rate > 0 or bool(prof and prof.stages[0].rate is not None)
        sessions = _sessions(options, prof)
        langs, slos = _langs(options.langs), slo.load(options.slo or None)
        faults = FaultOptions(
            options.schedule,
            options.k8s_workflow,
            options.fault_journal or None,
            options.run_time,
            allow.from_args(options),
            options.fault_lease,
            options.fault_secret_file,
            options.fault_host_wait,
        )
        return cls(
            options,
            ADAPTERS[options.api],
            langs,
            slos,
            prof,
            open_loop,
            duration(options.warmup, "--warmup"),
            _words(options.prompt_sizes),
            faults,
            Limits(
                options.connect_timeout,
                options.ttft_timeout,
                options.stall_limit,
                options.request_timeout,
                options.replica_header.strip().lower(),
            ),
            recovery.load(options.slo or None),
            guard.load(options.guard, slos, langs) if options.guard else None,
            canaries.load(options.canaries or canaries.reference_file(), langs, options.api)
            if options.canary_rate > 0
            else None,
            source(options.energy_from, options.energy_selector) if options.energy_from else None,
            attribute.Prices(options.price_per_gpu_hour, options.price_per_kwh),
            sessions,
        )


def _sessions(o: Namespace, prof: load_profile.Profile | None) -> SessionOptions | None:
    """--sessions' turns, think time and tool rate, each from its flag or the profile's `sessions:`
    (not both); None without --sessions (then none may be given)."""
    given = prof.sessions if prof is not None else None
    if o.tool_rate is not None and not 0.0 <= o.tool_rate <= 1.0:
        raise UsageError(f"a share, 0 to 1, got {o.tool_rate}", field="--tool-rate")
    if not o.sessions:
        if o.tool_rate:
            raise UsageError("a share of turns: give --sessions", field="--tool-rate")
        if given is not None:
            raise UsageError("the profile states conversations (sessions:): give --sessions", field="--load-profile")
        return None
    if o.canary_rate:
        raise UsageError("a canary is a request of its own, never a turn: leave out --canary-rate", field="--sessions")
    given = given or load_profile.Conversations()
    for flag, ours, theirs in (("--turns", o.turns, given.turns), ("--turn-think", o.turn_think, given.think),
                               ("--tool-rate", o.tool_rate, given.tool_rate)):  # fmt: skip
        if ours is not None and theirs is not None:
            raise UsageError("given by the profile's sessions: too: give one", field=flag)
    turns = given.turns or distributions.parse(TURNS if o.turns is None else o.turns, "--turns", whole=True)
    think = given.think or distributions.parse("0s" if o.turn_think is None else o.turn_think,
                                               "--turn-think", whole=False)  # fmt: skip
    tool_rate = given.tool_rate if given.tool_rate is not None else o.tool_rate or 0.0
    if tool_rate and o.api == "openai-completions":
        field = "--tool-rate" if o.tool_rate else "--load-profile"
        raise UsageError("a completion offers no tools: use --api openai-chat or gemini", field=field)
    return SessionOptions(turns, think, tool_rate)


def _given(options: Namespace) -> str:
    """The first of the options that need --energy-from that was given."""
    names = ["energy_selector", *PRICES]
    return "--" + next(n for n in names if getattr(options, n) not in (None, "")).replace("_", "-")


def _words(text: str) -> frozenset[str]:
    return frozenset(w.strip() for w in text.split(",") if w.strip())


def _langs(text: str) -> tuple[str, ...]:
    tags = [t.strip() for t in text.split(",") if t.strip()] or list(languages.registry())
    for t in tags:
        languages.get(t)
    return tuple(tags)


def _profile(o: Namespace) -> load_profile.Profile | None:
    if o.load_profile and o.shape:
        raise UsageError("give --load-profile or --shape, not both", field="--shape")
    if o.load_profile:
        return load_profile.load(o.load_profile)
    if not o.shape:
        return None
    try:
        levels = [float(x) for x in o.levels.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"not numbers: {o.levels!r}", field="--levels") from None
    if not levels:
        raise UsageError("give positive levels, e.g. 50,200,500", field="--levels")
    for v in levels:
        check_number(v, 0, math.inf, False, "--levels")
    stage = check_number(duration(o.stage_duration, "--stage-duration"), 0, math.inf, False, "--stage-duration")
    return load_profile.shape(o.shape, levels, stage, o.rate > 0)
