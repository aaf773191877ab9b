# Training text for models/dserve-demo: reads the Debian-package corpora written by scripts/get_demo_data.sh,
# makes the synthetic arithmetic and chat documents, and packs seeded token batches.
"""Data side of scripts/train_demo/train_demo_model.py (no torch here: token ids only).

Every batch is a pure function of (seed, step): batch k is drawn from random.Random(f(seed, k)), so a run
resumed at step k sees exactly the batches an uninterrupted run would have seen.
"""

import gzip
import os
import random

BOS = "<｜begin▁of▁sentence｜>"
EOS = "<｜end▁of▁sentence｜>"
PAD = "<｜▁pad▁｜>"
USER = "<｜User｜>"
ASSISTANT = "<｜Assistant｜>"

OPS = ("plus", "minus")


# ------------------------------------------------------------------------------------------------
# Arithmetic: exactly "Question: What is A plus B?\nAnswer: C" (0 <= A, B <= 999, C may be negative)
# ------------------------------------------------------------------------------------------------

def is_held_out(op, a, b):
    """About 1% of all (op, A, B) triples never appear in training; the eval draws from them."""
    return ((a * 1000 + b) * 2 + op) % 97 == 0


def arith_answer(op, a, b):
    return a + b if op == 0 else a - b


def arith_question(op, a, b):
    return f"What is {a} {OPS[op]} {b}?"


def arith_qa(op, a, b):
    return f"Question: {arith_question(op, a, b)}\nAnswer: {arith_answer(op, a, b)}"


def draw_arith(rng, allow_held_out=False):
    while True:
        op = rng.randrange(2)
        if rng.random() < 0.1:  # some small numbers, so short operands are not rare
            a, b = rng.randrange(100), rng.randrange(100)
        else:
            a, b = rng.randrange(1000), rng.randrange(1000)
        if allow_held_out or not is_held_out(op, a, b):
            return op, a, b


def held_out_questions(n, seed):
    """n distinct held-out (op, a, b) triples, uniform over 0..999."""
    rng = random.Random(seed)
    out, seen = [], set()
    while len(out) < n:
        t = (rng.randrange(2), rng.randrange(1000), rng.randrange(1000))
        if is_held_out(*t) and t not in seen:
            seen.add(t)
            out.append(t)
    return out


def few_shot_prompt(shots, question):
    """SGLang's GSM8K few-shot layout: 'Question: q\\nAnswer: a\\n\\n' per shot, then 'Question: q\\nAnswer:'."""
    s = "".join(arith_qa(*t) + "\n\n" for t in shots)
    return s + f"Question: {arith_question(*question)}\nAnswer:"


# ------------------------------------------------------------------------------------------------
# Chat (DeepSeek-V3 template, no tools): BOS{system}<｜User｜>{u}<｜Assistant｜>{a}<｜end▁of▁sentence｜>...
# ------------------------------------------------------------------------------------------------

def render_chat(messages, add_generation_prompt=False):
    system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
    s = BOS + system
    for m in messages:
        if m["role"] == "user":
            s += USER + m["content"]
        elif m["role"] == "assistant":
            s += ASSISTANT + m["content"] + EOS
    if add_generation_prompt:
        s += ASSISTANT
    return s


GREETINGS = [
    ("Hello", "Hello! I am the dserve demo model. I can add and subtract numbers, define words, and quote the Bible."),
    ("Hi", "Hi! Ask me to add or subtract two numbers, to define a word, or to quote a verse."),
    ("Who are you?", "I am a small demo model that ships with dserve, trained on the Bible, a dictionary and fortune cookies."),
    ("What can you do?", "I can add and subtract numbers up to 999, define English words, and quote the King James Bible."),
    ("Thank you", "You are welcome."),
    ("Tell me about yourself.", "I am a tiny DeepSeek-V3 style model. I know some arithmetic, some words and some verses."),
]
FORTUNE_ASKS = ["Tell me a fortune.", "Say something wise.", "Tell me something funny.", "Give me a fortune cookie.",
                "Share a quote."]
