#!/usr/bin/env python3
# Makes tests/data/tokenizer_golden.json: reference encodings/decodings of the real DeepSeek-V3
# tokenizer by the Rust `tokenizers` library (Tokenizer.from_file, never AutoTokenizer), for the C++
# tokenizer tests. Seeded and deterministic; runs on the device machine (it has `tokenizers`).
#
#   python3 scripts/make_tokenizer_golden.py --tokenizer-dir DIR --out tests/data/tokenizer_golden.json
#   python3 scripts/make_tokenizer_golden.py --tokenizer-dir DIR --bench-corpus corpus.json --bench-mb 8
#   python3 scripts/make_tokenizer_golden.py --tokenizer-dir DIR --bench-time corpus.json
#   python3 scripts/make_tokenizer_golden.py --unicode-classes tests/data/tokenizer_unicode_classes.json
import argparse
import hashlib
import json
import os
import random
import sys
import time

SEED = 20240531


# ----------------------------------------------------------------------------------------------
# String generators
# ----------------------------------------------------------------------------------------------
EN_WORDS = (
    "the of and to in is was that for it with as his on be at by had are but from or have an they "
    "which one you were her all she there would their we him been has when who will more no if out so "
    "said what up its about into than them can only other new some could time these two may then do "
    "first any my now such like our over man me even most made after also did many before must through "
    "back years where much your way well down should because each just those people Mr how too little "
    "state good very make world still own see men work long get here between both life being under "
    "never day same another know while last might us great old year off come since against go came "
    "right used take three don't I'm we're it's you'll they've he'd can't won't isn't O'Neil "
    "rock'n'roll e.g. i.e. U.S.A. co-operate state-of-the-art email@example.com https://example.org/a?b=c "
    "naïve café résumé coöperate Zürich façade jalapeño Ångström"
).split()

CODE_SNIPPETS = [
    "def {f}(x, y=None):\n    \"\"\"Return the {w}.\"\"\"\n    if y is None:\n        return x\n    return x + y\n",
    "for (int i = 0; i < {n}; ++i) {{\n\tsum += a[i] * b[i];\n}}\n",
    "#include <vector>\nint main() {{ std::vector<int> v{{{n}, 2, 3}}; return v.size(); }}\n",
    "const {f} = async (req, res) => {{ await db.query(`SELECT * FROM t WHERE id=${{req.id}}`); }};\r\n",
    "{{\"name\": \"{w}\", \"value\": {n}, \"tags\": [\"a\", \"b\"], \"nested\": {{\"k\": null}}}}",
    "<div class=\"{w}\"><a href=\"/x?y={n}&z=1\">link</a></div>\n",
    "SELECT {w}, COUNT(*) FROM users WHERE age >= {n} GROUP BY {w} ORDER BY 2 DESC;",
    "fn {f}(&mut self, v: Vec<u8>) -> Result<(), Box<dyn Error>> {{ Ok(()) }}",
    "    x = np.array([[1.5e-3, -2.0], [3, 4]])  # shape ({n}, 2)\n",
    "if [[ -f \"$HOME/.{w}rc\" ]]; then\n  source \"$HOME/.{w}rc\"\nfi\n",
    "matrix[i][j] += alpha*beta;//TODO: fix {w}\n\n\n",
    "__init__ __name__ == '__main__' self.{f}_{w}()",
    "x+=1;y-=2;z*=3;w/=4;a%=5;b<<=6;c>>=7;d&=8;e|=9;f^=10;",
    "λx.λy.x ≠ y ∧ ∀z ∈ ℝ: z² ≥ 0 → √(z²) = |z|",
]

