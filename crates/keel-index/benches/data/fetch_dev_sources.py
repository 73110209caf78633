#!/usr/bin/env python3
"""Fetches the source trees the development localization bench searches.

Each project is searched at a released version (the sdist on PyPI) close to the issue's
version; every `*_issues.jsonl` beside this script (`dev_issues.jsonl`, `heldout_issues.jsonl`)
names it in `sdist`. Third-party sources are never committed:
run this once, then pass the directory to the bench with `--trees DIR`.

    python3 crates/keel-index/benches/data/fetch_dev_sources.py /tmp/keel-dev-trees

Each sdist is unpacked to DIR/<name>-<version>/ (already unpacked ones are skipped).
"""
import json
import pathlib
import shutil
import sys
import tarfile
import urllib.parse
import urllib.request
import zipfile


def download(name: str, version: str, dl: pathlib.Path) -> pathlib.Path:
    """The release's sdist, straight from PyPI's file host (no build step: `pip download`
    prepares metadata, which fails for sdists whose build needs torch or an old setuptools)."""
    index = f"https://pypi.org/pypi/{name}/json"
    meta = json.load(urllib.request.urlopen(index, timeout=60))
    sdists = [f for f in meta["releases"].get(version, []) if f["packagetype"] == "sdist"]
    if not sdists:
        raise RuntimeError("no sdist on PyPI for this release")
    target = dl / sdists[0]["filename"]
    if not target.exists():
        tmp = target.with_suffix(".part")
        url = urllib.parse.urljoin(index, sdists[0]["url"])
        with urllib.request.urlopen(url, timeout=300) as r, open(tmp, "wb") as f:
            shutil.copyfileobj(r, f)
        tmp.rename(target)
    return target


def unpack(archive: pathlib.Path, out: pathlib.Path, want: str) -> None:
    """Unpacks into OUT/<name>-<version>/ (the archive's own top directory may be spelt
    `name_with_underscores-version`)."""
    staging = out / f"_unpack-{want}"
    shutil.rmtree(staging, ignore_errors=True)
    if archive.suffix == ".zip":
        zipfile.ZipFile(archive).extractall(staging)
    else:
        with tarfile.open(archive) as t:
            t.extractall(staging, filter="data")
    tops = list(staging.iterdir())
    src = tops[0] if len(tops) == 1 and tops[0].is_dir() else staging
    src.rename(out / want)
    shutil.rmtree(staging, ignore_errors=True)


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
        try:
            archive = download(name, version, dl)
        except Exception as e:  # noqa: BLE001 - reported per sdist, the others go on
            failed.append(spec)
            print(f"{spec}: download failed: {e}", file=sys.stderr)
            continue
        unpack(archive, out, f"{name}-{version}")
        print(f"{spec}: {archive.name}")
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
