def words(text):
    return [w.lower() for w in text.split(" ") if w]
