"""The shipped multilingual subword tokenizer (BPE with byte fallback, Llama-style).

Trained with the `tokenizers` library on the registry's own corpora, so German,
Chinese and Japanese get their real token-per-character ratios. Rebuild with
``python -m llmchaos.tokenizer`` after adding a language.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Protocol

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

# No Rust thread pool: a load generator's measuring thread must not be preempted by it.
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
PATH = Path(__file__).parent / "data" / "tokenizer.json"
VOCAB_SIZE = 6000
SPECIAL = ["<unk>", "<s>", "</s>"]
BYTE_TOKENS = [f"<0x{b:02X}>" for b in range(256)]
SPACE = "\u2581"
PIECE_CHARS = 65_536  # a longer text is counted in pieces: its encoding holds ~100 bytes a character
BATCH_CHARS = PIECE_CHARS  # characters handed to the tokenizer at once, a piece's (~30 ms of counting)
BATCH_TEXTS = 256  # ... and texts (a stream's events): more in one call save nothing


def train(texts: list[str], vocab_size: int = VOCAB_SIZE) -> Tokenizer:
    """Train the BPE on `texts` (deterministic for the same input)."""
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Metaspace(replacement=SPACE, prepend_scheme="first"),
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.Punctuation(),
        ]
    )
    tok.decoder = decoders.Sequence(
        [
            decoders.Replace(SPACE, " "),
            decoders.ByteFallback(),
            decoders.Fuse(),
            decoders.Strip(" ", 1, 0),
        ]
    )
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=SPECIAL + BYTE_TOKENS, limit_alphabet=4000, show_progress=False
    )
    tok.train_from_iterator(texts, trainer)
    return tok


_serving = PATH  # what load() gives: the shipped tokenizer, or a local model's own (`use`)


def use(path: Path) -> None:
    """Make `path` (a SentencePiece-style tokenizer.json with `</s>`) this process's tokenizer."""
    global _serving
    _serving = path
    load.cache_clear()


@cache
def load(path: Path | None = None) -> Tokenizer:
    return Tokenizer.from_file(str(path or _serving))


def encode(text: str) -> list[int]:
    return load().encode(text, add_special_tokens=False).ids


def count(text: str) -> int:
    return count_batch([text])[0]


class Stop(Protocol):
    """What tells counting to give up (a threading or gevent Event): read from the counting thread."""

    def is_set(self) -> bool: ...


class Abandoned(Exception):
    """Counting was given up (its `stop` was set) before every text was counted."""


def count_batch(texts: list[str], stop: Stop | None = None) -> list[int]:
    """Token counts of many texts at once (in Rust, off the GIL; `len()` builds no list of ids), in
    bounded memory: a text longer than PIECE_CHARS is counted in pieces, each cut before a space (a
    word-start, where the pre-tokenizer splits anyway: the same count), else, in a text with no space
    for that long, where it reaches PIECE_CHARS (within a token of the whole's count per cut). The
    texts go to the tokenizer BATCH_CHARS at a time; `stop`, once set, ends the counting before the
    next batch with `Abandoned`."""
    counts = [0] * len(texts)
    tok = load()
    for at, batch, whole in _batches(texts):
        if stop is not None and stop.is_set():
            raise Abandoned
        got = [len(enc) for enc in tok.encode_batch_fast(batch, add_special_tokens=False)]
        if whole:
            counts[at : at + len(got)] = got
        else:
            counts[at] += sum(got)
    return counts


def _batches(texts: list[str]) -> Iterator[tuple[int, list[str], bool]]:
    """What the tokenizer counts at once: (the first text's index, texts, True) for a run of short
    texts, (the text's index, [piece], False) for each piece of a long one."""
    i, n = 0, len(texts)
    while i < n:
        if len(texts[i]) > PIECE_CHARS:
            for piece in _pieces(texts[i]):
                yield i, [piece], False
            i += 1
            continue
        j, chars = i, 0
        while j < n and j - i < BATCH_TEXTS and chars < BATCH_CHARS and len(texts[j]) <= PIECE_CHARS:
            chars += len(texts[j])
            j += 1
        yield i, texts[i:j], True
        i = j


def _pieces(text: str) -> list[str]:
    out, at = [], 0
    while len(text) - at > PIECE_CHARS:
        cut = text.rfind(" ", at + 1, at + PIECE_CHARS)
        cut = cut if cut > at else at + PIECE_CHARS
        out.append(text[at:cut])
        at = cut
    out.append(text[at:])
    return out


def decode(ids: list[int]) -> str:
    return load().decode(ids, skip_special_tokens=False)


def eos_id() -> int:
    eos = load().token_to_id("</s>")
    if eos is None:
        raise RuntimeError("the shipped tokenizer has no </s> token (run `make tokenizer`)")
    return eos


def pieces() -> list[str]:
    """Surface text of every token id ('' for special and byte tokens), for fast detokenizing."""
    tok = load()
    out = [""] * tok.get_vocab_size()
    for piece, idx in tok.get_vocab().items():
        if piece not in SPECIAL and not (piece.startswith("<0x") and piece.endswith(">")):
            out[idx] = piece.replace(SPACE, " ")
    return out


def main() -> None:
    from llmchaos import languages

    texts = [p for lang in languages.registry().values() for p in lang.paragraphs()]
    texts += [json_prompt["prompt"] for lang in languages.registry().values() for json_prompt in lang.prompts()]
    PATH.parent.mkdir(parents=True, exist_ok=True)
    train(texts).save(str(PATH))
    print(f"wrote {PATH}")


if __name__ == "__main__":
    main()