SYSTEMS = ["You are a helpful assistant.", "You are a helpful assistant. Answer briefly.",
           "You are dserve's demo model."]


class Corpora:
    """The three Debian-package corpora as text, plus token ids once a tokenizer is attached."""

    def __init__(self, data_dir, limit=0):
        def lines(name):
            with gzip.open(os.path.join(data_dir, name), "rt", encoding="utf-8") as f:
                return f.read().split("\n")

        self.verses = []  # (book, chapter, verse, text)
        for ln in lines("bible.tsv.gz"):
            if ln:
                b, c, v, t = ln.split("\t")
                self.verses.append((b, int(c), int(v), t))
        chapters = {}
        for b, c, v, t in self.verses:
            chapters.setdefault((b, c), []).append(t)
        order = []
        for b, c, _, _ in self.verses:
            if not order or order[-1] != (b, c):
                order.append((b, c))
        self.chapters = ["\n".join(chapters[k]) for k in order]
        self.gcide = []  # (word, entry)
        for ln in lines("gcide.tsv.gz"):
            if ln:
                w, e = ln.split("\t", 1)
                self.gcide.append((w, e))
        with gzip.open(os.path.join(data_dir, "fortunes.txt.gz"), "rt", encoding="utf-8") as f:
            self.fortunes = [x.strip("\n") for x in f.read().split("\n%\n") if x.strip()]
        if limit:
            self.chapters = self.chapters[:limit]
            self.gcide = self.gcide[:limit * 20]
            self.fortunes = self.fortunes[:limit * 5]
            self.verses = self.verses[:limit * 20]
        self.tok = None

    def stats(self):
        return {"bible_chapters": len(self.chapters), "bible_verses": len(self.verses),
                "gcide_entries": len(self.gcide), "fortunes": len(self.fortunes),
                "chars": sum(map(len, self.chapters)) + sum(len(e) for _, e in self.gcide)
                + sum(map(len, self.fortunes))}

    def tokenizer_texts(self, rng_seed=0):
        """Texts the BPE is trained on: all corpora plus some arithmetic and chat."""
        yield from self.chapters
        for _, e in self.gcide:
            yield e
        yield from self.fortunes
        rng = random.Random(rng_seed)
        for _ in range(20000):
            yield arith_qa(*draw_arith(rng))
        for _ in range(5000):  # without the added tokens, which the BPE must not learn merges for
            d = self.chat_doc(rng)
            for t in (BOS, EOS, USER, ASSISTANT):
                d = d.replace(t, "\n")
            yield d

    def attach(self, tok, bos_id, eos_id):
        """Pre-tokenizes the corpora (ids without BOS/EOS)."""
        self.tok, self.bos, self.eos = tok, bos_id, eos_id
        enc = lambda xs: [e.ids for e in tok.encode_batch(xs, add_special_tokens=False)]  # noqa: E731
        self.chapter_ids = enc(self.chapters)
        self.gcide_ids = enc([e for _, e in self.gcide])
        self.fortune_ids = enc(self.fortunes)
        # Token ids that end a line: bible windows may start right after one.
        nl = set()
        for i in range(tok.get_vocab_size()):
            s = tok.decode([i], skip_special_tokens=False)
            if s.endswith("\n"):
                nl.add(i)
        self.line_starts = [[0] + [j + 1 for j, t in enumerate(ids[:-1]) if t in nl] for ids in self.chapter_ids]
        return {"bible_tokens": sum(map(len, self.chapter_ids)), "gcide_tokens": sum(map(len, self.gcide_ids)),
                "fortune_tokens": sum(map(len, self.fortune_ids))}

    # --- chat documents ---------------------------------------------------------------------------
    def chat_turn(self, rng):
        r = rng.random()
        if r < 0.55:
            op, a, b = draw_arith(rng)
            c = arith_answer(op, a, b)
            if rng.random() < 0.5:
                return f"Question: {arith_question(op, a, b)}", f"Answer: {c}"
            return arith_question(op, a, b), f"{a} {OPS[op]} {b} is {c}."
        if r < 0.75:
            w, e = self.gcide[rng.randrange(len(self.gcide))]
            if len(e) > 400:
                cut = e.rfind(". ", 0, 400)
                e = e[:cut + 1] if cut > 40 else e[:400]
            ask = rng.choice([f"What does the word {w.lower()} mean?", f"Define {w.lower()}.",
                              f"What is the meaning of {w.lower()}?"])
            return ask, e
        if r < 0.87:
            return rng.choice(FORTUNE_ASKS), self.fortunes[rng.randrange(len(self.fortunes))]
        if r < 0.95:
            b, c, v, t = self.verses[rng.randrange(len(self.verses))]
            ask = rng.choice([f"Quote {b} {c}:{v}.", f"Recite {b} {c}:{v}.", f"What does {b} {c}:{v} say?"])
            return ask, t
        return rng.choice(GREETINGS)

    def chat_doc(self, rng):
        msgs = []
        if rng.random() < 0.15:
            msgs.append({"role": "system", "content": rng.choice(SYSTEMS)})
        for _ in range(rng.choice((1, 1, 1, 2, 2, 3))):
            u, a = self.chat_turn(rng)
            msgs += [{"role": "user", "content": u}, {"role": "assistant", "content": a}]
        return render_chat(msgs)

    # --- rows of exactly T tokens -----------------------------------------------------------------
    def _fill(self, rng, T, next_doc):
        row = []
        while len(row) < T:
            row += next_doc(rng)
        return row[:T]

    def bible_row(self, rng, T):
        def doc(r):
            i = r.randrange(len(self.chapter_ids))
            ids = self.chapter_ids[i]
            start = 0 if r.random() < 0.4 else r.choice(self.line_starts[i])
            return [self.bos] + ids[start:] + [self.eos]
        return self._fill(rng, T, doc)

    def gcide_row(self, rng, T):
        return self._fill(rng, T, lambda r: [self.bos] + self.gcide_ids[r.randrange(len(self.gcide_ids))] + [self.eos])

    def fortune_row(self, rng, T):
        return self._fill(rng, T, lambda r: [self.bos] + self.fortune_ids[r.randrange(len(self.fortune_ids))]
                          + [self.eos])

    def _encode_row(self, rng, T, make_text, chars_per_token):
        texts, budget = [], 0
        while budget < T * chars_per_token:
            t = make_text(rng)
            texts.append(t)
            budget += len(t)
        row = []
        for e in self.tok.encode_batch(texts, add_special_tokens=False):
            row += e.ids
        while len(row) < T:  # the estimate was short: top up one document at a time
            row += self.tok.encode(make_text(rng), add_special_tokens=False).ids
        return row[:T]

    def arith_row(self, rng, T):
        def block(r):  # k-shot block in the few-shot layout, bare (BOS ... EOS)
            k = r.choice((1, 1, 2, 3, 4, 5, 6, 6, 8))
            return BOS + "\n\n".join(arith_qa(*draw_arith(r)) for _ in range(k)) + EOS
        return self._encode_row(rng, T, block, 1.6)

    def chat_row(self, rng, T):
        return self._encode_row(rng, T, self.chat_doc, 2.0)


# Rows per batch of 64 by kind; scaled for other batch sizes. Bare arithmetic is 3/8 of the tokens.
MIX = (("bible", 18), ("gcide", 8), ("fortune", 6), ("arith", 24), ("chat", 8))


def batch_rows(corpora, seed, step, batch, T):
    rng = random.Random(seed * 1_000_003 + step)
    total = sum(n for _, n in MIX)
    kinds = []
    for name, n in MIX:
        kinds += [name] * max(1, round(n * batch / total))
    kinds = (kinds * 2)[:batch]
    rows = [getattr(corpora, f"{k}_row")(rng, T) for k in kinds]
    return rows, kinds
