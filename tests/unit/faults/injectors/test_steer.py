import ipaddress

from faults.injectors.aim import Rule
from faults.injectors.steer import ETH_P_IP, ETH_P_IPV6, u32_keys

net = ipaddress.ip_network
IPV4_GUARD = ["0x05000000/0x0f000000+0", "0x00000000/0x00001fff+4"]  # ports: no IP options, first fragment


def test_an_ipv4_rule_with_a_port_is_one_u32_filter_per_protocol():
    assert list(u32_keys(Rule(4, net("10.0.0.0/24"), None, 8000, None))) == [
        (ETH_P_IP, [*IPV4_GUARD, "0x0a000000/0xffffff00+16", "0x00060000/0x00ff0000+8", "0x00001f40/0x0000ffff+20"]),
        (ETH_P_IP, [*IPV4_GUARD, "0x0a000000/0xffffff00+16", "0x00110000/0x00ff0000+8", "0x00001f40/0x0000ffff+20"]),
    ]


def test_source_fields_sit_where_the_headers_have_them():
    (only,) = u32_keys(Rule(4, None, net("192.168.1.7"), None, None))
    assert only == (ETH_P_IP, ["0xc0a80107/0xffffffff+12"])  # no port: any IPv4 packet from it
    tcp, _udp = u32_keys(Rule(4, None, None, None, 443))
    assert tcp[1][-1] == "0x01bb0000/0xffff0000+20"  # sport: the word's high half


def test_an_ipv6_prefix_takes_only_the_words_its_mask_covers():
    tcp, udp = u32_keys(Rule(6, None, net("fd00:1:2:3::/64"), None, 9000))  # src, sport
    assert tcp == (
        ETH_P_IPV6,
        ["0xfd000001/0xffffffff+8", "0x00020003/0xffffffff+12", "0x00000600/0x0000ff00+4", "0x23280000/0xffff0000+40"],
    )
    assert udp[1][2] == "0x00001100/0x0000ff00+4"
