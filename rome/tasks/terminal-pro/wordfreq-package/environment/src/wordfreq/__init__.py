"""Word frequencies of a text file."""
from wordfreq.count import top_words

DEFAULT_TOP = 10
