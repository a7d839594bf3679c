import pytest

from llmchaos import languages
from llmchaos.errors import UsageError


def test_registry_has_every_language_with_corpus_and_prompts():
    reg = languages.registry()
    assert set(reg) >= {"en", "de", "fr", "es", "it", "pt", "zh", "ja"}
    for lang in reg.values():
        assert len(lang.paragraphs()) >= 20
        prompts = lang.prompts()
        assert len(prompts) >= 40
        assert {p["size"] for p in prompts} == {"short", "medium", "long"}
        assert {"translation", "customer_service", "summarisation", "code"} <= {p["category"] for p in prompts}


def test_unknown_language_is_a_usage_error():
    with pytest.raises(UsageError, match="unknown language 'xx'"):
        languages.get("xx")


def test_bad_registry_names_file_and_field(tmp_path):
    bad = tmp_path / "registry.toml"
    bad.write_text('[en]\nname = "English"\nweight = -1\n')
    with pytest.raises(UsageError) as e:
        languages.registry(bad)
    assert str(e.value) == f"{bad}: en.weight: must be a positive number"
