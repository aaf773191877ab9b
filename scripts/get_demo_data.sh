#!/usr/bin/env bash
# Extracts the public-domain training text of the bundled demo model (models/dserve-demo) from Debian
# packages into .demo_data/ (git-ignored): the KJV Bible, the GCIDE dictionary and the fortune cookies.
# Usage: bash scripts/get_demo_data.sh [OUT_DIR]   (installs the packages when missing; needs root or sudo)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-.demo_data}"
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
# bible-kjv is the reader program for bible-kjv-text (its data file is compressed in its own format).
PKGS=(bible-kjv bible-kjv-text dict-gcide fortunes fortunes-min python3)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "get_demo_data: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
mkdir -p "$OUT"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# -l0: one verse per line, no wrapping. Output: "Genesis 1" headings, then "  N text" verse lines.
bible -l0 "Gen1:1-Rev22:21" </dev/null >"$tmp/bible.txt" 2>/dev/null

python3 - "$tmp/bible.txt" "$OUT" <<'PY'
"""Writes bible.tsv.gz (book, chapter, verse, text), gcide.tsv.gz (headword, cleaned entry) and
fortunes.txt.gz (entries separated by a line '%'), all UTF-8, deterministic (sorted inputs, fixed mtime)."""
import base64, gzip, io, os, re, sys, zlib

bible_txt, out = sys.argv[1], sys.argv[2]


def write_gz(name, text):
    path = os.path.join(out, name)
    with open(path, "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as f:
            f.write(text.encode("utf-8"))
    print(f"get_demo_data: {path} ({len(text) / 1e6:.1f} MB of text, {os.path.getsize(path) / 1e6:.1f} MB gz)")


# --- Bible ---------------------------------------------------------------------------------------
rows, book, chap = [], None, None
for line in open(bible_txt, encoding="utf-8", errors="strict"):
    line = line.rstrip("\n")
    if not line.strip():
        continue
    m = re.match(r"^(\S.*?) (\d+)$", line)
    if m and not line.startswith(" "):
        book, chap = m.group(1), int(m.group(2))
        continue
    m = re.match(r"^\s+(\d+) (.*)$", line)
    if m and book:
        rows.append(f"{book}\t{chap}\t{int(m.group(1))}\t{' '.join(m.group(2).split())}")
    elif rows:  # a wrapped verse continues the previous one
        rows[-1] += " " + " ".join(line.split())
assert len(rows) > 31000, f"bible: only {len(rows)} verses parsed"
write_gz("bible.tsv.gz", "\n".join(rows) + "\n")

# --- GCIDE (dictd format: gcide.index gives word, base64 offset, base64 length into the .dict) -------
B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def b64num(s):
    n = 0
    for ch in s:
        n = n * 64 + B64.index(ch)
    return n


with gzip.open("/usr/share/dictd/gcide.dict.dz", "rb") as f:  # dictzip is gzip-compatible
    data = f.read()
seen, entries = set(), []
for line in open("/usr/share/dictd/gcide.index", encoding="utf-8"):
    parts = line.rstrip("\n").split("\t")
    if len(parts) != 3 or parts[0].startswith("00-database"):
        continue
    off, ln = b64num(parts[1]), b64num(parts[2])
    if off in seen:
        continue
    seen.add(off)
    entries.append((off, ln))
entries.sort()


def clean_entry(raw):
    text = raw.decode("utf-8", errors="replace")
    if "\ufffd" in text:
        return None
    lines = text.strip().split("\n")
    head = lines[0]
    word = re.split(r"\s*\\", head, maxsplit=1)[0].strip()  # "Abdomen \Ab*do"men\, n. [...]"
    if not word or not re.fullmatch(r"[A-Za-z][A-Za-z '\-]*", word):
        return None
    body = " ".join(" ".join(lines).split())
    body = re.sub(r"\\[^\\]*\\", "", body)          # pronunciation \Ab*do"men\
    body = re.sub(r"\[[^\[\]]*\]", "", body)        # etymology and source tags [L. ...] [1913 Webster]
    body = body.replace("{", "").replace("}", "")
    body = re.sub(r"\s+([,.;:])", r"\1", body)
    body = " ".join(body.split()).strip()
    if not body.startswith(word) or len(body) < len(word) + 12:
        return None
    if len(body) > 1200:  # the longest entries run to pages; keep their first senses
        cut = body.rfind(". ", 0, 1200)
        body = body[:cut + 1] if cut > 200 else body[:1200]
    return word, body


rows = []
for i, (off, ln) in enumerate(entries):
    if i % 2:  # every second entry: enough dictionary prose, half the size
        continue
    r = clean_entry(data[off:off + ln])
    if r:
        rows.append(f"{r[0]}\t{r[1]}")
assert len(rows) > 20000, f"gcide: only {len(rows)} entries"
write_gz("gcide.tsv.gz", "\n".join(rows) + "\n")

# --- fortunes --------------------------------------------------------------------------------------
FDIR = "/usr/share/games/fortunes"
SKIP = {"art", "ascii-art"}  # ASCII drawings are not text
items = []
for name in sorted(os.listdir(FDIR)):
    p = os.path.join(FDIR, name)
    if name in SKIP or "." in name or os.path.islink(p) or not os.path.isfile(p):
        continue
    raw = open(p, "rb").read()
    for chunk in re.split(rb"\n%\n", raw):
        try:
            t = chunk.decode("utf-8")
        except UnicodeDecodeError:
            continue
        t = re.sub(r".\x08", "", t)  # overstrike (underline/bold) sequences
        t = "\n".join(l.rstrip() for l in t.strip("\n").split("\n")).strip()
        if not t or len(t) > 800 or any(ord(c) < 32 and c not in "\n\t" for c in t):
            continue
        items.append(t.replace("\t", "    "))
assert len(items) > 5000, f"fortunes: only {len(items)} entries"
write_gz("fortunes.txt.gz", "\n%\n".join(items) + "\n")
PY
ls -la "$OUT"
