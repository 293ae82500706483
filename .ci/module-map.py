#!/usr/bin/env python3
"""`make lint`: every target in Package.swift declares exactly the modules its Swift sources import, and the
README's module map (the block after "<!-- module map -->") lists exactly the dependencies among our own Swift
targets. Prints each difference and exits 1 when there is one; `--print` prints the map as the README holds it."""
import json
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
# The toolchain's and the platform's modules: never a package dependency.
SYSTEM = {"Foundation", "FoundationEssentials", "Glibc", "Darwin", "Dispatch", "Synchronization", "Testing", "XCTest"}
IMPORT = re.compile(r"^\s*(?:@testable\s+|@_exported\s+)?import\s+(?:(?:struct|class|enum|protocol|func|var|typealias)\s+)?([A-Za-z_][A-Za-z0-9_]*)", re.M)


def module_name(target):
    return target.replace("-", "_")


def target_path(target):
    if target.get("path"):
        return ROOT / target["path"]
    return ROOT / ("Tests" if target["type"] == "test" else "Sources") / target["name"]


def dependency_names(target):
    names = []
    for dependency in target["dependencies"]:
        kind, value = next(iter(dependency.items()))
        names.append(module_name(value[0]))
    return set(names)


def imports(path, excluded):
    found = set()
    for source in path.rglob("*.swift"):
        if any(part in excluded for part in source.relative_to(path).parts):
            continue
        # Multi-line string literals hold other languages (a test's Python script), whose imports are not ours.
        text = re.sub(r'"""(?s:.*?)"""', "", source.read_text(encoding="utf-8"))
        found.update(IMPORT.findall(text))
    return found - SYSTEM


def readme_map():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    marker = text.find("<!-- module map -->")
    if marker < 0:
        return None
    block = text[marker:].split("```", 2)[1]
    edges = {}
    for line in block.splitlines()[1:]:
        if "→" not in line:
            continue
        name, _, rest = line.partition("→")
        edges[name.strip()] = {part.strip() for part in rest.split("#")[0].split(",") if part.strip()}
    return edges


def main():
    package = json.loads(subprocess.check_output(["swift", "package", "dump-package"], cwd=ROOT, text=True))
    problems = []
    ours = {}
    for target in package["targets"]:
        if target["type"] == "system":
            continue
        path = target_path(target)
        if not any(path.rglob("*.swift")):
            continue
        declared = dependency_names(target)
        imported = imports(path, set(target.get("exclude", [])))
        for missing in sorted(imported - declared):
            problems.append(f"{target['name']}: imports {missing}, which Package.swift does not list")
        for unused in sorted(declared - imported):
            problems.append(f"{target['name']}: Package.swift lists {unused}, which no source imports")
        if target["type"] != "test" and target["name"] != "XignTestSupport":
            ours[target["name"]] = declared
    internal = {name: {d for d in deps if d in {module_name(n) for n in ours}} for name, deps in ours.items()}
    # Our own Swift modules only; C shims and other packages are left out of the drawing.
    internal = {name: {d for d in deps if not d.startswith("C")} for name, deps in internal.items() if not name.startswith("C")}
    if "--print" in sys.argv:
        for name in sorted(internal, key=lambda n: (n[0].islower(), n)):
            print(f"{name} → {', '.join(sorted(internal[name])) or '(none)'}")
        return 0
    drawn = readme_map()
    if drawn is None:
        problems.append("README.md: no '<!-- module map -->' block")
    else:
        drawn = {name: deps - {"(none)"} for name, deps in drawn.items()}
        for name in sorted(set(internal) | set(drawn)):
            if internal.get(name) != drawn.get(name):
                problems.append(
                    f"README.md module map: {name} → {', '.join(sorted(drawn.get(name, []))) or '(missing)'}; "
                    f"Package.swift says {', '.join(sorted(internal.get(name, []))) or '(no such target)'}")
    for problem in problems:
        print(problem)
    if problems:
        print("fix Package.swift or the sources; `python3 .ci/module-map.py --print` prints the README's map")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