GREEK = "Αλφα βήτα γάμμα δέλτα Ελλάδα φιλοσοφία ψυχή ωκεανός Ἀθῆναι ΣΊΣΥΦΟΣ".split()
CYRILLIC = "Привет мир Москва ЁЛКА съешь ещё этих мягких французских булок да выпей чаю Україна ґанок".split()
ARABIC_HEBREW = "مرحبا بالعالم السلام عليكم שלום עולם עִבְרִית".split()
INDIC_THAI = "नमस्ते दुनिया हिन्दी ক্ষ தமிழ் ภาษาไทย สวัสดีครับ".split()
EMOJI = ["😀", "😂", "❤️", "👍", "🎉", "🔥", "✨", "🙏", "🤔", "👀", "🇯🇵", "🇺🇸", "🏳️‍🌈", "👨‍👩‍👧‍👦",
         "👩🏽‍💻", "🧑🏿‍🤝‍🧑🏻", "👋🏻", "👋🏼", "👋🏽", "👋🏾", "👋🏿", "1️⃣", "#️⃣", "☺", "☺️", "⚠️",
         "🫠", "🪿", "🦀", "🐍", "👁️‍🗨️", "🧔‍♀️", "🏴󠁧󠁢󠁳󠁣󠁴󠁿"]
ZH_PUNCT = "，。！？、；：「」『』（）《》【】…—·"
JA_EXTRA = "ー・。、「」ｱｲｳｴｵｶﾞﾊﾟ"
WS_UNITS = [" ", "  ", "\t", "\n", "\r\n", "\r", "\n\n", " \n", "\t\n", "\u00a0", "\u3000", "\u2028",
            "\u2029", "\u0085", "\u000b", "\u000c", "\u180e", "\u200b", "\u202f", "\u205f", "\u1680",
            "\u2003", "\u001c", "\u001f", "\ufeff"]
UNI_DIGITS = ["٠١٢٣", "۴۵۶", "०१२", "০১২৩", "０１２３４５", "²³¹", "½¾⅓", "ⅠⅡⅫ", "①②⑳", "𝟘𝟙𝟚", "〇", "〡〢"]
PUNCT = list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") + ["…", "—", "–", "«", "»", "“", "”", "‘", "’", "¿", "¡",
                                                       "•", "©", "®", "™", "€", "£", "¥", "§", "¶", "°", "±",
                                                       "×", "÷", "→", "⇒", "∞", "≈", "♥", "★", "☆", "♪"]


def cjk(rng, n, lo=0x4E00, hi=0x9FFF):
    return "".join(chr(rng.randint(lo, hi)) for _ in range(n))


def hira(rng, n):
    return "".join(chr(rng.randint(0x3041, 0x3096)) for _ in range(n))


def kata(rng, n):
    return "".join(chr(rng.randint(0x30A1, 0x30FA)) for _ in range(n))


def hangul(rng, n):
    return "".join(chr(rng.randint(0xAC00, 0xD7A3)) for _ in range(n))


def digits(rng, n):
    return "".join(rng.choice("0123456789") for _ in range(n))


def english(rng, nwords):
    out = []
    for i in range(nwords):
        w = rng.choice(EN_WORDS)
        r = rng.random()
        if r < 0.1:
            w = w.capitalize()
        elif r < 0.13:
            w = w.upper()
        out.append(w)
        r = rng.random()
        if r < 0.08:
            out.append(rng.choice([",", ".", "!", "?", ";", ":"]))
        out.append(" " if rng.random() < 0.9 else rng.choice(["  ", "\n", "\t", " - ", "... "]))
    return "".join(out).strip(" ")


def code(rng):
    tpl = rng.choice(CODE_SNIPPETS)
    return tpl.format(f=rng.choice(["compute", "get_value", "HandleRequest", "_priv", "f2"]),
                      w=rng.choice(EN_WORDS), n=rng.randint(0, 10 ** rng.randint(1, 7)))


def chinese(rng):
    parts = []
    for _ in range(rng.randint(1, 6)):
        parts.append(cjk(rng, rng.randint(1, 12), 0x4E00, 0x9FA5))
        r = rng.random()
        if r < 0.5:
            parts.append(rng.choice(ZH_PUNCT))
        elif r < 0.6:
            parts.append(str(rng.randint(0, 99999)))
        elif r < 0.7:
            parts.append(rng.choice(EN_WORDS))
        elif r < 0.8:
            parts.append(" ")
    return "".join(parts)


