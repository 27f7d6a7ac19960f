"""Lighthouse's accessibility, best-practices and performance scores for every page of a built book, offline.

The build is served on 127.0.0.1 as a reader's server should serve it (tests/browser_audit.py's ``serve()``,
under /course/: scripts/serve_book.py's handler, which sends the build's gzip copies to a browser that
accepts them, with caching headers; from bench/results/lighthouse-compressed.* on, the earlier results
were served uncompressed by http.server) and each page is
audited by Lighthouse 12 (pinned in bench/lighthouse/package.json) in the Debian Chromium, with
Lighthouse's default simulated throttling: the mobile form factor (an emulated phone, Lighthouse's
default) and, unless --mobile-only, the desktop preset. Per page and form factor it records the three
scores, the accessibility and best-practices audits that fail (score < 1) with the elements they name,
the bytes the page loads (Lighthouse's total-byte-weight, and the same files' sizes on disk), and the
load average beside each figure.

  npm ci --prefix bench/lighthouse
  .venv/bin/python bench/lighthouse_pages.py [HTML_DIR] --label after

Writes bench/results/lighthouse-<label>.json and .md, and prints the table.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from browser_audit import CHROMIUM, CHROMIUM_ARGS, pages_of, serve  # noqa: E402

LIGHTHOUSE = ROOT / "bench" / "lighthouse" / "node_modules" / ".bin" / "lighthouse"
CATEGORIES = ["performance", "accessibility", "best-practices"]
CHECKED = ["accessibility", "best-practices"]  # whose failing audits are listed
MAX_ITEMS = 25  # elements listed per failing audit
# The measures the performance score is made of (ms, but CLS): FCP, LCP, TBT, CLS, Speed Index.
METRICS = ["first-contentful-paint", "largest-contentful-paint", "total-blocking-time", "cumulative-layout-shift",
           "speed-index"]


def run_lighthouse(url: str, form_factor: str) -> dict:
    """Lighthouse's JSON result (LHR) for one page."""
    command = [str(LIGHTHOUSE), url, "--output=json", "--output-path=stdout", "--quiet",
               f"--only-categories={','.join(CATEGORIES)}", f"--chrome-flags={' '.join(CHROMIUM_ARGS)}"]
    if form_factor == "desktop":
        command.append("--preset=desktop")
    result = subprocess.run(command, capture_output=True, text=True, timeout=600,
                            env={**os.environ, "CHROME_PATH": CHROMIUM})
    if result.returncode != 0:
        raise RuntimeError(f"lighthouse failed on {url}: {result.stderr[-2000:]}")
    return json.loads(result.stdout)


def item_summary(item: dict) -> dict:
    """What a reader of the report needs to find the element or resource an audit names."""
    node = item.get("node") if isinstance(item.get("node"), dict) else item
    keep = {k: node[k] for k in ("selector", "snippet", "nodeLabel", "explanation") if node.get(k)}
    for key in ("url", "scriptUrl", "sourceMapUrl", "source", "sourceLocation", "description", "label", "value"):
        value = item.get(key)
        if isinstance(value, (str, int, float)) and value != "":
            keep[key] = value
        elif isinstance(value, dict) and value.get("type") == "source-location":
            keep[key] = f"{value.get('url')}:{value.get('line')}:{value.get('column')}"
    sub_items = (item.get("subItems") or {}).get("items") or []
    if sub_items:
        keep["sub_items"] = [s.get("error") or s for s in sub_items[:5]]
    return keep


def failing_audits(lhr: dict) -> dict[str, list[dict]]:
    """Per checked category, its audits with a score below 1 (not-applicable and manual ones have none)."""
    failing = {}
    for category in CHECKED:
        failing[category] = []
        for ref in lhr["categories"][category]["auditRefs"]:
            audit = lhr["audits"][ref["id"]]
            if audit["score"] is None or audit["score"] >= 1:
                continue
            items = (audit.get("details") or {}).get("items") or []
            failing[category].append({
                "id": ref["id"], "title": audit["title"], "score": audit["score"], "weight": ref["weight"],
                "display": audit.get("displayValue", ""),
                "items": [item_summary(i) for i in items[:MAX_ITEMS]], "item_count": len(items),
            })
    return failing


def bytes_loaded(lhr: dict, base: str, html_dir: Path) -> dict:
    """Transferred bytes (Lighthouse's total-byte-weight), decoded bytes, and the loaded files' sizes on disk."""
    requests = lhr["audits"]["network-requests"]["details"]["items"]
    on_disk, outside = set(), []
    for request in requests:
        url = request["url"].split("#")[0]
        if url.startswith(base):
            path = html_dir / unquote(urlsplit(url).path[len(urlsplit(base).path):])
            on_disk.add(path / "index.html" if path.is_dir() else path)
        elif not url.startswith(("data:", "blob:")):
            outside.append(url)
    return {
        "transferred": lhr["audits"]["total-byte-weight"]["numericValue"],
        "decoded": sum(r.get("resourceSize") or 0 for r in requests),
        "files_on_disk": sum(p.stat().st_size for p in on_disk if p.is_file()),
        "requests": len(requests),
        "outside_requests": outside,  # should stay empty: the book is served whole from its build
    }


