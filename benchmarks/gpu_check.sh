#!/usr/bin/env bash
# The torch executor on a real GPU, in one run of under 8 minutes (for a session lent a GPU machine):
#   1. installs what it needs (a venv with the project's torch extra; a CUDA torch the machine
#      already has is kept),
#   2. serves the `small` model on CUDA (bf16) and runs benchmarks/torch_batching.py against it:
#      output tokens/s at concurrency 1, 8 and 32, and a prefill-heavy run (long prompts, GPU-bound),
#   3. locks the SM clock low through the gpu_clock fault ({gpu: 0}, NVML) and runs the prefill-heavy
#      load again, sampling the DCGM-named gauges on /metrics before, during and after the lock,
#   4. reverts the lock (the fault runner does on SIGTERM; `faults recover` on any way out),
# and prints one summary table, with the joules per output token of the decode (concurrency 8) and
# prefill-heavy loads at full clock and under the lock: the GPU's energy counter on /metrics
# (DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION, NVML's) read around each load over the tokens the server
# generated meanwhile (vllm:generation_tokens_total). Run as root from anywhere: bash benchmarks/gpu_check.sh
# Environment: PYTHON (default python3), LOCK_MHZ (default 600), OUT (default a temporary folder),
# VENV (default .venv-gpu). DEVICE=cpu MODEL=tiny rehearses the same run without a GPU: the fault
# then locks the server's simulated clock ({sim: URL}) and the DCGM gauges and energy are absent (the
# table says why, as /metrics does).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
LOCK_MHZ=${LOCK_MHZ:-600}
OUT=${OUT:-$(mktemp -d)}
DEVICE=${DEVICE:-cuda}
MODEL=${MODEL:-small}
VENV=${VENV:-.venv-gpu}
BIN=$VENV/bin
mkdir -p "$OUT"

say() { printf '[gpu_check %3ss] %s\n' "$SECONDS" "$*" >&2; }

# -- 1. install --------------------------------------------------------------------------------------
[ -x $BIN/python ] || $PY -m venv --system-site-packages $VENV
if $BIN/python -c 'import sys, torch; sys.exit(not torch.cuda.is_available())' 2>/dev/null; then
    say "keeping this machine's CUDA torch $($BIN/python -c 'import torch; print(torch.__version__)')"
    $BIN/pip install -q -e . 'transformers>=5.0' 'safetensors>=0.4'
else
    $BIN/pip install -q -e '.[torch]'
fi
if [ "$DEVICE" = cuda ]; then
    $BIN/python -c 'import sys, torch; sys.exit(not torch.cuda.is_available())' \
        || { say "torch sees no CUDA device here: nothing to check"; exit 1; }
    nvidia-smi -L >&2 || true
    TARGET="{gpu: 0}"
    ALLOW=(--allow-gpu 0)
else
    TARGET="{sim: \"http://127.0.0.1:PORT\", token_env: GPU_CHECK_TOKEN}"
    ALLOW=()
fi
export GPU_CHECK_TOKEN=gpu-check

# -- 2. serve and measure ----------------------------------------------------------------------------
PORT=$($BIN/python -c 'from llmchaos.procs import free_port; print(free_port())')
URL=http://127.0.0.1:$PORT
JOURNAL=$OUT/journal.json
SERVER= SAMPLER= FAULTS=
cleanup() {
    for pid in $FAULTS $SAMPLER $SERVER; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    $BIN/llmchaos faults recover --journal "$JOURNAL" >&2 || true
}
trap cleanup EXIT
$BIN/llmchaos serve --engine torch --device "$DEVICE" --model "$MODEL" --port "$PORT" --admin-token "$GPU_CHECK_TOKEN" \
    --max-num-seqs 64 --max-num-batched-tokens 8192 >"$OUT/server.log" 2>&1 &
SERVER=$!
for _ in $(seq 600); do
    curl -sf "$URL/healthz" >/dev/null && break
    kill -0 $SERVER 2>/dev/null || { cat "$OUT/server.log" >&2; exit 1; }
    sleep 0.5
