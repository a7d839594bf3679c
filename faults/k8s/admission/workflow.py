"""workflow_webhook.go: a Workflow's entry and templates, each template type with only its own
fields, and an embedded chaos checked as its own kind's webhook checks it, with no duration of its own."""

from __future__ import annotations

import re
from typing import Any

from faults.k8s.admission import network, pod, stress
from faults.k8s.admission.fielderrors import GoValue, Path, invalid, required, strings, struct
from faults.k8s.admission.goparse import GoError, duration_string, parse_duration
from faults.k8s.admission.walk import Struct, validate

CHAOS_KEYS = {  # EmbedChaos: each chaos template type and its key
    "AWSChaos": "awsChaos",
    "AzureChaos": "azureChaos",
    "BlockChaos": "blockChaos",
    "DNSChaos": "dnsChaos",
    "GCPChaos": "gcpChaos",
    "HTTPChaos": "httpChaos",
    "IOChaos": "ioChaos",
    "JVMChaos": "jvmChaos",
    "KernelChaos": "kernelChaos",
    "NetworkChaos": "networkChaos",
    "PhysicalMachineChaos": "physicalmachineChaos",
    "PodChaos": "podChaos",
    "StressChaos": "stressChaos",
    "TimeChaos": "timeChaos",
}
ROOTS: dict[str, Struct] = {"NetworkChaos": network.ROOT, "PodChaos": pod.ROOT, "StressChaos": stress.ROOT}
DNS_1123_SUBDOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character "
    f"(e.g. 'example.com', regex used for validation is '{DNS_1123_SUBDOMAIN}')"
)


def is_dns1123_subdomain(name: str) -> list[str]:
    """validation.IsDNS1123Subdomain's messages."""
    out = ["must be no more than 253 characters"] if len(name) > 253 else []
    return out + ([] if re.fullmatch(DNS_1123_SUBDOMAIN, name) else [SUBDOMAIN_MESSAGE])


def entry_must_exist(path: Path, entry: str, templates: list[dict]) -> list[str]:
    out = [required(path, "the entry of workflow is required")] if not entry else []
    if not any(t.get("name", "") == entry for t in templates):
        out.append(invalid(path, entry, f"can not find a template with name {entry}"))
    return out


def names_not_duplicated(path: Path, names: list[str]) -> list[str]:
    twice = sorted({n for n in names if names.count(n) > 1})
    return [invalid(path, "", f"template name must be unique, duplicated names: [{' '.join(twice)}]")] if twice else []


def embedded(template: dict) -> dict[str, Any]:
    """The template's embedded chaos specs, by type (EmbedChaos is nil when it has none)."""
    return {kind: template[key] for kind, key in CHAOS_KEYS.items() if template.get(key) is not None}


def should_be_no_task(path: Path, t: dict) -> list[str]:
    return [invalid(path, struct("Task"), "this template should not contain Task")] if t.get("task") is not None else []


def should_be_no_children(path: Path, t: dict) -> list[str]:
    children = t.get("children") or []
    return [invalid(path, strings(children), "this template should not contain Children")] if children else []


def should_be_no_branches(path: Path, t: dict) -> list[str]:
    if not t.get("conditionalBranches"):
        return []
    shown = GoValue("[]v1alpha1.ConditionalBranch{...}")
    return [invalid(path, shown, "this template should not contain ConditionalBranches")]


def should_be_no_chaos(path: Path, t: dict) -> list[str]:
    return [invalid(path, struct("EmbedChaos"), "this template should not contain any Chaos")] if embedded(t) else []


def should_be_no_schedule(path: Path, t: dict) -> list[str]:
    if t.get("schedule") is None:
        return []
    return [invalid(path, struct("ChaosOnlyScheduleSpec"), "this template should not contain Schedule")]


def no_duration_in_chaos(path: Path, t: dict) -> list[str]:
    kind, chaos = t.get("templateType", ""), embedded(t)
    if not chaos:
        return [invalid(path.child(kind), None, f"the value of chaos {kind} is required")]
    if kind not in chaos:
        return [invalid(path.child(kind), None, f"parse workflow field error: missing chaos spec {kind}")]
    given = chaos[kind].get("duration")
    if given is None:
        return []
    try:
        ns = parse_duration(str(given))
    except GoError as e:
        return [invalid(path, "", str(e))]
    detail = "should not define duration in chaos when using Workflow, use Template#Deadline instead."
    return [invalid(path, GoValue(duration_string(ns)), detail)]


ALL = (should_be_no_task, should_be_no_children, should_be_no_branches, should_be_no_chaos, should_be_no_schedule)
RULES = {  # what each template type must not hold, in the webhook's order
    "Suspend": ALL,
    "Serial": (should_be_no_task, should_be_no_branches, should_be_no_chaos, should_be_no_schedule),
    "Schedule": ALL[:4],
    "Task": (should_be_no_children, should_be_no_chaos, should_be_no_schedule),
    "StatusCheck": ALL,
    **dict.fromkeys(
        CHAOS_KEYS, (should_be_no_task, should_be_no_children, should_be_no_branches, should_be_no_schedule)
    ),
}
RULES["Parallel"] = RULES["Serial"]


def validate_template(path: Path, t: dict, names: set[str]) -> list[str]:
    name, kind = t.get("name", ""), t.get("templateType", "")
    out = [required(path.child("name"), "name of template is required")] if not name else []
    errs = is_dns1123_subdomain(name)
    if errs:
        out.append(invalid(path.child("name"), name, f"field name must be DNS-1123 subdomain, [{' '.join(errs)}]"))
    if kind not in RULES:
        return [*out, invalid(path.child("templateType"), kind, f"unrecognized template type: {kind}")]
    if kind == "Suspend" and not t.get("deadline"):
        detail = "deadline in template with type Suspend could not be empty"
        out.append(invalid(path.child("deadline"), t.get("deadline"), detail))
    if kind in ("Serial", "Parallel"):
        for i, child in enumerate(t.get("children") or []):
            if child not in names:
                where = path.child("children").index(i)
                out.append(invalid(where, child, f"can not find a template with name {child}"))
    if kind in CHAOS_KEYS:
        out += no_duration_in_chaos(path, t)
    out += [e for rule in RULES[kind] for e in rule(path, t)]
    chaos = embedded(t).get(kind)
    if chaos is not None and kind in ROOTS:  # the chaos as its own kind's webhook sees it, defaults first
        out += validate(ROOTS[kind], {"spec": chaos})
    return out


def errors(obj: dict) -> list[str]:
    """Workflow.ValidateCreate's errors."""
    spec = obj.get("spec") or {}
    path = Path("spec")
    templates = spec.get("templates") or []
    out = entry_must_exist(path.child("entry"), spec.get("entry", ""), templates)
    at = path.child("templates")
    if not templates:
        shown = GoValue("[]v1alpha1.Template(nil)" if spec.get("templates") is None else "[]v1alpha1.Template{}")
        return [*out, invalid(at, shown, "templates in workflow could not be empty")]
    out += names_not_duplicated(at, [t.get("name", "") for t in templates])
    names = {t.get("name", "") for t in templates}
    for i, t in enumerate(templates):
        out += validate_template(at.index(i), t, names)
    return out