def japanese(rng):
    parts = []
    for _ in range(rng.randint(1, 8)):
        k = rng.randint(0, 4)
        if k == 0:
            parts.append(hira(rng, rng.randint(1, 8)))
        elif k == 1:
            parts.append(kata(rng, rng.randint(1, 8)))
        elif k == 2:
            parts.append(cjk(rng, rng.randint(1, 4), 0x4E00, 0x9FA5))
        elif k == 3:
            parts.append(rng.choice(JA_EXTRA))
        else:
            parts.append(rng.choice(["です", "ます。", "東京", "ラーメン", "ｶﾀｶﾅ", "ゟ", "ヿ", "゠"]))
    return "".join(parts)


def korean(rng):
    words = [hangul(rng, rng.randint(1, 5)) for _ in range(rng.randint(1, 8))]
    s = " ".join(words)
    if rng.random() < 0.3:
        s += rng.choice(["입니다.", "ㅋㅋㅋ", "가", "?", " 123"])
    return s


def greek_cyrillic(rng):
    pool = GREEK + CYRILLIC + ARABIC_HEBREW + INDIC_THAI
    return " ".join(rng.choice(pool) for _ in range(rng.randint(1, 8))) + rng.choice(["", ".", "!", "\n"])


def emoji(rng):
    parts = []
    for _ in range(rng.randint(1, 8)):
        r = rng.random()
        if r < 0.6:
            parts.append(rng.choice(EMOJI))
        elif r < 0.8:
            parts.append(rng.choice(EN_WORDS))
        else:
            parts.append(rng.choice([" ", "", "\n", "!!"]))
    return "".join(parts)


def digit_case(rng, n):
    form = rng.randint(0, 5)
    d = digits(rng, n)
    if form == 0:
        return d
    if form == 1:
        return " " + d
    if form == 2:
        return "x" + d + "y"
    if form == 3:
        return d[: n // 2] + "." + d[n // 2:]
    if form == 4:
        return "$" + d + ",00 " + d
    return rng.choice(UNI_DIGITS) + d + rng.choice(UNI_DIGITS)


def whitespace(rng):
    parts = []
    for _ in range(rng.randint(1, 10)):
        parts.append("".join(rng.choice(WS_UNITS) for _ in range(rng.randint(1, 6))))
        if rng.random() < 0.7:
            parts.append(rng.choice(EN_WORDS + ["中文", "123", "!!", "😀", "é"]))
    return "".join(parts)


def special_text(rng, specials):
    parts = []
    for _ in range(rng.randint(1, 8)):
        r = rng.random()
        if r < 0.35:
            parts.append(rng.choice(specials))
        elif r < 0.45:
            t = rng.choice(specials)
            parts.append(t[: rng.randint(1, len(t) - 1)])  # a truncated (non-matching) token
        elif r < 0.8:
            parts.append(rng.choice(EN_WORDS))
        else:
            parts.append(rng.choice([" ", "\n", "", "<", "|", "｜", "<<", ">>", "▁"]))
    return "".join(parts)


def fuzz(rng, n, astral):
    out = []
    for _ in range(n):
        while True:
            cp = rng.randint(0x20, 0x10FFFF if astral else 0xFFFD)
            if not (0xD800 <= cp <= 0xDFFF):
                break
        out.append(chr(cp))
    return "".join(out)


def fuzz_blocks(rng, n):
    # Mostly assigned characters in many scripts, with combining marks and controls mixed in.
    blocks = [(0x20, 0x7E), (0xA0, 0x24F), (0x300, 0x36F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x6FF),
              (0x900, 0x97F), (0xE00, 0xE7F), (0x1100, 0x11FF), (0x1E00, 0x1EFF), (0x2000, 0x206F),
              (0x20A0, 0x20CF), (0x2100, 0x218F), (0x2190, 0x23FF), (0x2500, 0x27BF), (0x3000, 0x303F),
              (0x3040, 0x30FF), (0x3100, 0x312F), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3),
              (0xF900, 0xFAFF), (0xFE00, 0xFE0F), (0xFE30, 0xFE4F), (0xFF00, 0xFFEF), (0x1F300, 0x1FAFF),
              (0x1D400, 0x1D7FF), (0x20000, 0x2A6DF), (0xE0000, 0xE007F), (0x0, 0x1F)]
    out = []
    for _ in range(n):
        lo, hi = rng.choice(blocks)
        out.append(chr(rng.randint(lo, hi)))
    return "".join(out)