done
curl -sf "$URL/healthz" >/dev/null || { say "server not ready"; cat "$OUT/server.log" >&2; exit 1; }
say "serving: $(curl -s "$URL/v1/models")"

# The DCGM gauges, one JSON line a second: {"phase": ..., "DCGM_FI_DEV_SM_CLOCK": ..., ...}
sample() {
    local phase=$1
    while :; do
        curl -s "$URL/metrics" | PHASE=$phase $BIN/python -c '
import json, os, sys
row = {"phase": os.environ["PHASE"]}
for line in sys.stdin:
    if line.startswith("DCGM_FI_DEV_"):
        name, value = line.split("{")[0], line.rsplit(" ", 1)[1]
        row[name] = float(value)
print(json.dumps(row), flush=True)' >>"$OUT/dcgm.jsonl"
        sleep 1
    done
}
bench() { $BIN/python -m benchmarks.torch_batching --url "$URL" --lock-mhz 0 "$@"; }
PREFILL=(--concurrency 32 --requests 96 --prompt-repeat 60 --max-tokens 4)  # ~1,700-token prompts

# The energy counter (mJ; absent: why) and the tokens generated so far, one JSON line a read.
mark() {
    curl -s "$URL/metrics" | MARK=$1 $BIN/python -c '
import json, os, sys
row = {"mark": os.environ["MARK"], "energy_mj": None, "tokens": 0.0, "why": ""}
for line in sys.stdin:
    if line.startswith("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{"):
        row["energy_mj"] = float(line.rsplit(" ", 1)[1])
    elif line.startswith("vllm:generation_tokens_total{"):
        row["tokens"] += float(line.rsplit(" ", 1)[1])
    elif line.startswith(("# DCGM_FI_DEV_* gauges absent:", "# absent: DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION:")):
        row["why"] = line[2:].strip()
print(json.dumps(row), flush=True)' >>"$OUT/energy.jsonl"
}
load() { local name=$1; shift; mark "$name:before"; bench "$@"; mark "$name:after"; }  # a load, metered

sample free & SAMPLER=$!
say "decode: concurrency 1, 32, then 8 (metered)"
bench --concurrency 1,32 --json "$OUT/decode.json"
load decode_free --concurrency 8 --json "$OUT/decode_free.json"
say "prefill-heavy, free clock"
load prefill_free "${PREFILL[@]}" --json "$OUT/prefill_free.json"
kill $SAMPLER; wait $SAMPLER 2>/dev/null || true

# -- 3. lock the SM clock through the gpu_clock fault ------------------------------------------------
cat >"$OUT/lock.yaml" <<YAML
seed: 0
faults:
  - name: sm-clock-low
    kind: gpu_clock
    target: ${TARGET/PORT/$PORT}
    at: 0s
    duration: 240s
    params: {graphics_mhz: $LOCK_MHZ}
YAML
$BIN/llmchaos faults run "$OUT/lock.yaml" --journal "$JOURNAL" "${ALLOW[@]}" --timeline "$OUT/timeline.json" \
    >"$OUT/faults.log" 2>&1 &
FAULTS=$!
clock_now() {  # the SM clock as NVML reports it on /metrics; on the CPU the simulated device's
    if [ "$DEVICE" = cuda ]; then
        curl -s "$URL/metrics" | awk '/^DCGM_FI_DEV_SM_CLOCK/ {print int($2)}'
    else
        curl -s -H "authorization: Bearer $GPU_CHECK_TOKEN" "$URL/admin/device/clocks" \
            | $BIN/python -c 'import json, sys; print(int(json.load(sys.stdin)["graphics_mhz"]))'
    fi
}
for _ in $(seq 100); do  # until the lock shows
    clock=$(clock_now)
    [ -n "$clock" ] && [ "$clock" -le $((LOCK_MHZ + 100)) ] && break
    kill -0 $FAULTS 2>/dev/null || { cat "$OUT/faults.log" >&2; exit 1; }
    sleep 0.2
