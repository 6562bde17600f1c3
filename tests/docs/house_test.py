#!/usr/bin/env python3
"""tests/docs/house_test.py: the shape of the house, checked (ctest docs_house).

  1. No C++ of the store (server/store/, where the scripts are called) reads a script's arguments
     or reply by position: no `ARGV[<n>]` and no `elements[<n>]` (a script's contract is named in
     its header: server/store/lua/scripts.cmake). The Redis client (server/redis/) reads Redis'
     own replies (CLUSTER SLOTS, ROLE, pub/sub messages), whose shapes the Redis docs give by
     position.
  2. place_hold takes at most 10 ARGV (server/store/lua/scripts.txt).
  3. server/domain/hold_service.cc has at most 500 lines; each prelude file
     (server/store/lua/prelude/*.lua) at most 250.
  4. The store's three interfaces each have their own header: HoldStore in store/hold_store.h,
     PartitionStore in store/partition_store.h, HoldEventLog in store/event_log.h.
  5. No function under server/ is longer than 80 lines, counted from the first line of its
     signature (at column 0: not a namespace, class, struct, enum, using or data table "= {") to
     the next "}" at column 0. Data tables are exempt, as the style guide allows (DATA_TABLES:
     functions that are one table); functions defined inside a class body are not measured.
Exit 1 naming each breach.
"""
import pathlib
import re
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]
SERVER = REPO / "server"
MAX_FUNCTION_LINES = 80
# Functions whose body is one data table, by their first line.
DATA_TABLES = {
    "const std::vector<Setting>& Settings() {",  # server/config.cc: the flag table
    "Metrics::Metrics(prometheus::Registry& registry)",  # server/metrics/metrics.cc: the families
}
failures = []


def sources():
    for path in sorted(SERVER.rglob("*")):
        if path.suffix in (".cc", ".h") and path.is_file():
            yield path


def positional_reads():
    pattern = re.compile(r"\b(ARGV|elements)\[\s*\d")
    for path in sources():
        if SERVER / "store" not in path.parents:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if pattern.search(line):
                failures.append(f"{path.relative_to(REPO)}:{number}: positional read: {line.strip()}")


def place_hold_argv():
    for line in (SERVER / "store/lua/scripts.txt").read_text().splitlines():
        fields = line.split()
        if fields and fields[0] == "place_hold":
            argv = int(fields[2].rstrip("+"))
            if argv > 10:
                failures.append(f"server/store/lua/scripts.txt: place_hold takes {argv} ARGV (at most 10)")
            return
    failures.append("server/store/lua/scripts.txt: no place_hold")


def file_sizes():
    limits = [(SERVER / "domain/hold_service.cc", 500)]
    limits += [(p, 250) for p in sorted((SERVER / "store/lua/prelude").glob("*.lua"))]
    for path, limit in limits:
        lines = len(path.read_text().splitlines())
        if lines > limit:
            failures.append(f"{path.relative_to(REPO)}: {lines} lines (at most {limit})")


def interfaces():
    for header, name in [("hold_store.h", "HoldStore"), ("partition_store.h", "PartitionStore"),
                         ("event_log.h", "HoldEventLog")]:
        path = SERVER / "store" / header
        if not path.exists() or not re.search(rf"^class {name}\b", path.read_text(), re.M):
            failures.append(f"server/store/{header}: does not declare class {name}")


def function_lengths():
    skip = re.compile(r"^(namespace|class|struct|enum|union|extern|using|typedef|template\s*<[^>]*>\s*"
                      r"(class|struct)|[}#/])")
    for path in sources():
        start, in_body = None, False
        lines = path.read_text().splitlines()
        for number, line in enumerate(lines, 1):
            stripped = line.rstrip()
            if in_body:
                if line.startswith("}"):
                    length = number - start + 1
                    if length > MAX_FUNCTION_LINES and lines[start - 1] not in DATA_TABLES:
                        failures.append(f"{path.relative_to(REPO)}:{start}: a function of {length} "
                                        f"lines (at most {MAX_FUNCTION_LINES})")
                    start, in_body = None, False
                continue
            if start is None:
                if not line or line[0].isspace() or skip.match(line):
                    continue
                start = number
            if stripped.endswith(";") or re.search(r"=\s*\{$", stripped):
                start = None  # a declaration, or a data table (exempt)
            elif stripped.endswith("{"):
                in_body = True


positional_reads()
place_hold_argv()
file_sizes()
interfaces()
function_lengths()
for failure in failures:
    print(failure, file=sys.stderr)
sys.exit(1 if failures else 0)
