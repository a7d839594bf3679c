"""The Pod Security Standards (Kubernetes' `baseline` and `restricted`, as its pod-security admission
checks them at each level's latest version): what a pod spec violates, worded as the API server
refuses it, and the security context our own containers carry to meet `restricted`.

Written from the standards' table (kubernetes.io/docs/concepts/security/pod-security-standards) and
the admission's checks (k8s.io/pod-security-admission/policy): no Python library evaluates them."""

from __future__ import annotations

from collections.abc import Callable, Iterator

LEVELS = ("privileged", "baseline", "restricted")
LABEL = "pod-security.kubernetes.io/enforce"
USER = 10001  # our containers' user: the image's is root, which runAsNonRoot refuses to start
HOME = {"name": "HOME", "value": "/tmp"}  # USER has no passwd entry, so its HOME would be /, not its to write
BASELINE_CAPABILITIES = {
    *("AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE"),
    *("SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"),
}
SAFE_SYSCTLS = {
    *("kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start"),
    *("net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports"),
    *("net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl"),
    "net.ipv4.tcp_keepalive_probes",
}
SELINUX_TYPES = {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}
APPARMOR = "container.apparmor.security.beta.kubernetes.io/"
RESTRICTED_VOLUMES = {
    *("configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"),
}
Check = Callable[[dict, list[tuple[str, dict]]], str | None]