def audit(html_dir: Path, pages: list[str], form_factors: list[str]) -> dict:
    results = []
    with serve(html_dir) as base:
        for page in pages:
            for form_factor in form_factors:
                load_before = os.getloadavg()
                lhr = run_lighthouse(base + page, form_factor)
                entry = {
                    "page": page, "form_factor": form_factor, "final_url": lhr["finalDisplayedUrl"],
                    "scores": {c: lhr["categories"][c]["score"] for c in CATEGORIES},
                    "bytes": bytes_loaded(lhr, base, html_dir),
                    "failing": failing_audits(lhr),
                    "metrics": {m: (lhr["audits"].get(m) or {}).get("numericValue") for m in METRICS},
                    "runtime_error": (lhr.get("runtimeError") or {}).get("message"),
                    "load_average": {"before": load_before, "after": os.getloadavg()},
                }
                results.append(entry)
                print(f"{page} {form_factor}: {entry['scores']} load {load_before[0]:.2f}", flush=True)
    settings = lhr["configSettings"]
    return {
        "html_dir": str(html_dir),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "lighthouse": lhr["lighthouseVersion"],
        "chromium": subprocess.run([CHROMIUM, "--version"], capture_output=True, text=True).stdout.strip(),
        "browser_user_agent": lhr["environment"]["hostUserAgent"],
        "throttling_method": settings["throttlingMethod"],
        "throttling": settings["throttling"],
        "chrome_flags": CHROMIUM_ARGS,
        "cpus": os.cpu_count(),
        "pages": results,
    }


def score(value) -> str:
    return "-" if value is None else f"{round(value * 100)}"


def seconds(ms) -> str:
    return "-" if ms is None else f"{ms / 1000:.2f}"


def milliseconds(ms) -> str:
    return "-" if ms is None else f"{ms:.0f}"


def markdown(report: dict, label: str) -> str:
    lines = [
        f"# Lighthouse, {label}: {report['html_dir']}",
        "",
        f"{report['date']}; Lighthouse {report['lighthouse']}, {report['chromium']}; throttling "
        f"{report['throttling_method']} (Lighthouse's default); {report['cpus']} CPUs. Bytes: transferred "
        "(total-byte-weight) / the same files on disk; load average (1 min) when the page's run began. Failing audits in brackets "
        "weigh nothing in the score.",
        "",
        "| page | form | perf | a11y | best pr. | FCP s | LCP s | TBT ms | KB transferred | KB on disk | requests | load | failing audits |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for e in report["pages"]:
        s, b, m = e["scores"], e["bytes"], e.get("metrics") or {}
        failing = ", ".join(a["id"] if a["weight"] else f"({a['id']})"
                            for c in CHECKED for a in e["failing"][c]) or "none"
        lines.append(
            f"| {e['page']} | {e['form_factor']} | {score(s['performance'])} | {score(s['accessibility'])} "
            f"| {score(s['best-practices'])} | {seconds(m.get('first-contentful-paint'))} "
            f"| {seconds(m.get('largest-contentful-paint'))} | {milliseconds(m.get('total-blocking-time'))} "
            f"| {b['transferred'] / 1024:.0f} | {b['files_on_disk'] / 1024:.0f} "
            f"| {b['requests']} | {e['load_average']['before'][0]:.2f} | {failing} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("html_dir", nargs="?", type=Path, default=ROOT / "_build" / "html")
    parser.add_argument("--label", required=True, help="names the results, e.g. before or after")
    parser.add_argument("--mobile-only", action="store_true", help="skip the desktop preset")
    parser.add_argument("--desktop-only", action="store_true", help="skip the mobile form factor")
    parser.add_argument("--pages", nargs="*", help="only these pages (paths relative to HTML_DIR)")
    args = parser.parse_args()
    if not LIGHTHOUSE.exists():
        sys.exit("Lighthouse is not installed: run `npm ci --prefix bench/lighthouse`")
    if not (args.html_dir / "index.html").is_file():
        sys.exit(f"no built book in {args.html_dir}: run `make book` first")

    html_dir = args.html_dir.resolve()
    pages = args.pages or pages_of(html_dir)
    form_factors = ["mobile"] if args.mobile_only else ["desktop"] if args.desktop_only else ["mobile", "desktop"]
    report = audit(html_dir, pages, form_factors)
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"lighthouse-{args.label}.json").write_text(json.dumps(report, indent=1) + "\n")
    table = markdown(report, args.label)
    (out / f"lighthouse-{args.label}.md").write_text(table)
    print(table)


if __name__ == "__main__":
    main()
