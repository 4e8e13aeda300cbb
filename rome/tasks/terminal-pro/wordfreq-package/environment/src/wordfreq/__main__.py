import sys

from wordfreq import top_words


def main(argv):
    path = argv[0]
    n = int(argv[argv.index("--top") + 1]) if "--top" in argv else 10
    text = open(path).read()
    for word, count in top_words(text, n):
        print(word, count)


main(sys.argv[1:])
