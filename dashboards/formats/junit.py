"""The comparison as JUnit XML: one test case per gated cell, so a CI system shows each regression
as a failed test (a cell without enough data to tell is skipped, with why)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from dashboards.comparison.verdicts import INCONCLUSIVE, WORSE, Comparison, Finding
from dashboards.formats import text


def _detail(r: Finding) -> str:
    return (
        f"A {text.value(r.a, r.unit)}, B {text.value(r.b, r.unit)}, change {text.change(r)} {text.interval(r)}, "
        f"p adj {text.p_value(r.p_adj)}, minimum detectable {text.detectable(r)}; {r.method}"
    )


def render(c: Comparison, name: str = "llmchaos compare") -> str:
    gated = [r for r in c.rows if r.gated]
    failures = sum(r.verdict == WORSE for r in gated)
    skipped = sum(r.verdict == INCONCLUSIVE for r in gated)
    suites = ET.Element("testsuites", name=name, tests=str(len(gated)), failures=str(failures))
    suite = ET.SubElement(
        suites, "testsuite", name=name, tests=str(len(gated)), failures=str(failures), skipped=str(skipped), errors="0"
    )
    for r in gated:
        case = ET.SubElement(suite, "testcase", classname=f"llmchaos.{r.lang}.{r.metric}.{r.phase}", name=r.stat)
        if r.verdict == WORSE:
            ET.SubElement(case, "failure", message=f"{text.cell(r)} worse: {text.change(r)}").text = _detail(r)
        elif r.verdict == INCONCLUSIVE:
            ET.SubElement(case, "skipped", message=r.reason or "inconclusive")
        else:
            ET.SubElement(case, "system-out").text = f"{r.verdict}: {_detail(r)}"
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"
