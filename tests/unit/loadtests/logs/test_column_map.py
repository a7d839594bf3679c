import pytest

from llmchaos.errors import UsageError
from loadtests.logs.column_map import MISSING, lookup, parse


def test_mapping_and_dotted_paths():
    assert parse(" ts=time , user=meta.user_id,") == {"ts": "time", "user": "meta.user_id"}
    assert lookup({"meta": {"user_id": 7}}, "meta.user_id") == 7
    assert lookup({"meta": 1}, "meta.user_id") is MISSING


@pytest.mark.parametrize(("text", "why"), [("when=time", "unknown field 'when'"), ("ts", "expected field=name")])
def test_a_bad_mapping_names_the_flag(text, why):
    with pytest.raises(UsageError, match=f"--columns: {why}"):
        parse(text)
