"""Checks the rendered OrderHold Kubernetes manifests; run by tests/deploy/k8s_test.sh.

Usage:
  k8s_check.py BASE.yaml OVERLAY.yaml REDIS_ENV ALERTS.yaml FLAGS HEALTH_SERVICE DRAIN_S UID
               LIVENESS_SERVICE AUTHZ_POLICY.json

BASE.yaml and OVERLAY.yaml are `kubectl kustomize` output of deploy/k8s and of
deploy/k8s-example (with REDIS_ENV as its redis.env; an empty OVERLAY.yaml skips its checks);
FLAGS is a file of the server's flag names, one a line; HEALTH_SERVICE the name the server's
health reporter sets besides ""; DRAIN_S the seconds the server drains in-flight calls after
SIGTERM; UID the numeric user of the image (deploy/Dockerfile); LIVENESS_SERVICE the health
name that is SERVING whenever the server runs (kLivenessServiceName); AUTHZ_POLICY.json the
example policy (deploy/authz_policy.example.json) the base's ConfigMap must carry. Prints one line
per failed property and exits 1 if there is any.

The kit is closed by default, and this proves it on the rendered objects: the gRPC port speaks
mutual TLS from a mounted Secret in cert-manager's format, every call is checked against a mounted
authorization policy equal to the example, reflection is off, a NetworkPolicy lets only labelled
clients reach the gRPC port and only Prometheus the metrics port, no Service exposes metrics, the
probes use the plaintext health port, and no credential is in a variable: the Redis password is a
mounted file.
"""
import base64
import os
import json
import posixpath
import re
import urllib.parse
import sys

import yaml

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
    return ok


