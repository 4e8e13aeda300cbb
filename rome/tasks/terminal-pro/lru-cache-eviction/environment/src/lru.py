class LRUCache:
    def __init__(self, capacity):
        self.capacity = capacity
        self._data = {}
        self._order = []

    def get(self, key, default=None):
        return self._data.get(key, default)

    def put(self, key, value):
        if len(self._data) > self.capacity:
            oldest = self._order.pop()
            del self._data[oldest]
        if key not in self._data:
            self._order.append(key)
        self._data[key] = value

    def __len__(self):
        return len(self._data)

    def keys(self):
        return list(self._order)
