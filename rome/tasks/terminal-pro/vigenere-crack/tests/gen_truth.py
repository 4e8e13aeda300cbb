import random
import string

rng = random.Random(8130)
words = ("the of and to in is was that for it with as his on be at by had are but from or have an they which "
         "one you were her all she there would their we him been has when who will more no if out so said what "
         "up its about into than them can only other new some could time these two may then do first any my now "
         "such like our over man me even most made after also did many before must through back years where much "
         "your way well down should because each just those people how too little state good very make world "
         "still own see men work long get here between both life being under never day same another know while "
         "last might us great old year off come since against go came right used take three").split()
weights = [1 / (i + 1) ** 0.9 for i in range(len(words))]
key = "".join(rng.choice(string.ascii_uppercase) for _ in range(rng.randint(5, 9)))
sentences = []
for _ in range(90):
    s = " ".join(rng.choices(words, weights, k=rng.randint(6, 14)))
    sentences.append(s[0].upper() + s[1:] + rng.choice([".", ".", ",", "?", "!"]))
plain = " ".join(sentences).upper()
out, i = [], 0
for ch in plain:
    if ch in string.ascii_uppercase:
        out.append(chr((ord(ch) - 65 + ord(key[i % len(key)]) - 65) % 26 + 65))
        i += 1
    else:
        out.append(ch)
open("/app/intercept.txt", "w").write("".join(out) + "\n")