def load(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def one(objects, kind, name=None):
    found = [o for o in objects
             if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    check(len(found) == 1, f"exactly one {kind} {name or ''}: found {len(found)}")
    return found[0] if found else {}


def selects(selector, labels, who):
    """True when a label selector (matchLabels only, or a Service's plain map) picks `labels`."""
    if "matchExpressions" in selector:
        return check(False, f"{who}: matchExpressions is not checked by this test")
    wanted = selector.get("matchLabels", selector)
    return check(bool(wanted) and all(labels.get(k) == v for k, v in wanted.items()),
                 f"{who}: selector {wanted} does not select the pods {labels}")


def url_password(url):
    """The password in a redis[s]:// URL (several hosts allowed), or None."""
    netloc = urllib.parse.urlsplit(url).netloc
    userinfo, at, _ = netloc.rpartition("@")
    if not at or ":" not in userinfo:
        return None
    return userinfo.split(":", 1)[1]


def address_port(address):
    """The port of host:port ("0.0.0.0:50052", "[::]:50052"), as an int, or None."""
    match = re.fullmatch(r".*:(\d+)", address or "")
    return int(match[1]) if match else None


def mounted_file(path, pod, container, kind, who):
    """The volume source (a Secret's or ConfigMap's) and key that the file `path` is, checking
    the mount: read-only, the whole directory (a subPath mount never sees an update)."""
    if not check(bool(path), f"{who}: set"):
        return None, None
    directory, key = posixpath.split(path)
    mounts = [m for m in container.get("volumeMounts", []) if m.get("mountPath") == directory]
    if not check(len(mounts) == 1, f"{who}: {path} is not in a directory mounted from a volume"):
        return None, None
    mount = mounts[0]
    check(mount.get("readOnly") is True, f"{who}: mount {directory} read-only")
    check(not mount.get("subPath") and not mount.get("subPathExpr"),
          f"{who}: mount {directory} whole (no subPath: the kubelet never updates one)")
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    source = volumes.get(mount.get("name"), {}).get(kind)
    if not check(source is not None, f"{who}: {directory} is a {kind} volume"):
        return None, None
    items = source.get("items")
    if items:  # a key mounted under another name
        key = next((i["key"] for i in items if i.get("path") == key), None)
    return source, key


def main():
    (base_path, overlay_path, redis_env_path, alerts_path, flags_path, health_service,
     drain_s, image_uid, liveness_service, policy_path) = sys.argv[1:]
    drain_s = int(drain_s)
    image_uid = int(image_uid)
    with open(flags_path) as f:
        variables = {"ORDERHOLD_" + line.strip().upper() for line in f if line.strip()}
    base = load(base_path)

    # Deployment and its pod.
    deployment = one(base, "Deployment", "orderhold")
    check(deployment["spec"].get("replicas") == 2, "Deployment: 2 replicas")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    selects(deployment["spec"]["selector"], pod_labels, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    containers = pod["containers"]
    check(len(containers) == 1, "Deployment: one container")
    c = containers[0]
    check(c.get("image") == "localhost/orderhold:dev", "container: image localhost/orderhold:dev")
    ports = {p.get("name"): p["containerPort"] for p in c.get("ports", [])}
    check(ports == {"grpc": 50051, "metrics": 9464, "health": 50052},
          f"container: ports grpc=50051, metrics=9464 and health=50052, got {ports}")

    # Probes: native gRPC health checks on the plaintext health port (the kubelet's grpc probes
    # cannot speak TLS, and the gRPC port speaks only TLS). Readiness follows Redis ("" or the
    # service's name); liveness asks the name that stays SERVING through a Redis outage, so an
    # outage never restarts the pods.
    wanted_services = {"readinessProbe": ("", health_service),
                       "livenessProbe": (liveness_service,)}
    for probe_name, services in wanted_services.items():
        probe = c.get(probe_name, {})
        grpc = probe.get("grpc")
        if check(grpc is not None, f"{probe_name}: a grpc probe"):
            check(grpc.get("port") == ports.get("health"),
                  f"{probe_name}: the health port {ports.get('health')}, got {grpc.get('port')}")
            check(grpc.get("service", "") in services,
                  f"{probe_name}: service one of {services}, got {grpc.get('service')}")
        check(not {"httpGet", "tcpSocket", "exec"} & probe.keys(),
              f"{probe_name}: only the grpc handler")

    # Security context: the container's settings win over the pod's.
    pod_sc = pod.get("securityContext", {})
    sc = {**pod_sc, **c.get("securityContext", {})}
    check(sc.get("runAsNonRoot") is True, "securityContext: runAsNonRoot true")
    check(sc.get("runAsUser") == image_uid,
          f"securityContext: runAsUser {image_uid} (the image's user, deploy/Dockerfile)")
    check(sc.get("readOnlyRootFilesystem") is True, "securityContext: readOnlyRootFilesystem true")
    check(sc.get("allowPrivilegeEscalation") is False,
          "securityContext: allowPrivilegeEscalation false")
    check(sc.get("privileged") is not True, "securityContext: not privileged")
    caps = sc.get("capabilities") or {}
    check("ALL" in caps.get("drop", []), "securityContext: capabilities drop ALL")
    check(not caps.get("add"), "securityContext: no capabilities added")
    check(sc.get("seccompProfile", {}).get("type") == "RuntimeDefault",
          "securityContext: seccompProfile RuntimeDefault")
    check(pod.get("automountServiceAccountToken") is False, "pod: no service account token")
    # Service links would put ORDERHOLD_PORT=tcp://... and friends next to the ORDERHOLD_* settings.
    check(pod.get("enableServiceLinks") is False, "pod: enableServiceLinks false")

    resources = c.get("resources", {})
    for kind in ("requests", "limits"):
        check({"cpu", "memory"} <= resources.get(kind, {}).keys(), f"resources: {kind} cpu+memory")

    # Stop: preStop sleep, then SIGTERM and the drain, all inside the grace period.
    pre_stop = c.get("lifecycle", {}).get("preStop", {})
    command = pre_stop.get("exec", {}).get("command", [])
    sleep_s = None
    if len(command) == 2 and command[0] in ("sleep", "/bin/sleep") and command[1].isdigit():
        sleep_s = int(command[1])
    elif "sleep" in pre_stop:
        sleep_s = pre_stop["sleep"].get("seconds")
    if check(sleep_s is not None and sleep_s > 0, f"preStop: a sleep, got {pre_stop}"):
        grace = pod.get("terminationGracePeriodSeconds", 30)
        check(grace > sleep_s + drain_s,
              f"terminationGracePeriodSeconds {grace} > preStop {sleep_s} + drain {drain_s}")

    # Configuration: every setting from one ConfigMap; credentials only as mounted files.
    secrets = {o["metadata"]["name"]: o for o in base if o["kind"] == "Secret"}
    config_maps = {o["metadata"]["name"]: o for o in base if o["kind"] == "ConfigMap"}
    env = {e["name"]: e for e in c.get("env", [])}
    for name, e in env.items():
        check(name in variables, f"env: {name} is not a server flag's variable")
        check("secretKeyRef" not in e.get("valueFrom", {}),
              f"env: {name} from a Secret (credentials are mounted files, never variables)")
    env_from = c.get("envFrom", [])
    check(len(env_from) == 1 and "configMapRef" in env_from[0], "envFrom: one ConfigMap")
    settings = {name: e["value"] for name, e in env.items() if "value" in e}
    for ref in env_from:
        check("secretRef" not in ref, "envFrom: a Secret (credentials are mounted files)")
        cm = config_maps.get(ref.get("configMapRef", {}).get("name"))
        if check(cm is not None, f"envFrom: ConfigMap {ref} is in the rendering"):
            for key in cm["data"]:
                check(key in variables, f"ConfigMap: {key} is not a server flag's variable")
            settings.update(cm["data"])
    # No password in a variable or an argument: only *_PASSWORD_FILE settings, and URLs without one.
    for name, value in settings.items():
        check("PASSWORD" not in name or name.endswith("_PASSWORD_FILE"),
              f"{name}: a password in a variable (mount it and set the _FILE setting)")
        check(not re.match(r"rediss?://", value) or url_password(value) is None,
              f"{name}: the URL carries a password (use ORDERHOLD_REDIS_PASSWORD_FILE)")
    for arg in c.get("command", []) + c.get("args", []):
        check("password" not in arg.lower() or "password_file" in arg.lower(),
              f"container: argument {arg!r} carries a password")
    url = settings.get("ORDERHOLD_REDIS_URL")
    check(url is not None and url_password(url) is None,
          f"ORDERHOLD_REDIS_URL: set, without a password, got {url}")
    # Redis over TLS: a rediss:// URL and its CA a mounted file of a Secret.
    check(url is not None and url.startswith("rediss://"),
          f"ORDERHOLD_REDIS_URL: rediss:// (TLS to Redis), got {url}")
    ca_source, ca_key = mounted_file(settings.get("ORDERHOLD_REDIS_TLS_CA_FILE"), pod, c, "secret",
                                     "ORDERHOLD_REDIS_TLS_CA_FILE")
    if ca_source:
        ca_secret = secrets.get(ca_source.get("secretName"))
        if check(ca_secret is not None, "Secret of ORDERHOLD_REDIS_TLS_CA_FILE rendered"):
            keys = {**ca_secret.get("data", {}), **ca_secret.get("stringData", {})}
            check(ca_key in keys, f"Secret {ca_source.get('secretName')}: a key {ca_key} (the CA)")
    # The Redis password: a file of the Secret, mounted.
    source, key = mounted_file(settings.get("ORDERHOLD_REDIS_PASSWORD_FILE"), pod, c, "secret",
                               "ORDERHOLD_REDIS_PASSWORD_FILE")
    redis_secret_name = None
    if source:
        redis_secret_name = source.get("secretName")
        secret = secrets.get(redis_secret_name)
        if check(secret is not None, f"Secret {redis_secret_name} (the Redis password) rendered"):
            keys = {**secret.get("data", {}), **secret.get("stringData", {})}
            check(key in keys, f"Secret {redis_secret_name}: a key {key} (the password file)")
        check(source.get("defaultMode", 0o644) & 0o007 == 0,
              f"Secret {redis_secret_name}: mounted unreadable to others (defaultMode)")

    # Mutual TLS on the gRPC port: cert-manager's Secret (tls.crt, tls.key, ca.crt) mounted whole.
    tls_files = {"ORDERHOLD_TLS_CERT_FILE": "tls.crt", "ORDERHOLD_TLS_KEY_FILE": "tls.key",
                 "ORDERHOLD_TLS_CLIENT_CA_FILE": "ca.crt"}
    tls_secret_names = set()
    for name, wanted_key in tls_files.items():
        source, key = mounted_file(settings.get(name), pod, c, "secret", name)
        if source:
            check(key == wanted_key, f"{name}: the Secret's key {wanted_key}, got {key}")
            tls_secret_names.add(source.get("secretName"))
            check(source.get("optional") is not True,
                  f"{name}: the Secret is optional (the pods would start without TLS)")
            check(source.get("defaultMode", 0o644) & 0o007 == 0,
                  f"{name}: the Secret is mounted readable to others (defaultMode)")
    check(len(tls_secret_names) == 1,
          f"TLS: the three files from one Secret, got {sorted(map(str, tls_secret_names))}")
    tls_secret_name = next(iter(tls_secret_names), None)
    check(address_port(settings.get("ORDERHOLD_GRPC_ADDRESS")) == ports.get("grpc"),
          "ORDERHOLD_GRPC_ADDRESS: the container port grpc")
    check(address_port(settings.get("ORDERHOLD_METRICS_ADDRESS")) == ports.get("metrics"),
          "ORDERHOLD_METRICS_ADDRESS: the container port metrics")
    check(address_port(settings.get("ORDERHOLD_HEALTH_ADDRESS")) == ports.get("health"),
          f"ORDERHOLD_HEALTH_ADDRESS: the container port health, got "
          f"{settings.get('ORDERHOLD_HEALTH_ADDRESS')}")
    check(settings.get("ORDERHOLD_REFLECTION") == "false",
          f"ORDERHOLD_REFLECTION: false, got {settings.get('ORDERHOLD_REFLECTION')}")

    # The authorization policy: a ConfigMap without a name hash (an edit reaches the mounted file
    # and the server re-reads it), equal to deploy/authz_policy.example.json.
    source, key = mounted_file(settings.get("ORDERHOLD_AUTHZ_POLICY"), pod, c, "configMap",
                               "ORDERHOLD_AUTHZ_POLICY")
    if source:
        name = source.get("name")
        check(name == "orderhold-authz",
              f"authz policy: ConfigMap orderhold-authz (no content hash), got {name}")
        text = config_maps.get(name, {}).get("data", {}).get(key)
        with open(policy_path) as f:
            example = f.read()
        if check(text is not None, f"authz policy: ConfigMap {name} has key {key}"):
            try:
                check(json.loads(text) == json.loads(example),
                      "authz policy: differs from deploy/authz_policy.example.json")
            except ValueError as e:
                check(False, f"authz policy: not JSON: {e}")
            check(text == example, "authz policy: not byte for byte "
                  "deploy/authz_policy.example.json: run deploy/k8s/sync-rules.sh")

    # Every volume mount read-only and whole.
    for m in c.get("volumeMounts", []):
        check(m.get("readOnly") is True and not m.get("subPath"),
              f"volumeMount {m.get('mountPath')}: read-only, no subPath")

    # Services: select the pods, ports named so a mesh sees gRPC (HTTP/2).
    services = [o for o in base if o["kind"] == "Service"]
    check(len(services) >= 1, "a Service")
    for svc in services:
        name = svc["metadata"]["name"]
        selects(svc["spec"].get("selector", {}), pod_labels, f"Service {name}")
        svc_ports = {p.get("name"): p for p in svc["spec"]["ports"]}
        grpc = svc_ports.get("grpc")
        if check(grpc is not None, f"Service {name}: a port named grpc"):
            check(grpc.get("appProtocol") == "grpc", f"Service {name}: grpc appProtocol grpc")
        for port_name, p in svc_ports.items():
            target = p.get("targetPort", p["port"])
            check(target in ports or target in ports.values(),
                  f"Service {name}: port {port_name} targets a container port, got {target}")
            # Clients get the gRPC port only: the PodMonitor scrapes the pods' metrics port
            # directly, and the plaintext health port is the kubelet's.
            check(target in ("grpc", ports.get("grpc")),
                  f"Service {name}: port {port_name} ({target}) is not the gRPC port")
    one(base, "Service", "orderhold")

    check_network_policy(base, pod_labels, ports)

    pdb = one(base, "PodDisruptionBudget")
    check(pdb.get("spec", {}).get("minAvailable") == 1, "PodDisruptionBudget: minAvailable 1")
    selects(pdb.get("spec", {}).get("selector", {}), pod_labels, "PodDisruptionBudget")

    # Monitoring: the PodMonitor scrapes the pods' metrics port under the job the rules select.
    monitor = one(base, "PodMonitor")
    spec = monitor.get("spec", {})
    selects(spec.get("selector", {}), pod_labels, "PodMonitor")
    endpoints = spec.get("podMetricsEndpoints", [])
    check([e.get("port") for e in endpoints] == ["metrics"],
          "PodMonitor: scrapes the container port named metrics")
    check(all(e.get("path", "/metrics") == "/metrics" for e in endpoints), "PodMonitor: /metrics")
    job = pod_labels.get(spec.get("jobLabel", ""))
    check(job is not None, "PodMonitor: jobLabel names a pod label (the job the rules select)")

    with open(alerts_path) as f:
        alerts = yaml.safe_load(f)
    rule = one(base, "PrometheusRule")
    check(rule.get("spec", {}).get("groups") == alerts.get("groups"),
          "PrometheusRule: spec.groups differ from deploy/prometheus/alerts.yaml: run "
          "deploy/k8s/sync-rules.sh")
    for group in alerts.get("groups", []):
        for r in group.get("rules", []):
            for selected in re.findall(r'\bjob\s*=~?\s*"([^"]*)"', r.get("expr", "")):
                check(re.fullmatch(selected, job or ""),
                      f"rule {r.get('alert') or r.get('record')}: selects job {selected!r}, "
                      f"the PodMonitor's series have job {job!r}")

    # The example overlay: image, Secret and a setting replaced; everything in its namespace.
    overlay = load(overlay_path)
    if overlay:
        base_cm = config_maps.get(env_from[0].get("configMapRef", {}).get("name"), {}) \
            if env_from else {}
        check_overlay(overlay, redis_env_path, base_cm, tls_secret_name)

    for failure in failures:
        print(f"k8s_check: FAIL: {failure}")
    if failures:
        sys.exit(1)
    print(f"k8s_check: ok ({len(base)} objects in the base, {len(overlay)} in the overlay)")


def check_network_policy(base, pod_labels, ports):
    """Ingress to the pods: the gRPC port from labelled client pods, the metrics port from
    Prometheus, nothing else (the kubelet's probes come from the node, which a NetworkPolicy
    always lets in); egress: Redis and DNS only (check_egress)."""
    policies = [o for o in base if o["kind"] == "NetworkPolicy"]
    if not check(len(policies) == 1, f"one NetworkPolicy, found {len(policies)}"):
        return
    spec = policies[0]["spec"]
    selects(spec.get("podSelector", {}), pod_labels, "NetworkPolicy")
    check("Ingress" in spec.get("policyTypes", ["Ingress"]), "NetworkPolicy: policyTypes Ingress")
    by_name = {number: name for name, number in ports.items()}
    opened = {}  # container port name -> the peers let in
    for i, rule in enumerate(spec.get("ingress", [])):
        peers = rule.get("from", [])
        check(bool(peers), f"NetworkPolicy: ingress[{i}] without `from` lets every source in")
        check(bool(rule.get("ports")), f"NetworkPolicy: ingress[{i}] without `ports` opens all")
        for peer in peers:
            check("ipBlock" not in peer, f"NetworkPolicy: ingress[{i}] has an ipBlock")
            check(bool(peer.get("podSelector", {}).get("matchLabels")),
                  f"NetworkPolicy: ingress[{i}] peer {peer} selects pods by no label")
        for p in rule.get("ports", []):
            name = p.get("port") if p.get("port") in ports else by_name.get(p.get("port"))
            check(name is not None, f"NetworkPolicy: ingress[{i}] port {p} is no container port")
            opened.setdefault(name, []).extend(peers)
    check(set(opened) == {"grpc", "metrics"},
          f"NetworkPolicy: opens exactly the grpc and metrics ports, got {sorted(map(str, opened))}")
    for peer in opened.get("grpc", []):
        labels = peer.get("podSelector", {}).get("matchLabels", {})
        check(labels.get("orderhold.example/client") == "true",
              f"NetworkPolicy: grpc from pods labelled orderhold.example/client=true, got {peer}")
    for peer in opened.get("metrics", []):
        labels = peer.get("podSelector", {}).get("matchLabels", {})
        check(labels == {"app.kubernetes.io/name": "prometheus"},
              f"NetworkPolicy: metrics from Prometheus pods only, got {peer}")
    check_egress(spec)


# The ports the pods may reach: Redis over TLS, Sentinel, and DNS (not Redis' cleartext 6379).
REDIS_PORTS = {6380, 26379}


def check_egress(spec):
    """Egress from the pods: Redis' ports and DNS (to the cluster's resolver) only."""
    check("Egress" in spec.get("policyTypes", []), "NetworkPolicy: policyTypes Egress")
    rules = spec.get("egress", [])
    check(bool(rules), "NetworkPolicy: no egress rule (with policyTypes Egress, nothing goes out)")
    reached = set()
    for i, rule in enumerate(rules):
        ports = rule.get("ports", [])
        check(bool(ports), f"NetworkPolicy: egress[{i}] without `ports` opens every port")
        for p in ports:
            port = p.get("port")
            reached.add(port)
            if port == 53:
                peers = rule.get("to", [])
                check(bool(peers) and all(
                    peer.get("podSelector", {}).get("matchLabels") == {"k8s-app": "kube-dns"}
                    for peer in peers), f"NetworkPolicy: egress[{i}] DNS to kube-dns pods only")
            else:
                check(port in REDIS_PORTS, f"NetworkPolicy: egress[{i}] port {port} is not Redis'")
    check(53 in reached and 6380 in reached, f"NetworkPolicy: egress reaches Redis (TLS) and DNS, "
          f"got {sorted(map(str, reached))}")


def check_overlay(overlay, redis_env_path, base_cm, tls_secret_name):
    """deploy/k8s-example over the base: image, Secret, settings, the server's Certificate."""
    o_deployment = one(overlay, "Deployment", "orderhold")
    o_pod = o_deployment["spec"]["template"]["spec"]
    o_container = o_pod["containers"][0]
    check(o_container["image"] == "registry.example.com/platform/orderhold:1.0.0",
          f"overlay: image replaced, got {o_container['image']}")
    namespace = "orderhold"
    check(all(o["metadata"].get("namespace") == namespace for o in overlay),
          f"overlay: every object in namespace {namespace}")
    o_cm_name = o_container["envFrom"][0]["configMapRef"]["name"]
    o_cm = one(overlay, "ConfigMap", o_cm_name)
    o_settings = o_cm.get("data", {})
    url = "rediss://orderhold@redis-master.redis.svc:6380"
    check(o_settings == {**base_cm.get("data", {}), "ORDERHOLD_MAX_HOLDS": "5",
                         "ORDERHOLD_REDIS_URL": url},
          f"overlay: the ConfigMap is the base's with ORDERHOLD_MAX_HOLDS=5 and "
          f"ORDERHOLD_REDIS_URL={url}")
    # The Redis Secret: redis.env, and the password file the server reads is one of its keys.
    source, key = mounted_file(o_settings.get("ORDERHOLD_REDIS_PASSWORD_FILE"), o_pod,
                               o_container, "secret", "overlay: ORDERHOLD_REDIS_PASSWORD_FILE")
    o_secret = one(overlay, "Secret", (source or {}).get("secretName"))
    with open(redis_env_path) as f:
        wanted = dict(line.strip().split("=", 1) for line in f
                      if line.strip() and not line.startswith("#"))
    # redis-ca.crt beside redis.env, as the file ca.crt (ORDERHOLD_REDIS_TLS_CA_FILE).
    with open(os.path.join(os.path.dirname(redis_env_path), "redis-ca.crt")) as f:
        wanted["ca.crt"] = f.read()
    got = {k: base64.b64decode(v).decode() for k, v in o_secret.get("data", {}).items()}
    check(got == wanted and not o_secret.get("stringData"),
          f"overlay: the Secret holds redis.env and redis-ca.crt only, got keys {sorted(got)}")
    check(key in got, f"overlay: the Secret has the password file's key {key}")
    # The server's certificate: cert-manager writes the Secret the base mounts, with a SPIFFE ID
    # and the DNS names of the Services clients dial.
    certificates = [o for o in overlay if o["kind"] == "Certificate"]
    if check(len(certificates) == 1, f"overlay: one Certificate, found {len(certificates)}"):
        cert = certificates[0]
        spec = cert.get("spec", {})
        check(cert.get("apiVersion") == "cert-manager.io/v1", "overlay: Certificate cert-manager.io/v1")
        check(spec.get("secretName") == tls_secret_name,
              f"overlay: Certificate secretName {spec.get('secretName')} is not the mounted "
              f"TLS Secret {tls_secret_name}")
        check(spec.get("issuerRef", {}).get("name"), "overlay: Certificate has an issuerRef")
        check(any(u.startswith("spiffe://") for u in spec.get("uris", [])),
              "overlay: Certificate has a SPIFFE URI SAN")
        check("server auth" in spec.get("usages", ["server auth"]),
              "overlay: Certificate usable for server auth")
        for svc in (o for o in overlay if o["kind"] == "Service"):
            dns = f"{svc['metadata']['name']}.{namespace}.svc"
            check(dns in spec.get("dnsNames", []), f"overlay: Certificate names {dns}")
    for kind in ("PodMonitor", "PrometheusRule"):
        check(one(overlay, kind).get("metadata", {}).get("labels", {}).get("release")
              == "kube-prometheus-stack", f"overlay: {kind} labelled for Prometheus' selector")


if __name__ == "__main__":
    main()