def container_context() -> dict:
    """A container's securityContext that meets `restricted`, set on the container itself (a Chaos
    Mesh Task's pod takes no pod-level fields)."""
    return {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": True,
        "runAsUser": USER,
        "runAsGroup": USER,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def _containers(pod: dict) -> list[tuple[str, dict]]:
    kinds = ("initContainers", "containers", "ephemeralContainers")
    return [(c.get("name", ""), c) for k in kinds for c in pod.get(k) or []]


def _each(containers: list[tuple[str, dict]], bad: Callable[[dict], bool]) -> list[str]:
    return [name for name, c in containers if bad(c.get("securityContext") or {})]


def _who(names: list[str]) -> str:
    quoted = ", ".join(f'"{n}"' for n in names)
    return f"{'container' if len(names) == 1 else 'containers'} {quoted}"


def _named(what: str, names: list[str], must: str) -> str | None:
    return f"{what} ({_who(names)} must {must})" if names else None


def _host_namespaces(pod: dict, _: list) -> str | None:
    used = [f"{k}=true" for k in ("hostNetwork", "hostPID", "hostIPC") if pod.get(k)]
    return f"host namespaces ({', '.join(used)})" if used else None


def _privileged(pod: dict, cs: list) -> str | None:
    return _named(
        "privileged", _each(cs, lambda s: s.get("privileged") is True), "not set securityContext.privileged=true"
    )


def _capabilities_baseline(pod: dict, cs: list) -> str | None:
    added = sorted(
        {a for _, c in cs for a in ((c.get("securityContext") or {}).get("capabilities") or {}).get("add") or []}
    )
    beyond = [a for a in added if a not in BASELINE_CAPABILITIES]
    return f'non-default capabilities (capabilities "{", ".join(beyond)}" must not be added)' if beyond else None


def _host_path(pod: dict, _: list) -> str | None:
    found = [v.get("name", "") for v in pod.get("volumes") or [] if "hostPath" in v]
    return f"hostPath volumes (volumes {', '.join(found)})" if found else None


def _host_ports(pod: dict, cs: list) -> str | None:
    ports = [str(p["hostPort"]) for _, c in cs for p in c.get("ports") or [] if p.get("hostPort")]
    return f"hostPort (ports {', '.join(ports)})" if ports else None


def _seccomp_baseline(pod: dict, cs: list) -> str | None:
    def unconfined(s: dict) -> bool:
        return (s.get("seccompProfile") or {}).get("type") == "Unconfined"

    if unconfined(pod.get("securityContext") or {}):
        return 'seccompProfile (pod must not set securityContext.seccompProfile.type to "Unconfined")'
    return _named(
        "seccompProfile", _each(cs, unconfined), 'not set securityContext.seccompProfile.type to "Unconfined"'
    )


def _selinux(pod: dict, cs: list) -> str | None:
    def bad(s: dict) -> bool:
        o = s.get("seLinuxOptions") or {}
        return o.get("type", "") not in SELINUX_TYPES or bool(o.get("user")) or bool(o.get("role"))

    if bad(pod.get("securityContext") or {}) or _each(cs, bad):
        return "seLinuxOptions (forbidden securityContext.seLinuxOptions)"
    return None


def _proc_mount(pod: dict, cs: list) -> str | None:
    return _named("procMount", _each(cs, lambda s: s.get("procMount", "Default") != "Default"), "not set procMount")


def _sysctls(pod: dict, _: list) -> str | None:
    bad = [s.get("name", "") for s in (pod.get("securityContext") or {}).get("sysctls") or []]
    bad = [n for n in bad if n not in SAFE_SYSCTLS]
    return f"forbidden sysctls ({', '.join(bad)})" if bad else None


def _volumes(pod: dict, _: list) -> str | None:
    bad = sorted({k for v in pod.get("volumes") or [] for k in v if k != "name" and k not in RESTRICTED_VOLUMES})
    return f"restricted volume types (volume types {', '.join(bad)})" if bad else None


def _escalation(pod: dict, cs: list) -> str | None:
    names = _each(cs, lambda s: s.get("allowPrivilegeEscalation") is not False)
    return _named("allowPrivilegeEscalation != false", names, "set securityContext.allowPrivilegeEscalation=false")


def _non_root(pod: dict, cs: list) -> str | None:
    at_pod = (pod.get("securityContext") or {}).get("runAsNonRoot")
    if at_pod is False:
        return "runAsNonRoot != true (pod must not set securityContext.runAsNonRoot=false)"
    names = _each(
        cs, lambda s: s.get("runAsNonRoot") is False or (s.get("runAsNonRoot") is None and at_pod is not True)
    )
    return _named("runAsNonRoot != true", names, "set securityContext.runAsNonRoot=true")


def _root_user(pod: dict, cs: list) -> str | None:
    if (pod.get("securityContext") or {}).get("runAsUser") == 0:
        return "runAsUser=0 (pod must not set runAsUser=0)"
    return _named("runAsUser=0", _each(cs, lambda s: s.get("runAsUser") == 0), "not set runAsUser=0")


def _seccomp_restricted(pod: dict, cs: list) -> str | None:
    at_pod = ((pod.get("securityContext") or {}).get("seccompProfile") or {}).get("type")

    def unset(s: dict) -> bool:
        own = (s.get("seccompProfile") or {}).get("type")
        return (own or at_pod) not in ("RuntimeDefault", "Localhost")

    names = _each(cs, unset)
    return _named("seccompProfile", names, 'set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost"')


def _capabilities_restricted(pod: dict, cs: list) -> str | None:
    def caps(c: dict) -> dict:
        return (c.get("securityContext") or {}).get("capabilities") or {}

    undropped = [n for n, c in cs if "ALL" not in (caps(c).get("drop") or [])]
    added = sorted({a for _, c in cs for a in caps(c).get("add") or [] if a != "NET_BIND_SERVICE"})
    parts = [f'{_who(undropped)} must set securityContext.capabilities.drop=["ALL"]'] if undropped else []
    parts += [f"{'capability' if len(added) == 1 else 'capabilities'} {', '.join(added)} must not be added"] * bool(
        added
    )
    return f"unrestricted capabilities ({'; '.join(parts)})" if parts else None


CHECKS: dict[str, list[Check]] = {
    "baseline": [
        _host_namespaces, _privileged, _capabilities_baseline, _host_path, _host_ports,
        _seccomp_baseline, _selinux, _proc_mount, _sysctls,
    ],
    "restricted": [_volumes, _escalation, _non_root, _root_user, _seccomp_restricted, _capabilities_restricted],
}  # fmt: skip


def _apparmor(pod: dict, cs: list, annotations: dict) -> str | None:
    bad = [
        f"{k}={v!r}"
        for k, v in sorted(annotations.items())
        if k.startswith(APPARMOR) and v != "runtime/default" and not str(v).startswith("localhost/")
    ]
    fields = [pod.get("securityContext") or {}] + [c.get("securityContext") or {} for _, c in cs]
    if any((f.get("appArmorProfile") or {}).get("type") == "Unconfined" for f in fields):
        bad.append('appArmorProfile.type="Unconfined"')
    return f"forbidden AppArmor profiles ({', '.join(bad)})" if bad else None


def _host_process(pod: dict, cs: list) -> str | None:
    def on(s: dict) -> bool:
        return (s.get("windowsOptions") or {}).get("hostProcess") is True

    return "hostProcess" if on(pod.get("securityContext") or {}) or _each(cs, on) else None


LINUX_ONLY = {"_escalation", "_seccomp_restricted", "_capabilities_restricted"}  # a Windows pod skips these


def violations(pod: dict, level: str, annotations: dict | None = None) -> list[str]:
    """What `pod` (a PodSpec, with its metadata's annotations) does that `level` forbids, each as
    the admission words it."""
    upto = LEVELS[1 : LEVELS.index(level) + 1]
    cs = _containers(pod)
    windows = (pod.get("os") or {}).get("name") == "windows"
    found = [_apparmor(pod, cs, annotations or {}), _host_process(pod, cs)] if upto else []
    found += [check(pod, cs) for lv in upto for check in CHECKS[lv] if not (windows and check.__name__ in LINUX_ONLY)]
    return [v for v in found if v]


def level(pod: dict, annotations: dict | None = None) -> str:
    """The most restrictive level `pod` meets."""
    return next(lv for lv in reversed(LEVELS) if not violations(pod, lv, annotations))


def pod_specs(obj: dict) -> Iterator[tuple[str, dict, dict]]:
    """Each pod an object makes, with the field it is at and its annotations: a Pod's, a workload's
    template, a CronJob's Job's, a Chaos Mesh Workflow's Task pods (its container and volumes, in
    the Workflow's namespace)."""
    kind, spec = obj.get("kind"), obj.get("spec") or {}
    if not isinstance(spec, dict):
        return

    def annotated(meta: object) -> dict:
        return (meta.get("annotations") or {}) if isinstance(meta, dict) else {}

    if kind == "Pod":
        yield "spec", spec, annotated(obj.get("metadata"))
    elif kind in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "ReplicationController"):
        template = spec.get("template") or {}
        yield "spec.template.spec", template.get("spec") or {}, annotated(template.get("metadata"))
    elif kind == "CronJob":
        template = ((spec.get("jobTemplate") or {}).get("spec") or {}).get("template") or {}
        yield "spec.jobTemplate.spec.template.spec", template.get("spec") or {}, annotated(template.get("metadata"))
    elif kind == "Workflow":
        for i, t in enumerate(spec.get("templates") or []):
            task = t.get("task") if isinstance(t, dict) else None
            if isinstance(task, dict) and isinstance(task.get("container"), dict):
                pod = {"containers": [task["container"]], "volumes": task.get("volumes") or []}
                yield f"spec.templates[{i}].task", pod, {}
