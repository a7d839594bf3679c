import ipaddress

import pytest

from faults.injectors.aim import Aim, Rule, own
from faults.injectors.base import FieldError

V4 = ipaddress.ip_network


def test_a_match_is_every_combination_of_its_values():
    aim = Aim.of({"direction": "both", "match": {"dst": ["10.0.0.0/24", "10.0.1.5"], "dport": [80, 443]}})
    assert (aim.egress, aim.ingress) == (True, True)
    assert aim.rules == (
        Rule(4, V4("10.0.0.0/24"), None, 80, None),
        Rule(4, V4("10.0.0.0/24"), None, 443, None),
        Rule(4, V4("10.0.1.5/32"), None, 80, None),
        Rule(4, V4("10.0.1.5/32"), None, 443, None),
    )


def test_ports_alone_match_both_ip_versions_and_mixed_versions_are_left_out():
    assert [r.family for r in Aim.of({"match": {"sport": 8000}}).rules] == [4, 6]
    rules = Aim.of({"match": {"dst": ["10.0.0.0/8", "fd00::/64"], "src": "fd00::1"}}).rules
    assert rules == (Rule(6, V4("fd00::/64"), V4("fd00::1/128"), None, None),)


def test_an_ingress_rule_is_the_same_connection_swapped():
    rule = Rule(4, V4("10.0.0.0/24"), V4("10.0.1.0/24"), 8000, 40000)
    assert rule.swapped() == Rule(4, V4("10.0.1.0/24"), V4("10.0.0.0/24"), 40000, 8000)


def test_the_default_aims_at_all_egress_traffic_and_own_params_leave_the_aim_out():
    assert Aim.of({"delay": "10ms"}) == Aim("egress", ())
    assert (Aim().egress, Aim().ingress) == (True, False)
    assert own({"delay": "10ms", "direction": "ingress", "match": {"dport": 80}}) == {"delay": "10ms"}


def test_duplicates_in_a_list_count_once():
    assert len(Aim.of({"match": {"dst": ["10.0.0.1", "10.0.0.1/32"], "dport": [80, 80]}}).rules) == 1


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"direction": "to"}, "direction"),
        ({"match": {"dst": "fd00::/200"}}, "match.dst"),
        ({"match": {"dport": 0}}, "match.dport"),
        ({"match": {"dport": 1.5}}, "match.dport"),
        ({"match": ["dst"]}, "match"),
    ],
)
def test_bad_aims_name_their_field(params, field):
    with pytest.raises(FieldError) as e:
        Aim.of(params)
    assert e.value.field == field