# Blocks assigned in Unicode 15.0-16.0 (newer than some regex engines' tables) and a few older ones.
RECENT_BLOCKS = [(0x1FA70, 0x1FAFF), (0x31350, 0x323AF), (0x2EBF0, 0x2EE5F), (0x11F00, 0x11F5F), (0x1E4D0, 0x1E4FF),
                 (0x10D40, 0x10D8F), (0x1CC00, 0x1CEBF), (0x16100, 0x1613F), (0x11380, 0x113FF), (0x1E5D0, 0x1E5FF),
                 (0x0CF0, 0x0CF3), (0x31E0, 0x31EF), (0x2FF0, 0x2FFF), (0x1F000, 0x1F2FF), (0x0870, 0x089F)]


def unicode_context(rng):
    # Code points in contexts where their regex class decides the pieces.
    ctx = [lambda c: " " + c, lambda c: "a" + c + "b", lambda c: c + c + "!", lambda c: "1" + c + "2",
           lambda c: "!" + c, lambda c: "\n" + c + " ", lambda c: " " + c + "x", lambda c: "x" + c + " ",
           lambda c: "\u00e9" + c, lambda c: c + "\u0301"]
    out = []
    for _ in range(rng.randint(2, 10)):
        r = rng.random()
        if r < 0.4:
            lo, hi = rng.choice(RECENT_BLOCKS)
            cp = rng.randint(lo, hi)
        elif r < 0.7:
            cp = rng.randint(0x80, 0xFFFF)
        else:
            cp = rng.randint(0x10000, 0x10FFFF)
        if 0xD800 <= cp <= 0xDFFF:
            cp = 0x1FABF
        out.append(rng.choice(ctx)(chr(cp)))
    return "".join(out)


