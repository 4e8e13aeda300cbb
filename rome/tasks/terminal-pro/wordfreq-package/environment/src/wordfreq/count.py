from collections import Counter

from wordfreq import DEFAULT_TOP
from wordfreq.tokenize import words


def top_words(text, n=DEFAULT_TOP):
    counts = Counter(words(text))
    return sorted(counts.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)[:n]