done
say "SM clock now ${clock:-?} MHz"
sample locked & SAMPLER=$!
load prefill_locked "${PREFILL[@]}" --json "$OUT/prefill_locked.json"
load decode_locked --concurrency 8 --json "$OUT/decode_locked.json"
kill $SAMPLER; wait $SAMPLER 2>/dev/null || true

# -- 4. revert ---------------------------------------------------------------------------------------
kill -TERM $FAULTS; wait $FAULTS 2>/dev/null || true
FAULTS=
sleep 2
sample reverted & SAMPLER=$!
load prefill_reverted "${PREFILL[@]}" --json "$OUT/prefill_reverted.json"
kill $SAMPLER; wait $SAMPLER 2>/dev/null || true
say "done in ${SECONDS}s; files in $OUT"

# -- summary -----------------------------------------------------------------------------------------
OUT=$OUT LOCK_MHZ=$LOCK_MHZ MODEL=$MODEL DEVICE=$DEVICE $BIN/python - <<'PY'
import json, os, statistics
out = os.environ["OUT"]
read = lambda name: json.load(open(f"{out}/{name}.json"))
decode, locked = read("decode") | read("decode_free"), read("decode_locked")
free, slow, back = read("prefill_free"), read("prefill_locked"), read("prefill_reverted")
marks = {r["mark"]: r for r in map(json.loads, open(f"{out}/energy.jsonl"))}
def joules_per_token(load):  # the GPU's energy over the load's generated tokens; None: no counter
    a, b = marks[f"{load}:before"], marks[f"{load}:after"]
    if a["energy_mj"] is None or b["energy_mj"] is None or b["tokens"] <= a["tokens"]:
        return None
    return (b["energy_mj"] - a["energy_mj"]) / 1000 / (b["tokens"] - a["tokens"])
def energy_cells(*loads):
    return " ".join(f"{j:10.4f}" if (j := joules_per_token(l)) is not None else f"{'absent':>10}" for l in loads)
rows = [json.loads(line) for line in open(f"{out}/dcgm.jsonl")]
gauges = ["DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_MEM_CLOCK", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_POWER_USAGE",
          "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"]
print(f"\ntorch executor, {os.environ['MODEL']} model on {os.environ['DEVICE']}; SM clock locked at {os.environ['LOCK_MHZ']} MHz via gpu_clock")
print(f"{'measure':44} {'free':>10} {'locked':>10} {'reverted':>10}")
print(f"{'decode tokens/s, concurrency 1':44} {decode['c1']:10.1f}")
print(f"{'decode tokens/s, concurrency 8':44} {decode['c8']:10.1f} {locked['c8']:10.1f}")
print(f"{'decode tokens/s, concurrency 32':44} {decode['c32']:10.1f}")
print(f"{'  batching gain at 32 (x one at a time)':44} {decode['c32'] / decode['c1']:10.2f}")
print(f"{'prefill-heavy output tokens/s, concurrency 32':44} {free['c32']:10.1f} {slow['c32']:10.1f} {back['c32']:10.1f}")
print(f"{'  throughput drop under the lock (x)':44} {'':10} {free['c32'] / slow['c32']:10.2f}")
print(f"{'J per output token, decode concurrency 8':44} {energy_cells('decode_free', 'decode_locked')}")
print(f"{'J per output token, prefill-heavy':44} {energy_cells('prefill_free', 'prefill_locked', 'prefill_reverted')}")
for a, b, what in (("decode_free", "decode_locked", "decode"), ("prefill_free", "prefill_locked", "prefill-heavy")):
    if None not in (ja := joules_per_token(a), jb := joules_per_token(b)):
        print(f"{'  ' + what + ' J/token under the lock (x)':44} {'':10} {jb / ja:10.2f}")
why = {r["why"] for r in marks.values() if r["why"] and r["energy_mj"] is None}
if why:
    print(f"energy absent: {'; '.join(sorted(why))}")
for g in gauges:
    cells = []
    for phase in ("free", "locked", "reverted"):
        values = [r[g] for r in rows if r["phase"] == phase and g in r]
        cells.append(f"{statistics.median(values):10.0f}" if values else f"{'absent':>10}")
    print(f"{g + ' (median)':44} {' '.join(cells)}")
PY
