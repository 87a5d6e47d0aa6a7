package notify

import "time"

// ttlCache maps keys to values for at most ttl, holding at most size
// entries. It is not safe for concurrent use: Slack guards it with its mutex.
type ttlCache struct {
	ttl     time.Duration
	size    int
	entries map[string]cacheEntry
}

type cacheEntry struct {
	value   string
	expires time.Time
}

func newTTLCache(size int, ttl time.Duration) *ttlCache {
	return &ttlCache{ttl: ttl, size: size, entries: make(map[string]cacheEntry)}
}

// get returns the value for key if it is there and has not expired at now.
func (c *ttlCache) get(key string, now time.Time) (string, bool) {
	e, ok := c.entries[key]
	if !ok {
		return "", false
	}
	if !now.Before(e.expires) {
		delete(c.entries, key)
		return "", false
	}
	return e.value, true
}

// put stores key → value until now+ttl. When the cache is full it first
// drops expired entries, then the entry closest to expiry.
func (c *ttlCache) put(key, value string, now time.Time) {
	if _, ok := c.entries[key]; !ok && len(c.entries) >= c.size {
		c.evict(now)
	}
	c.entries[key] = cacheEntry{value: value, expires: now.Add(c.ttl)}
}

func (c *ttlCache) delete(key string) {
	delete(c.entries, key)
}

func (c *ttlCache) evict(now time.Time) {
	var oldestKey string
	var oldest time.Time
	for k, e := range c.entries {
		if !now.Before(e.expires) {
			delete(c.entries, k)
			continue
		}
		if oldestKey == "" || e.expires.Before(oldest) {
			oldestKey, oldest = k, e.expires
		}
	}
	if len(c.entries) >= c.size && oldestKey != "" {
		delete(c.entries, oldestKey)
	}
}
