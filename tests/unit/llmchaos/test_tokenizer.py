import json
import threading

import pytest

from llmchaos import languages, tokenizer


def ratio(tag: str) -> float:
    text = languages.get(tag).text()
    return len(text) / tokenizer.count(text)


def test_cjk_and_german_token_ratios_are_real():
    # Subword tokenizers give ~1-1.5 characters per token for Chinese and Japanese,
    # 3-4.5 for English, and German tokenizes longest among the European languages.
    assert 1.0 <= ratio("zh") <= 1.6
    assert 1.0 <= ratio("ja") <= 1.7
    assert 3.0 <= ratio("en") <= 4.5
    assert ratio("de") == min(ratio(t) for t in ("en", "de", "fr", "es", "it", "pt"))


def test_round_trip_and_byte_fallback_for_unseen_characters():
    text = "Grüße, 你好 — ☃ 🙂"
    assert tokenizer.decode(tokenizer.encode(text)) == text


def test_shipped_tokenizer_is_what_training_gives(tmp_path):
    texts = [p for lang in languages.registry().values() for p in lang.paragraphs()]
    texts += [p["prompt"] for lang in languages.registry().values() for p in lang.prompts()]
    trained = tokenizer.train(texts)
    shipped = json.loads(tokenizer.PATH.read_text())
    assert json.loads(trained.to_str())["model"]["merges"] == shipped["model"]["merges"]


def test_pieces_concatenate_to_the_decoded_text():
    ids = tokenizer.encode("The server streams tokens quickly.")
    pieces = tokenizer.pieces()
    assert "".join(pieces[i] for i in ids).strip() == tokenizer.decode(ids)


def lowercasing_copy(path):
    """The shipped tokenizer.json, lowercasing its input: another tokenizer, easy to tell apart."""
    spec = json.loads(tokenizer.PATH.read_text())
    spec["normalizer"] = {"type": "Sequence", "normalizers": [spec["normalizer"], {"type": "Lowercase"}]}
    path.write_text(json.dumps(spec))
    return path


def test_use_makes_another_tokenizer_this_processs_own(tmp_path):
    """`use` (a local model's own tokenizer, for `llmchaos serve --model DIR`) swaps what load() gives."""
    assert tokenizer.count("HELLO WORLD") != tokenizer.count("hello world")
    try:
        tokenizer.use(lowercasing_copy(tmp_path / "tokenizer.json"))
        assert tokenizer.count("HELLO WORLD") == tokenizer.count("hello world")
        assert tokenizer.load(tokenizer.PATH).encode("HELLO").ids != tokenizer.load().encode("HELLO").ids
    finally:
        tokenizer.use(tokenizer.PATH)
    assert tokenizer.count("HELLO WORLD") != tokenizer.count("hello world")


def test_counting_in_batches_is_the_counting_of_each_text():
    texts = ["x"] * (tokenizer.BATCH_TEXTS + 3) + [" lorem" * (tokenizer.BATCH_CHARS // 3), "", "Hallo Welt"]
    counts = tokenizer.count_batch(texts)
    assert counts[: tokenizer.BATCH_TEXTS + 3] == [tokenizer.count("x")] * (tokenizer.BATCH_TEXTS + 3)
    words = tokenizer.BATCH_CHARS // 3  # in pieces, each cut before a space: the same count
    assert counts[-3:] == [words * tokenizer.count(" lorem"), 0, tokenizer.count("Hallo Welt")]


def test_a_stop_gives_counting_up_before_the_next_batch():
    stop = threading.Event()
    stop.set()
    with pytest.raises(tokenizer.Abandoned):
        tokenizer.count_batch(["Hallo Welt"], stop)
    seen = []

    class After:  # set once the first batch is under way
        def is_set(self) -> bool:
            seen.append(1)
            return len(seen) > 1

    with pytest.raises(tokenizer.Abandoned):
        tokenizer.count_batch(["x"] * (3 * tokenizer.BATCH_TEXTS), After())
    assert len(seen) == 2  # asked before the first batch and the second, given up at the second
