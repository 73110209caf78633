#!/usr/bin/env python3
"""Fetches the source trees the development localization bench searches.

Each project is searched at a released version (the sdist on PyPI) close to the issue's
version; every `*_issues.jsonl` beside this script (`dev_issues.jsonl`, `heldout_issues.jsonl`)
names it in `sdist`. Third-party sources are never committed:
run this once, then pass the directory to the bench with `--dev DIR`.

    python3 crates/keel-index/benches/data/fetch_dev_sources.py /tmp/keel-dev-trees

Each sdist is unpacked to DIR/<name>-<version>/ (already unpacked ones are skipped).
"""
import json
import pathlib
import subprocess
import sys
import tarfile
import zipfile


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    here = pathlib.Path(__file__).resolve().parent
    wanted = set()
    for issues in sorted(here.glob("*_issues.jsonl")):
        for line in issues.read_text().splitlines():
            if line.strip():
                wanted.add(json.loads(line)["sdist"])
    dl = out / "_sdists"
    dl.mkdir(exist_ok=True)
    failed = []
    for spec in sorted(wanted):
        name, version = spec.split("==")
        if any(out.glob(f"{name}-{version}")) or any(out.glob(f"{name.lower()}-{version}")):
            continue
        r = subprocess.run(
            [sys.executable, "-m", "pip", "download", spec, "--no-deps",
             "--no-binary", ":all:", "-q", "-d", str(dl)],
            capture_output=True, text=True)
        archive = next(
            (p for p in dl.iterdir()
             if p.name.lower().startswith(f"{name.lower()}-{version}".replace("-", "_"))
             or p.name.lower().startswith(f"{name.lower()}-{version}")), None)
        if archive is None:
            failed.append(spec)
            print(f"{spec}: download failed: {r.stderr.strip()[-300:]}", file=sys.stderr)
            continue
        if archive.suffix == ".zip":
            zipfile.ZipFile(archive).extractall(out)
        else:
            with tarfile.open(archive) as t:
                t.extractall(out, filter="data")
        print(f"{spec}: {archive.name}")
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
