#!/usr/bin/env bash
# tests/deploy/compose_config_test.sh: deploy/compose.yaml is a valid Compose file (Debian's
# docker-compose 1.29 parses and resolves it; `config` needs no Docker daemon) and says what the
# README promises: services redis, orderhold-1, orderhold-2, prometheus, grafana; Redis with AOF
# on a volume; both replicas built from deploy/Dockerfile (context: the repo root) as
# localhost/orderhold:dev, pointed at that Redis, gRPC and metrics ports published, a stop grace
# period longer than the server's 10 s drain; Prometheus loading deploy/prometheus/prometheus.yml
# and alerts.yaml, Grafana deploy/grafana/provisioning and orderhold.json; every file Compose
# mounts exists in the repository. The running part is tests/deploy/image_test.sh.
#
#   tests/deploy/compose_config_test.sh     (ctest -L deploy)
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="$(mktemp)"
trap 'rm -f "${out}"' EXIT
# Defaults only: no port or image variable of the caller's environment leaks in.
env -u DOCKER_HOST -u REDIS_IMAGE -u COMPOSE_PROJECT_NAME \
  timeout 60 docker-compose -f "${REPO}/deploy/compose.yaml" config >"${out}"

python3 - "${REPO}" "${out}" <<'PY'
import os
import sys

import yaml

repo, path = sys.argv[1], sys.argv[2]
with open(path) as f:
    config = yaml.safe_load(f)
problems = []


def want(condition, message):
    if not condition:
        problems.append(message)


services = config.get("services", {})
want(sorted(services) == ["grafana", "orderhold-1", "orderhold-2", "prometheus", "redis"],
     f"services are {sorted(services)}")


def mounts(service):
    """(source, target) of each volume entry ("src:dst[:mode]") of a service."""
    result = []
    for entry in services.get(service, {}).get("volumes", []):
        parts = entry.split(":")
        result.append((parts[0], parts[1]))
    return result


def duration_s(text):
    """Compose durations as docker-compose prints them ("15s", "1m30s")."""
    total, number = 0.0, ""
    for char in str(text):
        if char.isdigit() or char == ".":
            number += char
        else:
            total += float(number) * {"h": 3600, "m": 60, "s": 1}[char]
            number = ""
    return total


redis = services.get("redis", {})
command = " ".join(redis.get("command", []))
want("--appendonly yes" in command, f"redis command has no --appendonly yes: {command}")
want(any(target == "/data" and not source.startswith("/") for source, target in mounts("redis")),
     "redis has no named volume at /data")

for name in ("orderhold-1", "orderhold-2"):
    service = services.get(name, {})
    want(service.get("image") == "localhost/orderhold:dev", f"{name}: image {service.get('image')}")
    build = service.get("build", {})
    want(os.path.realpath(build.get("context", "")) == os.path.realpath(repo),
         f"{name}: build context {build.get('context')} is not the repo root")
    want(build.get("dockerfile") == "deploy/Dockerfile", f"{name}: dockerfile {build.get('dockerfile')}")
    env = service.get("environment", {})
    want(env.get("ORDERHOLD_REDIS_URL") == "redis://redis:6379",
         f"{name}: ORDERHOLD_REDIS_URL {env.get('ORDERHOLD_REDIS_URL')}")
    targets = sorted(str(port).split(":")[-1] for port in service.get("ports", []))
    want(targets == ["50051/tcp", "9464/tcp"], f"{name}: published container ports {targets}")
    want(duration_s(service.get("stop_grace_period", "10s")) > 10,
         f"{name}: stop_grace_period {service.get('stop_grace_period')} is not above the 10 s drain")

want(("%s/deploy/prometheus/prometheus.yml" % repo, "/etc/prometheus/prometheus.yml")
     in mounts("prometheus"), "prometheus does not load deploy/prometheus/prometheus.yml")
want(("%s/deploy/prometheus/alerts.yaml" % repo, "/etc/prometheus/alerts.yaml")
     in mounts("prometheus"), "prometheus does not load deploy/prometheus/alerts.yaml")
want(("%s/deploy/grafana/provisioning" % repo, "/etc/grafana/provisioning") in mounts("grafana"),
     "grafana does not mount deploy/grafana/provisioning")
want(any(source == "%s/deploy/grafana/orderhold.json" % repo for source, _ in mounts("grafana")),
     "grafana does not mount deploy/grafana/orderhold.json")

for name in services:
    for source, _ in mounts(name):
        if source.startswith("/"):
            want(os.path.exists(source), f"{name}: mounts {source}, which does not exist")

for problem in problems:
    print(f"compose_config_test: {problem}", file=sys.stderr)
sys.exit(1 if problems else 0)
PY
echo "compose_config_test: deploy/compose.yaml OK"
