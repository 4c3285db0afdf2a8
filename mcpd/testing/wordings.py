"""Capability requests as agents word them, for tests and benchmarks of the report's grouping.

``realistic(n)``: needs from a few dozen domains, each asked in several wordings (synonyms,
inflections, word order, filler, a detail added), some asked again and again, so that groups,
near misses and one-offs all occur. ``one_shared_word(n)``: distinct wordings that all share one
word and nothing else, the shape that made grouping quadratic.
"""

from __future__ import annotations

import random
import string
from collections import Counter

_NEED_WORDS = (
    "convert pdf markdown, convert docx pdf, translate text french, send sms message,"
    " send email attachment, book flight ticket, book hotel room, search flight price,"
    " read calendar event, create calendar invite, resize image png, compress video mp4,"
    " transcribe audio recording, summarize youtube video, query postgres database,"
    " deploy kubernetes cluster, scan docker image, check stock price, track package delivery,"
    " order pizza delivery, pay invoice stripe, generate qr code, ocr scanned receipt,"
    " merge pdf files, fetch weather forecast, play spotify playlist, post slack channel,"
    " open jira ticket, review github pull, backup s3 bucket"
)
_NEEDS = [tuple(need.split()) for need in _NEED_WORDS.split(",")]
_SYNONYMS = {
    "convert": ("converting", "conversion", "turn"),
    "send": ("sending", "text"),
    "book": ("booking", "reserve"),
    "search": ("find", "look"),
    "create": ("make", "add"),
    "summarize": ("summary", "summarise"),
    "translate": ("translation", "translating"),
    "check": ("checking", "get"),
    "fetch": ("get", "show"),
    "message": ("messages",),
    "files": ("documents",),
    "ticket": ("tickets", "issue"),
}
_FILLER = ("please", "a", "the", "for me", "I need to", "can you", "some", "my", "quickly", "to")
_DETAILS = ("today", "from a url", "in bulk", "for my team", "with a password", "on mobile", "as json")


def _word(rng: random.Random) -> str:
    return "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(4, 9)))


def realistic(n: int, seed: int = 0) -> list[tuple[str, int]]:
    """``n`` distinct (wording, times asked), the most asked first, as the store hands them over."""
    rng = random.Random(seed)
    asked: Counter[str] = Counter()
    while len(asked) < n:
        words = [rng.choice(_SYNONYMS.get(w, (w,))) if rng.random() < 0.3 else w for w in rng.choice(_NEEDS)]
        if rng.random() < 0.3:
            rng.shuffle(words)
        if rng.random() < 0.5:
            words.insert(rng.randrange(len(words) + 1), rng.choice(_FILLER))
        if rng.random() < 0.3:
            words.append(rng.choice(_DETAILS))
        if rng.random() < 0.2:  # a one-off the catalogue could never cover
            words = [*words[:1], _word(rng), _word(rng)]
        asked[" ".join(words)] += rng.choice((1, 1, 1, 2, 5))
    return asked.most_common()


def one_shared_word(n: int, seed: int = 0) -> list[tuple[str, int]]:
    """``n`` distinct wordings "convert" + four random words, each asked once."""
    rng = random.Random(seed)
    return [(" ".join(["convert", *(_word(rng) for _ in range(4))]), 1) for _ in range(n)]