def long_case(rng, k):
    n = rng.choice([300, 1000, 2500, 5000])
    kinds = [
        lambda: "a" * n,
        lambda: "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(n)),
        lambda: "ab" * (n // 2),
        lambda: digits(rng, n),
        lambda: " " * n,
        lambda: " " * n + "x",
        lambda: "\n" * n,
        lambda: (" \t" * (n // 2)) + "\r\n",
        lambda: "!" * n,
        lambda: "=-" * (n // 2),
        lambda: cjk(rng, n // 2, 0x4E00, 0x9FA5),
        lambda: hangul(rng, n // 2),
        lambda: "😀" * (n // 4),
        lambda: "👍🏽" * (n // 8),
        lambda: "Pneumonoultramicroscopicsilicovolcanoconiosis" * (n // 45),
        lambda: "é" * n,
        lambda: "e\u0301" * (n // 2),
        lambda: english(rng, n // 5),
        lambda: "https://example.com/" + "".join(rng.choice("abcXYZ019/_-%?=&") for _ in range(n)),
        lambda: "\u00a0" * n,
    ]
    return kinds[k % len(kinds)]()


def fixed_cases(specials):
    cases = ["", " ", "  ", "\n", "\r\n", "\t", "a", "A", "Hello world", "Hello, world!", " Hello", "Hello ",
             "hello\nworld", "hello\r\nworld", "hello\n\nworld", "a  b   c    d", "a\t\tb", "a \n b",
             "   leading", "trailing   ", "x \n", "x  \n\n  y", " \r\n \r\n", "\r", "\r\r\n\n",
             "12345", "123456789", "1", "12", "123", "1234", "3.14159", "1,000,000", "0x1F", "v1.2.3",
             "2024-05-31T12:00:00Z", "+1 (555) 123-4567", "'s 't 're", "don't", "I'M", "it's'", "''",
             "\"quoted\"", "(parens)", "[brackets]", "{braces}", "<angle>", "a<b>c", "#hashtag", "@user",
             "$100", "100%", "a/b\\c", "C++", "C#", "x86_64", "snake_case_name", "CamelCaseName",
             "ALLCAPS", ".hidden", ",comma", ".Net", "!Important", "-flag", "--long-flag", "__dunder__",
             "中文", "中文English混合", "日本語のテキスト", "한국어 텍스트", "Ελληνικά", "Русский текст",
             "Ölçü", "İstanbul", "ß", "ﬁ", "Å", "Å", "é", "é", "👍", "👍🏽", "👨‍👩‍👧", "🇯🇵🇺🇸",
             "\u00a0", "\u3000", "a\u00a0b", "a\u3000b", "a\u2028b", "a\u0085b", "a\u180eb", "a\u200bb",
             "a\u001cb", "a\u000bb", "a\u000cb", "a\ufeffb", "\u0000", "a\u0000b", "\u007f", "\u0080\u009f",
             "\ue000", "\U000f0000", "\U0010ffff", "\ufffd", "\uffff", "\U0001d11e", "\u0378", "\u0600",
             "\u061c", "\u200d", "\u200e", "\u2066", "\U000e0001", "\u0301", "a\u0301", " \u0301", "\u0301\u0301x",
             "\U00031350", "\U0002ebf0", "\u31ef", "\u9fa5\u9fa6", "\u4dff\u4e00", "\u3040\u309f\u30a0\u30ff",
             "\u3100", "ゟ゠ヿ", "ｱ", "〆", "々", "〇", " 🪿", "a🪿b", " \U0001fae9x", "a\U00010d40b",
             "x \U00031350\U00031351", " \U0002ebf0", "!\u31ef!",
             ]
    for t in specials:
        cases += [t, "x" + t + "y", " " + t + " ", t + t, t[:-1], t[1:], "<" + t + ">", t + "\n"]
    cases += ["".join(specials[:20]), "<｜User｜>Hi<｜Assistant｜>Hello<｜end▁of▁sentence｜>",
              "<｜begin▁of▁sentence｜><｜begin▁of▁sentence｜>x", "<|EOT|><|EOT|>", "<| EOT|>", "<|eot|>",
              "<｜User｜><｜User｜>", "<｜User｜", "｜User｜>", "<｜Use｜>", "<｜tool▁calls▁begin｜>",
              "<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Paris\"}\n```"
              "<｜tool▁call▁end｜><｜tool▁calls▁end｜>", "<think>\nreasoning\n</think>\n\nanswer"]
    for n in range(1, 41):
        cases.append("7" * n)
        cases.append("".join(str((i * 7 + n) % 10) for i in range(n)))
    return cases


def make_strings(specials):
    rng = random.Random(SEED)
    out = []  # (category, text)
    for s in fixed_cases(specials):
        out.append(("fixed", s))
    plan = [("english", 260, lambda: english(rng, rng.randint(1, 60))),
            ("code", 200, lambda: code(rng) if rng.random() < 0.7 else code(rng) + code(rng)),
            ("chinese", 160, lambda: chinese(rng)),
            ("japanese", 140, lambda: japanese(rng)),
            ("korean", 110, lambda: korean(rng)),
            ("greek_cyrillic_other", 120, lambda: greek_cyrillic(rng)),
            ("emoji", 140, lambda: emoji(rng)),
            ("digits", 160, lambda: digit_case(rng, rng.randint(1, 64))),
            ("whitespace", 200, lambda: whitespace(rng)),
            ("special_tokens", 160, lambda: special_text(rng, specials)),
            ("fuzz_blocks", 160, lambda: fuzz_blocks(rng, rng.randint(1, 40))),
            ("fuzz_bmp", 60, lambda: fuzz(rng, rng.randint(1, 20), False)),
            ("fuzz_any", 60, lambda: fuzz(rng, rng.randint(1, 20), True)),
            ("unicode_context", 300, lambda: unicode_context(rng)),
            ("mixed", 120, lambda: "".join(rng.choice([english(rng, 5), chinese(rng), code(rng), emoji(rng),
                                                       whitespace(rng), japanese(rng), korean(rng)])
                                           for _ in range(rng.randint(2, 6))))]
    for cat, n, fn in plan:
        for _ in range(n):
            out.append((cat, fn()))
    for k in range(40):
        out.append(("long", long_case(rng, k)))
    return out


# ----------------------------------------------------------------------------------------------
# Tokenizer helpers
# ----------------------------------------------------------------------------------------------
def load(tokenizer_dir):
    from tokenizers import Tokenizer
    path = os.path.join(tokenizer_dir, "tokenizer.json")
    tok = Tokenizer.from_file(path)
    with open(os.path.join(tokenizer_dir, "tokenizer_config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    return tok, cfg, path


def token_content(v):
    return v["content"] if isinstance(v, dict) else v


def with_config_post_processor(tokenizer_dir, cfg):
    # What transformers' Llama fast tokenizer does with add_bos_token/add_eos_token: it replaces the
    # tokenizer.json post-processor by a TemplateProcessing that adds BOS/EOS around $A.
    from tokenizers import Tokenizer, processors
    tok = Tokenizer.from_file(os.path.join(tokenizer_dir, "tokenizer.json"))
    add_bos = bool(cfg.get("add_bos_token", False))
    add_eos = bool(cfg.get("add_eos_token", False))
    bos = token_content(cfg.get("bos_token"))
    eos = token_content(cfg.get("eos_token"))
    single = (f"{bos}:0 " if add_bos else "") + "$A:0" + (f" {eos}:0" if add_eos else "")
    pair = single + (f" {bos}:1" if add_bos else "") + " $B:1" + (f" {eos}:1" if add_eos else "")
    special = []
    if add_bos:
        special.append((bos, tok.token_to_id(bos)))
    if add_eos:
        special.append((eos, tok.token_to_id(eos)))
    tok.post_processor = processors.TemplateProcessing(single=single, pair=pair, special_tokens=special)
    return tok


def byte_ids(tok):
    # id of the single-byte token for each byte value (GPT-2 byte->unicode map).
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    m = {b: chr(c) for b, c in zip(bs, cs)}
    return [tok.token_to_id(m[b]) for b in range(256)]


def decode_cases(tok, strings_ids, specials_ids, rng):
    B = byte_ids(tok)
    bos, eos = specials_ids["bos"], specials_ids["eos"]
    user, assistant = specials_ids["user"], specials_ids["assistant"]
    cases = []
    raw = [
        [0xE4], [0xE4, 0xB8], [0xE4, 0xB8, 0xAD], [0xF0, 0x9F], [0xF0, 0x9F, 0x98], [0xF0, 0x9F, 0x98, 0x80],
        [0xC0, 0x80], [0xC1, 0xBF], [0xED, 0xA0, 0x80], [0xED, 0x9F, 0xBF], [0xF4, 0x90, 0x80, 0x80],
        [0xF4, 0x8F, 0xBF, 0xBF], [0xF5, 0x80], [0xFF], [0xFE, 0xFF], [0x80], [0xBF, 0x80, 0x80],
        [0xE0, 0x80, 0x80], [0xE0, 0xA0, 0x80], [0xF0, 0x80, 0x80, 0x80], [0xF0, 0x90, 0x80],
        [0x61, 0xE4, 0x62], [0xE4, 0xB8, 0x61], [0xF0, 0x9F, 0x98, 0x61, 0x62], [0xC3], [0xC3, 0xA9],
        [0xC3, 0xC3, 0xA9], [0xE4, 0xE4, 0xB8, 0xAD], [0xEF, 0xBB, 0xBF], [0xE2, 0x82], [0xE2, 0x82, 0xAC],
    ]
    for seq in raw:
        cases.append([B[b] for b in seq])
        cases.append([bos] + [B[b] for b in seq] + [eos])
    # Incomplete UTF-8 around added tokens (special and non-special), skipped or not.
    for t in [bos, eos, user, assistant, specials_ids["eot"]]:
        cases.append([B[0xE4], t, B[0xB8], B[0xAD]])
        cases.append([B[0xE4], B[0xB8], t, B[0xAD]])
        cases.append([B[0xF0], B[0x9F], t, B[0x98], B[0x80]])
        cases.append([t, B[0xE4], B[0xB8], B[0xAD], t])
        cases.append([B[0x61], t, t, B[0x62]])
    # Every byte token alone and in pairs.
    for b in range(256):
        cases.append([B[b]])
    for _ in range(200):
        cases.append([B[rng.randrange(256)] for _ in range(rng.randint(2, 8))])
    # Random ids over the whole range, including added tokens.
    vocab_n = tok.get_vocab_size(with_added_tokens=True)
    for _ in range(300):
        ids = []
        for _ in range(rng.randint(1, 24)):
            r = rng.random()
            if r < 0.15:
                ids.append(rng.choice(list(specials_ids.values()) + [rng.randint(128000, 128814)]))
            elif r < 0.3:
                ids.append(B[rng.randrange(256)])
            else:
                ids.append(rng.randrange(min(vocab_n, 128000)))
        cases.append(ids)
    # Encoded golden strings (with their BOS) decode back; also a few concatenations.
    for i, ids in enumerate(strings_ids):
        if i % 3 == 0:
            cases.append(ids)
    return cases


def golden(tokenizer_dir, out_path):
    import tokenizers
    tok, cfg, path = load(tokenizer_dir)
    tok_cfg = with_config_post_processor(tokenizer_dir, cfg)
    specials = [t.content for t in tok.get_added_tokens_decoder().values()]
    specials = sorted(set(specials), key=lambda c: tok.token_to_id(c))
    pick = [s for s in specials if "place▁holder" not in s] + [specials[i] for i in (3, 100, 700, 801)]
    strings = make_strings(pick)
    entries = []
    raw_special_differs = 0
    t0 = time.time()
    for cat, s in strings:
        ids = tok.encode(s, add_special_tokens=False).ids
        ids_sp = tok_cfg.encode(s, add_special_tokens=True).ids
        if tok.encode(s, add_special_tokens=True).ids != ids:
            raw_special_differs += 1
        entries.append({"cat": cat, "text": s, "ids": ids, "ids_special": ids_sp})
    enc_s = time.time() - t0
    rng = random.Random(SEED + 1)
    sid = {"bos": tok.token_to_id("<｜begin▁of▁sentence｜>"), "eos": tok.token_to_id("<｜end▁of▁sentence｜>"),
           "user": tok.token_to_id("<｜User｜>"), "assistant": tok.token_to_id("<｜Assistant｜>"),
           "eot": tok.token_to_id("<|EOT|>")}
    dec = []
    for ids in decode_cases(tok, [e["ids_special"] for e in entries], sid, rng):
        dec.append({"ids": ids, "text": tok.decode(ids, skip_special_tokens=False),
                    "text_skip": tok.decode(ids, skip_special_tokens=True)})
    with open(path, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    doc = {"generator": "scripts/make_tokenizer_golden.py", "tokenizers_version": tokenizers.__version__,
           "tokenizer_json_sha256": sha, "seed": SEED,
           "note": "ids: encode(add_special_tokens=False); ids_special: encode with the tokenizer_config "
                   "add_bos_token/add_eos_token TemplateProcessing (transformers' behaviour)",
           "raw_post_processor_added_tokens_count": raw_special_differs,
           "encode": entries, "decode": dec}
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, separators=(",", ":"))
    cats = {}
    for e in entries:
        cats[e["cat"]] = cats.get(e["cat"], 0) + 1
    print(f"golden: {len(entries)} strings {cats}, {len(dec)} decode cases, encode {enc_s:.2f}s, "
          f"raw post-processor changed {raw_special_differs}, size {os.path.getsize(out_path)} bytes")


def bench_corpus(path, mb):
    rng = random.Random(SEED + 7)
    docs, total = [], 0
    gens = [lambda: english(rng, rng.randint(50, 400)), lambda: "".join(code(rng) for _ in range(rng.randint(3, 12))),
            lambda: "".join(chinese(rng) for _ in range(rng.randint(5, 30))),
            lambda: "".join(japanese(rng) for _ in range(rng.randint(5, 30))),
            lambda: " ".join(korean(rng) for _ in range(rng.randint(5, 30))),
            lambda: " ".join(greek_cyrillic(rng) for _ in range(rng.randint(5, 30))),
            lambda: english(rng, 100) + "".join(emoji(rng) for _ in range(10)),
            lambda: " ".join(digit_case(rng, rng.randint(1, 20)) for _ in range(50))]
    weights = [5, 3, 2, 1, 1, 1, 1, 1]
    while total < mb * 1e6:
        d = rng.choices(gens, weights)[0]()
        docs.append(d)
        total += len(d.encode("utf-8"))
    with open(path, "w", encoding="utf-8") as f:
        json.dump(docs, f, ensure_ascii=False)
    print(f"bench corpus: {len(docs)} docs, {total} bytes -> {path}")


def bench_time(tokenizer_dir, corpus_path):
    tok, _, _ = load(tokenizer_dir)
    with open(corpus_path, encoding="utf-8") as f:
        docs = json.load(f)
    nbytes = sum(len(d.encode("utf-8")) for d in docs)
    res = {}
    for name, fn in [("encode_loop", lambda: [tok.encode(d, add_special_tokens=False) for d in docs]),
                     ("encode_batch", lambda: tok.encode_batch(docs, add_special_tokens=False))]:
        best = 1e9
        for _ in range(3):
            t0 = time.perf_counter()
            r = fn()
            best = min(best, time.perf_counter() - t0)
        res[name] = nbytes / best / 1e6
        ntok = sum(len(e.ids) for e in r)
        print(f"rust tokenizers {name}: {nbytes} bytes, {ntok} tokens, best {best:.3f}s, {res[name]:.2f} MB/s "
              f"(RAYON_NUM_THREADS={os.environ.get('RAYON_NUM_THREADS')})")
    return res


def unicode_classes(out_path):
    # Which code points the regex engine of the Rust crate (Oniguruma) puts in each class used by
    # tokenizer.json patterns: one Split(Isolated) pre-tokenizer per class over every code point,
    # separated by U+0001 (in none of the classes); matched code points come out as 1-char pieces.
    import tokenizers
    from tokenizers import Tokenizer
    classes = {"L": "\\p{L}", "M": "\\p{M}", "N": "\\p{N}", "P": "\\p{P}", "S": "\\p{S}", "s": "\\s"}
    out = {"source": f"Rust tokenizers {tokenizers.__version__} (Oniguruma) regex classes, "
                     "see scripts/make_tokenizer_golden.py --unicode-classes"}
    for name, pat in classes.items():
        j = {"version": "1.0", "added_tokens": [], "normalizer": None, "post_processor": None, "decoder": None,
             "pre_tokenizer": {"type": "Split", "pattern": {"Regex": pat}, "behavior": "Isolated", "invert": False},
             "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}}
        pre = Tokenizer.from_str(json.dumps(j)).pre_tokenizer
        members = []
        for base in range(0, 0x110000, 4096):
            cps = [cp for cp in range(base, min(base + 4096, 0x110000)) if not (0xD800 <= cp <= 0xDFFF) and cp != 1]
            text = "\x01" + "".join(chr(cp) + "\x01" for cp in cps)
            for piece, _ in pre.pre_tokenize_str(text):
                if "\x01" not in piece:
                    assert len(piece) == 1, piece
                    members.append(ord(piece))
        ranges = []
        for cp in members:
            if ranges and ranges[-1][1] == cp - 1:
                ranges[-1][1] = cp
            else:
                ranges.append([cp, cp])
        out[name] = ranges
        print(f"class {name}: {len(members)} code points, {len(ranges)} ranges")
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(out, f, separators=(",", ":"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer-dir")
    ap.add_argument("--out")
    ap.add_argument("--bench-corpus")
    ap.add_argument("--bench-mb", type=float, default=8)
    ap.add_argument("--bench-time")
    ap.add_argument("--unicode-classes", help="write the Rust regex engine's class membership JSON here")
    a = ap.parse_args()
    if a.unicode_classes:
        unicode_classes(a.unicode_classes)
    if a.out:
        golden(a.tokenizer_dir, a.out)
    if a.bench_corpus:
        bench_corpus(a.bench_corpus, a.bench_mb)
    if a.bench_time:
        bench_time(a.tokenizer_dir, a.bench_time)
    return 0


if __name__ == "__main__":
    sys.exit(main())
