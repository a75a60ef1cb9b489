"""Write .ci/constraints.txt from the JSON report of a resolution (pip install --dry-run --report).

    python .ci/lock.py report.json > .ci/constraints.txt

Every package the report would install, but engine itself, becomes one ``name==version`` line
under the header below (how to refresh the file is part of it).
"""

import json
import sys

HEADER = r"""# The versions CI and README's commands install: every package that
#   pip install -e '.[test,bench,plot,cuda,distributed,torch]'
# resolves to on Linux x86_64 / CPython 3.11, one line each, so that any pip (the 23.2 a fresh
# `python3 -m venv` brings included) installs the same set without backtracking, whatever the
# registry has published since. torch==2.13.0 also matches a local CPU build (2.13.0+cpu); its
# CUDA build and numba-cuda[cu13] meet on cuda-toolkit 13.0.3. tests/test_constraints.py checks
# that every requirement of pyproject.toml is pinned here within its bounds.
#
# Refresh (after changing pyproject.toml's dependencies), with a current pip in a scratch venv:
#   python -m pip install --upgrade pip
#   python -m pip install --dry-run --ignore-installed --report report.json \
#       -c .ci/constraints.txt -e '.[test,bench,plot,cuda,distributed,torch]'
#   python .ci/lock.py report.json > .ci/constraints.txt
# (drop a line from the -c file first to let that package move), then run the tests.
"""


def lock(report: dict) -> str:
    pins = sorted((item["metadata"]["name"].lower().replace("_", "-"), item["metadata"]["version"])
                  for item in report["install"] if item["metadata"]["name"] != "engine")
    return HEADER + "".join(f"{name}=={version}\n" for name, version in pins)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    with open(sys.argv[1], encoding="utf-8") as file:
        sys.stdout.write(lock(json.load(file)))
